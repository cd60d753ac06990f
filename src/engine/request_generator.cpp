#include "engine/request_generator.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"

namespace vela {

RequestGenerator::RequestGenerator(LlamaForward& forward, KvCache& cache, BlockAllocator& blocks,
                                   const Tokenizer& tokenizer)
    : forward_(forward),
      cache_(cache),
      blocks_(blocks),
      tokenizer_(tokenizer),
      n_vocab_(forward.model().config().n_vocab) {
  const int32_t bs = cache.config().block_size;
  const int32_t max_blocks = (forward.options().max_context + bs - 1) / bs;
  block_table_.assign(size_t(max_blocks), -1);
  owned_blocks_.reserve(size_t(max_blocks));
  positions_.resize(size_t(forward.options().max_batch_tokens));
  seq_index_.assign(size_t(forward.options().max_batch_tokens), 0);
  logits_.resize(size_t(n_vocab_));
}

Status RequestGenerator::ensure_blocks(int32_t n_tokens) {
  const int32_t bs = cache_.config().block_size;
  const int32_t needed = (n_tokens + bs - 1) / bs;
  const int32_t have = static_cast<int32_t>(owned_blocks_.size());
  if (needed <= have) return {};
  if (needed > static_cast<int32_t>(block_table_.size()) || !blocks_.allocate(needed - have, owned_blocks_))
    return make_error("out of KV cache blocks for " + std::to_string(n_tokens) + " tokens");
  for (int32_t i = have; i < needed; ++i) block_table_[size_t(i)] = owned_blocks_[size_t(i)];
  return {};
}

Status RequestGenerator::forward(std::span<const int32_t> tokens, int32_t first_position) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (auto st = ensure_blocks(first_position + n); !st) return st;
  for (int32_t i = 0; i < n; ++i) positions_[size_t(i)] = first_position + i;
  const int32_t last = n - 1;
  ForwardBatch batch;
  batch.token_ids = tokens;
  batch.positions = std::span<const int32_t>(positions_.data(), size_t(n));
  batch.seq_index = std::span<const int32_t>(seq_index_.data(), size_t(n));
  batch.block_tables = block_table_;
  batch.max_blocks_per_seq = static_cast<int32_t>(block_table_.size());
  batch.logits_indices = std::span<const int32_t>(&last, 1);
  return forward_.forward(batch, cache_, logits_);
}

Result<CompletionOutput> RequestGenerator::run(size_t request_index, std::span<const int32_t> prompt,
                                               const SamplingParams& params, const StreamCallback& on_delta,
                                               RequestMetrics& metrics) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const Clock::time_point start = Clock::now();
  if (prompt.empty()) return make_error("the prompt is empty (no tokens)");
  const int32_t max_context = forward_.options().max_context;
  if (static_cast<int64_t>(prompt.size()) >= max_context)
    return make_error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                      std::to_string(max_context) + " tokens");

  // Blocks go back to the pool however this request ends.
  struct BlockGuard {
    RequestGenerator& g;
    ~BlockGuard() {
      g.blocks_.release(g.owned_blocks_);
      g.owned_blocks_.clear();
      std::fill(g.block_table_.begin(), g.block_table_.end(), -1);
    }
  } guard{*this};

  // Prefill in chunks the forward pass accepts.
  const int32_t chunk = forward_.options().max_batch_tokens;
  for (size_t start = 0; start < prompt.size(); start += size_t(chunk)) {
    const size_t n = std::min(prompt.size() - start, size_t(chunk));
    if (auto st = forward(prompt.subspan(start, n), static_cast<int32_t>(start)); !st) return st.error();
  }

  metrics.prefill_seconds = seconds_since(start);
  const Clock::time_point decode_start = Clock::now();

  Sampler sampler(params, n_vocab_);
  sampler.set_prompt(prompt);
  StopMatcher stop(params.stop);
  StreamingDetokenizer detok(tokenizer_);
  CompletionOutput out;
  int32_t n_past = static_cast<int32_t>(prompt.size());
  bool cancelled = false;

  const auto emit = [&](int32_t token, std::string text, const TokenLogprobs* lp, bool finished) {
    out.text += text;
    if (!on_delta) return;
    StreamDelta d;
    d.request_index = request_index;
    d.token = token;
    d.text = std::move(text);
    d.logprobs = lp;
    d.finished = finished;
    d.finish_reason = out.finish_reason;
    if (!on_delta(d)) cancelled = true;
  };

  for (int32_t step = 0; step < params.max_tokens; ++step) {
    const SampledToken s = sampler.sample(logits_);
    sampler.accept(s.token);
    const bool is_stop_token =
        (!params.ignore_eos && tokenizer_.is_eog(s.token)) ||
        std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), s.token) != params.stop_token_ids.end();
    out.token_ids.push_back(s.token);
    const TokenLogprobs* lp = nullptr;
    if (params.logprobs) {
      TokenLogprobs entry{s.token, tokenizer_.token_to_piece(s.token), s.logprob, {}};
      for (const auto& alt : s.top) entry.top.push_back({alt.token, tokenizer_.token_to_piece(alt.token), alt.logprob});
      out.logprobs.push_back(std::move(entry));
      lp = &out.logprobs.back();
    }
    if (is_stop_token) {
      out.finish_reason = FinishReason::kStop;
      break;
    }
    std::string text = stop.push(detok.push(s.token));
    if (stop.stopped()) {
      out.finish_reason = FinishReason::kStop;
      out.stop_reason = stop.matched();
      emit(s.token, std::move(text), lp, false);
      break;
    }
    emit(s.token, std::move(text), lp, false);
    if (cancelled) {
      out.finish_reason = FinishReason::kStop;
      break;
    }
    if (step + 1 == params.max_tokens) break;
    if (n_past + 1 >= max_context) break;  // context full: finish with "length"
    const int32_t token = s.token;
    if (auto st = forward(std::span<const int32_t>(&token, 1), n_past); !st) return st.error();
    ++n_past;
  }

  // Release held-back text (an incomplete character or a stop-string prefix that never completed).
  std::string tail;
  if (!stop.stopped()) tail = stop.push(detok.flush()) + stop.flush();
  emit(-1, std::move(tail), nullptr, true);
  metrics.decode_seconds = seconds_since(decode_start);
  return out;
}

}  // namespace vela

#include "spec/draft_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "sampling/vector_math.h"

namespace vela {

Status check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab())
    return make_error("the draft model's vocabulary has " + std::to_string(draft.n_vocab()) +
                      " tokens, the target's " + std::to_string(target.n_vocab()) +
                      ": a draft must share the target's vocabulary");
  for (int32_t id = 0; id < target.n_vocab(); ++id)
    if (target.token_text(id) != draft.token_text(id))
      return make_error("the draft model's vocabulary differs from the target's at token " +
                        std::to_string(id) + " ('" + std::string(draft.token_text(id)) + "' vs '" +
                        std::string(target.token_text(id)) + "')");
  const struct {
    const char* name;
    int32_t target, draft;
  } specials[] = {{"BOS", target.bos_id(), draft.bos_id()},
                  {"EOS", target.eos_id(), draft.eos_id()},
                  {"end-of-turn", target.eot_id(), draft.eot_id()},
                  {"unknown", target.unknown_id(), draft.unknown_id()},
                  {"padding", target.padding_id(), draft.padding_id()}};
  for (const auto& s : specials)
    if (s.target != s.draft)
      return make_error(std::string("the draft model's ") + s.name + " token id is " +
                        std::to_string(s.draft) + ", the target's " + std::to_string(s.target));
  return {};
}

namespace {

ForwardOptions draft_forward_options(const DraftModelOptions& o) {
  ForwardOptions fo;
  fo.max_batch_tokens = o.max_tokens;
  fo.max_logits = o.max_seqs;
  fo.max_context = o.max_context;
  fo.n_threads = o.n_threads;
  return fo;
}

KvCacheConfig draft_cache_config(const Model& m, const DraftModelOptions& o) {
  const ModelConfig& c = m.config();
  const int32_t per_seq = (o.max_context + o.block_size - 1) / o.block_size;
  return model_cache_config(c, o.block_size, o.n_blocks > 0 ? o.n_blocks : o.max_seqs * per_seq,
                            o.kv_type);
}

}  // namespace

DraftModel::DraftModel(std::shared_ptr<const Model> model, const DraftModelOptions& options,
                       std::shared_ptr<ThreadPool> pool)
    : options_(options),
      forward_(model, draft_forward_options(options), std::move(pool)),
      cache_(draft_cache_config(*model, options)),
      pool_(cache_.config().n_blocks, false),
      kv_(pool_, options.block_size) {
  max_blocks_per_seq_ = (options.max_context + options.block_size - 1) / options.block_size;
  tokens_.resize(size_t(options.max_tokens));
  positions_.resize(size_t(options.max_tokens));
  seq_index_.resize(size_t(options.max_tokens));
  block_tables_.resize(size_t(options.max_seqs) * size_t(max_blocks_per_seq_));
  rows_.resize(size_t(options.max_seqs));
  const size_t n_vocab = size_t(model->config().n_vocab);
  logits_.resize(size_t(options.max_seqs) * n_vocab);
  q_.resize(size_t(options.max_seqs) * size_t(options.max_proposals) * n_vocab);
  active_.reserve(size_t(options.max_seqs));
}

bool DraftModel::samples(const SamplingParams& p) {
  return p.temperature >= Sampler::kGreedyTemperature;
}

int32_t DraftModel::pick(Active& a, std::span<const float> logits, int32_t j) {
  ProposalRequest& r = *a.request;
  if (r.q.empty()) {
    // Point proposal: the draft's most likely token (NaN never wins).
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[size_t(best)]) best = int32_t(i);
    return best;
  }
  const size_t n_vocab = logits.size();
  std::span<float> q = r.q.subspan(size_t(j) * n_vocab, n_vocab);
  Sampler& sampler = *a.seq->sampler;
  sampler.target_probabilities(logits, q);
  const double target = sampler.uniform();
  double cumulative = 0;
  int32_t picked = -1, last_positive = 0;
  for (size_t i = 0; i < n_vocab && picked < 0; ++i) {
    if (q[i] <= 0) continue;
    cumulative += q[i];
    last_positive = int32_t(i);
    if (target < cumulative) picked = int32_t(i);
  }
  if (picked < 0) picked = last_positive;
  // The next proposal's q sees this one, as the target's p will at verification.
  sampler.accept(picked);
  ++a.seq->sampler_proposals;
  return picked;
}

Status DraftModel::run_pass(int32_t n_tokens, std::span<Active> active) {
  int32_t n_rows = 0;
  for (const Active& a : active) rows_[size_t(n_rows++)] = a.batch_index;
  ForwardBatch b;
  b.token_ids = std::span<const int32_t>(tokens_.data(), size_t(n_tokens));
  b.positions = std::span<const int32_t>(positions_.data(), size_t(n_tokens));
  b.seq_index = std::span<const int32_t>(seq_index_.data(), size_t(n_tokens));
  b.block_tables = block_tables_;
  b.max_blocks_per_seq = max_blocks_per_seq_;
  b.logits_indices = std::span<const int32_t>(rows_.data(), size_t(n_rows));
  return forward_.forward(b, cache_, logits_);
}

Status DraftModel::propose(std::span<ProposalRequest> requests) {
  const Status st = propose_runs(requests);
  // The samplers keep only verified tokens between steps: this step's proposals go back.
  for (const ProposalRequest& r : requests) {
    const auto it = seqs_.find(r.id);
    if (it == seqs_.end() || !it->second.sampler) continue;
    Sequence& s = it->second;
    for (int32_t j = s.sampler_proposals - 1; j >= 0; --j)
      s.sampler->retract(r.proposals[size_t(j)]);
    s.sampler_proposals = 0;
  }
  return st;
}

Status DraftModel::propose_runs(std::span<ProposalRequest> requests) {
  const int32_t n_vocab = forward_.model().config().n_vocab;
  std::fill(block_tables_.begin(), block_tables_.end(), -1);
  active_.clear();
  int32_t n_tokens = 0, n_rows = 0;
  size_t q_used = 0;
  // Pass 0: every sequence's tokens the draft has not seen, the last one giving proposal 1.
  for (ProposalRequest& r : requests) {
    r.n_proposed = 0;
    r.q = {};
    const int32_t len = int32_t(r.tokens.size());
    const int32_t k = std::min(r.max_k, options_.max_proposals);
    if (k <= 0 || len == 0 || n_rows == options_.max_seqs || len + k > options_.max_context)
      continue;
    Sequence& s = seqs_[r.id];
    s.n_computed = std::min(s.n_computed, len - 1);
    const int32_t fits = options_.max_tokens - n_tokens;
    const int32_t need = len - s.n_computed;
    if (fits <= 0) continue;
    const bool complete = need <= fits;
    const int32_t take = complete ? need : fits;
    // Room for the catch-up and the K - 1 proposals fed back.
    if (!kv_.allocate(s.kv, complete ? len + k - 1 : s.n_computed + take)) continue;
    const int32_t seq = n_rows;
    for (int32_t t = 0; t < take; ++t) {
      tokens_[size_t(n_tokens)] = r.tokens[size_t(s.n_computed + t)];
      positions_[size_t(n_tokens)] = s.n_computed + t;
      seq_index_[size_t(n_tokens)] = seq;
      ++n_tokens;
    }
    std::copy(s.kv.blocks.begin(), s.kv.blocks.end(),
              block_tables_.begin() + long(seq) * max_blocks_per_seq_);
    s.n_computed += take;
    ++n_rows;
    if (!complete) {
      // A catch-up chunk only: no proposals this step.
      r.max_k = 0;
      active_.push_back({&r, &s, n_tokens - 1});
      continue;
    }
    if (samples(*r.params)) {
      if (!s.sampler) {
        SamplingParams p = *r.params;
        // Its own stream of draws, reproducible when the request is seeded.
        if (p.seed) p.seed = *p.seed ^ 0x9e3779b97f4a7c15ull;
        s.sampler = std::make_unique<Sampler>(p, n_vocab);
      }
      // The request's state up to its last verified token: prompt, then outputs.
      if (s.sampler_tokens == 0) {
        s.sampler->set_prompt(r.tokens.first(size_t(r.n_prompt)));
        s.sampler_tokens = r.n_prompt;
      }
      for (; s.sampler_tokens < len; ++s.sampler_tokens)
        s.sampler->accept(r.tokens[size_t(s.sampler_tokens)]);
      r.q = std::span<float>(q_.data() + q_used, size_t(k) * size_t(n_vocab));
      q_used += size_t(k) * size_t(n_vocab);
    }
    r.max_k = k;
    active_.push_back({&r, &s, n_tokens - 1});
  }
  if (active_.empty()) return {};
  const auto catch_up_start = std::chrono::steady_clock::now();
  if (auto st = run_pass(n_tokens, active_); !st) return st;
  // A pass mostly made of catch-up tokens prices them.
  if (n_tokens >= 4 * int32_t(active_.size())) {
    const double per_token =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - catch_up_start).count() /
        n_tokens;
    catch_up_token_seconds_ =
        catch_up_token_seconds_ > 0 ? 0.8 * catch_up_token_seconds_ + 0.2 * per_token : per_token;
  }
  // Proposal 1 from each complete sequence's row; then one pass per further proposal.
  size_t n_live = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    Active& a = active_[i];
    if (a.request->max_k == 0) continue;
    a.request->proposals[0] =
        pick(a, std::span<const float>(logits_.data() + i * size_t(n_vocab), size_t(n_vocab)), 0);
    a.request->n_proposed = 1;
    active_[n_live++] = a;
  }
  active_.resize(n_live);
  for (int32_t j = 1; !active_.empty(); ++j) {
    n_live = 0;
    for (const Active& a : active_)
      if (a.request->max_k > j) active_[n_live++] = a;
    active_.resize(n_live);
    if (active_.empty()) break;
    // One token per sequence: row i of the block tables is active_[i]'s.
    std::fill(block_tables_.begin(), block_tables_.end(), -1);
    for (size_t i = 0; i < active_.size(); ++i) {
      Active& a = active_[i];
      tokens_[i] = a.request->proposals[size_t(j - 1)];
      positions_[i] = int32_t(a.request->tokens.size()) - 1 + j;
      seq_index_[i] = int32_t(i);
      a.batch_index = int32_t(i);
      std::copy(a.seq->kv.blocks.begin(), a.seq->kv.blocks.end(),
                block_tables_.begin() + long(i) * max_blocks_per_seq_);
    }
    const auto start = std::chrono::steady_clock::now();
    if (auto st = run_pass(int32_t(active_.size()), active_); !st) return st;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    decode_pass_seconds_ =
        decode_pass_seconds_ > 0 ? 0.8 * decode_pass_seconds_ + 0.2 * seconds : seconds;
    for (size_t i = 0; i < active_.size(); ++i) {
      Active& a = active_[i];
      ++a.seq->n_computed;
      a.request->proposals[size_t(j)] =
          pick(a, std::span<const float>(logits_.data() + i * size_t(n_vocab), size_t(n_vocab)), j);
      a.request->n_proposed = j + 1;
    }
  }
  return {};
}

double DraftModel::pass_seconds(double target_step_seconds) const {
  if (decode_pass_seconds_ > 0) return decode_pass_seconds_;
  return target_step_seconds * double(model().gguf().file_size()) /
         double(std::max<uint64_t>(options_.target_bytes, 1));
}

double DraftModel::upfront_seconds(uint64_t id, int32_t n_tokens, double pass_seconds) const {
  // The last token is read with the first proposal's pass.
  const int32_t n_behind = behind(id, n_tokens) - 1;
  if (n_behind <= 0) return 0;
  return n_behind * (catch_up_token_seconds_ > 0 ? catch_up_token_seconds_ : 0.25 * pass_seconds);
}

int32_t DraftModel::behind(uint64_t id, int32_t n_tokens) const {
  const auto it = seqs_.find(id);
  return n_tokens - (it == seqs_.end() ? 0 : std::min(it->second.n_computed, n_tokens));
}

void DraftModel::rollback(uint64_t id, int32_t n_valid) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence& s = it->second;
  s.n_computed = std::min(s.n_computed, n_valid);
  kv_.truncate(s.kv, s.n_computed);
}

void DraftModel::drop_kv(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  kv_.release(it->second.kv);
  it->second.n_computed = 0;
}

void DraftModel::release(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  kv_.release(it->second.kv);
  seqs_.erase(it);
}

}  // namespace vela

#include "engine/engine.h"

#include <algorithm>
#include <string>

namespace vela {

struct Engine::Live {
  Request request;
  SamplingParams params;
  Sampler sampler;
  StreamingDetokenizer detokenizer;
  StopMatcher stop;
  CompletionOutput output;
  RequestCallback callback;
  std::unique_ptr<constraint::SequenceConstraint> constraint;  // structured output, if any

  Live(const SamplingParams& p, int32_t n_vocab, const Tokenizer& tok)
      : params(p), sampler(p, n_vocab), detokenizer(tok), stop(p.stop) {}
};

namespace {

int32_t default_blocks(const EngineConfig& c) {
  return int32_t(int64_t(c.scheduler.max_num_seqs) *
                 ((c.max_context + c.block_size - 1) / c.block_size));
}

KvCacheConfig cache_config(const Model& model, const EngineConfig& c) {
  const ModelConfig& m = model.config();
  return KvCacheConfig{m.n_layer,
                       m.n_head_kv,
                       m.head_dim,
                       c.block_size,
                       c.n_blocks > 0 ? c.n_blocks : default_blocks(c),
                       c.kv_type};
}

ForwardOptions forward_options(const EngineConfig& c) {
  ForwardOptions fo;
  fo.max_batch_tokens = c.scheduler.max_num_batched_tokens;
  fo.max_logits = c.scheduler.max_num_seqs;
  fo.max_context = c.max_context;
  fo.n_threads = c.n_threads;
  return fo;
}

}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, Tokenizer tokenizer, const EngineConfig& config)
    : config_(config),
      tokenizer_(std::move(tokenizer)),
      forward_(std::make_unique<LlamaForward>(model, forward_options(config))),
      cache_(cache_config(*model, config)),
      pool_(cache_.config().n_blocks, config.enable_prefix_caching),
      kv_(pool_, config.block_size),
      scheduler_(config.scheduler, kv_),
      constraints_(std::make_unique<constraint::ConstraintCompiler>(
          [tok = tokenizer_] { return constraint::TokenVocabulary::from_tokenizer(tok); })) {
  scheduler_.set_cost_estimator(&step_cost_);
  config_.n_blocks = cache_.config().n_blocks;
  const auto& sc = config.scheduler;
  max_blocks_per_seq_ = (config.max_context + config.block_size - 1) / config.block_size;
  batch_tokens_.resize(size_t(sc.max_num_batched_tokens));
  batch_positions_.resize(size_t(sc.max_num_batched_tokens));
  batch_seq_.resize(size_t(sc.max_num_batched_tokens));
  block_tables_.resize(size_t(sc.max_num_seqs) * size_t(max_blocks_per_seq_));
  logits_rows_.resize(size_t(sc.max_num_seqs));
  sampling_.resize(size_t(sc.max_num_seqs));
  logits_.resize(size_t(sc.max_num_seqs) * size_t(model->config().n_vocab));
}

Engine::~Engine() = default;

Status Engine::validate_request(std::span<const int32_t> prompt,
                                const SamplingParams& params) const {
  if (auto st = Sampler::validate(params); !st) return st;
  if (prompt.empty()) return make_error("the prompt is empty (no tokens)");
  if (params.structured_outputs.active())
    if (auto g = constraints_->compile(params.structured_outputs); !g) return g.error();
  const int32_t n_vocab = forward_->model().config().n_vocab;
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab)
      return make_error("prompt token id " + std::to_string(t) + " is out of range");
  // A request can never hold more tokens than the context or the whole KV budget.
  const int64_t capacity = request_capacity();
  if (int64_t(prompt.size()) >= capacity)
    return make_error(
        "prompt of " + std::to_string(prompt.size()) + " tokens does not fit: the limit is " +
        std::to_string(capacity - 1) + " tokens (" +
        (capacity == config_.max_context ? "context length" : "KV cache budget") + ")");
  return {};
}

int64_t Engine::request_capacity() const {
  return std::min<int64_t>(config_.max_context, int64_t(config_.n_blocks) * config_.block_size);
}

Result<uint64_t> Engine::add_request(std::vector<int32_t> prompt, const SamplingParams& params,
                                     int32_t priority, RequestCallback callback, uint64_t id) {
  if (auto st = validate_request(prompt, params); !st) return st.error();
  const int32_t n_vocab = forward_->model().config().n_vocab;
  const int64_t capacity = request_capacity();
  auto live = std::make_unique<Live>(params, n_vocab, tokenizer_);
  Request& r = live->request;
  r.id = id != 0 ? id : reserve_id();
  r.n_prompt = static_cast<int32_t>(prompt.size());
  r.max_total_tokens = static_cast<int32_t>(
      std::min<int64_t>(capacity, int64_t(r.n_prompt) + std::max(params.max_tokens, 0)));
  r.tokens = std::move(prompt);
  r.tokens.reserve(size_t(r.max_total_tokens));
  r.priority = priority;
  r.timeline.arrival = Clock::now();
  live->sampler.set_prompt(r.tokens);
  live->callback = std::move(callback);
  if (params.structured_outputs.active())  // compiled by validate_request: a cache hit
    live->constraint = std::make_unique<constraint::SequenceConstraint>(
        *constraints_->compile(params.structured_outputs));
  id = r.id;
  counters_.prompt_tokens += uint64_t(r.n_prompt);
  if (params.max_tokens == 0) {  // nothing to generate: finish at once
    requests_.emplace(id, std::move(live));
    finish(*requests_.at(id), FinishReason::kLength);
    return id;
  }
  scheduler_.add(&r);
  requests_.emplace(id, std::move(live));
  return id;
}

void Engine::abort(uint64_t request_id) {
  aborted_.push_back(request_id);
}

void Engine::abort_all() {
  for (const auto& [id, live] : requests_) aborted_.push_back(id);
}

void Engine::finish(Live& live, FinishReason reason) {
  Request& r = live.request;
  live.output.finish_reason = reason;
  // Text held back for a possible stop string or an incomplete character is released now.
  std::string tail;
  if (!live.stop.stopped() && reason != FinishReason::kAbort)
    tail = live.stop.push(live.detokenizer.flush()) + live.stop.flush();
  live.output.text += tail;
  scheduler_.remove(&r);
  r.timeline.finished = Clock::now();
  switch (reason) {
    case FinishReason::kStop:
      ++counters_.finished_stop;
      break;
    case FinishReason::kLength:
      ++counters_.finished_length;
      break;
    case FinishReason::kAbort:
      ++counters_.finished_abort;
      break;
  }
  const uint64_t id = r.id;
  if (live.callback) {
    RequestEvent e;
    e.request_id = id;
    e.text = tail;
    e.finished = true;
    e.output = &live.output;
    e.request = &r;
    live.callback(e);
  }
  requests_.erase(id);
}

void Engine::on_token(Live& live, const SampledToken& s) {
  Request& r = live.request;
  const SamplingParams& p = live.params;
  live.sampler.accept(s.token);
  r.tokens.push_back(s.token);
  live.output.token_ids.push_back(s.token);
  ++counters_.generation_tokens;
  const Clock::time_point now = Clock::now();
  if (r.timeline.first_token == Clock::time_point{}) r.timeline.first_token = now;
  r.timeline.last_token = now;

  const TokenLogprobs* lp = nullptr;
  if (p.logprobs) {
    TokenLogprobs entry{s.token, tokenizer_.token_to_piece(s.token), s.logprob, {}};
    entry.top.reserve(s.top.size());
    for (const auto& alt : s.top)
      entry.top.push_back({alt.token, tokenizer_.token_to_piece(alt.token), alt.logprob});
    live.output.logprobs.push_back(std::move(entry));
    lp = &live.output.logprobs.back();
  }
  const bool stop_token = (!p.ignore_eos && tokenizer_.is_eog(s.token)) ||
                          std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), s.token) !=
                              p.stop_token_ids.end();
  std::string text;
  if (!stop_token) text = live.stop.push(live.detokenizer.push(s.token));
  live.output.text += text;
  if (live.stop.stopped()) live.output.stop_reason = live.stop.matched();
  if (live.callback && (!stop_token || lp)) {
    RequestEvent e;
    e.request_id = r.id;
    e.token = s.token;
    e.text = text;
    e.logprobs = lp;
    e.request = &r;
    live.callback(e);
  }
  // A complete structured output that nothing can extend ends here, as a stop token would.
  const bool constraint_done =
      live.constraint && (!live.constraint->accept(s.token) || live.constraint->finished());
  if (stop_token || live.stop.stopped() || constraint_done)
    finish(live, FinishReason::kStop);
  else if (r.n_output() >= p.max_tokens || int32_t(r.tokens.size()) >= r.max_total_tokens)
    finish(live, FinishReason::kLength);
}

void Engine::record_kv_occupancy() {
  uint64_t capacity = 0, used = 0;
  for (const auto& [id, live] : requests_) {
    const Request& r = live->request;
    if (r.kv.blocks.empty()) continue;
    capacity += uint64_t(r.kv.blocks.size()) * uint64_t(config_.block_size);
    used += uint64_t(r.num_computed);
  }
  if (capacity > counters_.peak_slot_capacity) {
    counters_.peak_slot_capacity = capacity;
    counters_.peak_slots_used = used;
  }
}

Status Engine::step() {
  // Cancellations first, so their blocks are free for this step.
  for (uint64_t id : aborted_) {
    auto it = requests_.find(id);
    if (it != requests_.end()) finish(*it->second, FinishReason::kAbort);
  }
  aborted_.clear();

  const Clock::time_point start = Clock::now();
  scheduler_.schedule(start, sched_out_);
  if (sched_out_.empty()) return {};
  ++counters_.steps;

  // Build the batch: every scheduled request's next tokens, its block table row, and a logits
  // row for each request whose tokens will all be computed after this step.
  int32_t n_tokens = 0, n_logits = 0;
  std::fill(block_tables_.begin(), block_tables_.end(), -1);
  const int32_t n_seqs = static_cast<int32_t>(sched_out_.scheduled.size());
  for (int32_t i = 0; i < n_seqs; ++i) {
    const ScheduledRequest& s = sched_out_.scheduled[size_t(i)];
    Request& r = *s.request;
    for (int32_t k = 0; k < s.num_new_tokens; ++k) {
      batch_tokens_[size_t(n_tokens)] = r.tokens[size_t(r.num_computed + k)];
      batch_positions_[size_t(n_tokens)] = r.num_computed + k;
      batch_seq_[size_t(n_tokens)] = i;
      ++n_tokens;
    }
    std::copy(r.kv.blocks.begin(), r.kv.blocks.end(),
              block_tables_.begin() + long(i) * max_blocks_per_seq_);
    if (r.num_computed + s.num_new_tokens == int32_t(r.tokens.size())) {
      logits_rows_[size_t(n_logits)] = n_tokens - 1;
      sampling_[size_t(n_logits)] = requests_.at(r.id).get();
      ++n_logits;
    }
  }
  ForwardBatch batch;
  batch.token_ids = std::span<const int32_t>(batch_tokens_.data(), size_t(n_tokens));
  batch.positions = std::span<const int32_t>(batch_positions_.data(), size_t(n_tokens));
  batch.seq_index = std::span<const int32_t>(batch_seq_.data(), size_t(n_tokens));
  batch.block_tables =
      std::span<const int32_t>(block_tables_.data(), size_t(n_seqs) * size_t(max_blocks_per_seq_));
  batch.max_blocks_per_seq = max_blocks_per_seq_;
  batch.logits_indices = std::span<const int32_t>(logits_rows_.data(), size_t(n_logits));
  if (auto st = forward_->forward(batch, cache_, logits_); !st) {
    for (const ScheduledRequest& s : sched_out_.scheduled)
      finish(*requests_.at(s.request->id), FinishReason::kAbort);
    return st;
  }

  for (const ScheduledRequest& s : sched_out_.scheduled) {
    Request& r = *s.request;
    r.num_computed += s.num_new_tokens;
    kv_.cache_full_blocks(r.tokens, r.num_computed, r.kv);
  }
  record_kv_occupancy();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const ScheduledRequest& s : sched_out_.scheduled) {
    Request& r = *s.request;
    if (r.timeline.first_token == Clock::time_point{})
      r.timeline.prefill_seconds += seconds;
    else
      r.timeline.decode_seconds += seconds;
  }

  const int32_t n_vocab = forward_->model().config().n_vocab;
  for (int32_t i = 0; i < n_logits; ++i) {
    Live& live = *sampling_[size_t(i)];
    const std::span<const uint64_t> allowed =
        live.constraint ? live.constraint->mask() : std::span<const uint64_t>();
    const SampledToken token = live.sampler.sample(
        std::span<const float>(logits_.data() + size_t(i) * size_t(n_vocab), size_t(n_vocab)),
        allowed);
    on_token(live, token);  // may finish and destroy the request
  }

  // The whole step, as the streams see it: scheduling, the pass, sampling and callbacks.
  last_step_.shape = sched_out_.shape;
  last_step_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  last_step_.predicted_seconds =
      step_cost_.ready() ? step_cost_.predict_seconds(sched_out_.shape) : -1;
  last_step_.prefill_capped = sched_out_.prefill_capped;
  step_cost_.observe(sched_out_.shape, last_step_.seconds);
  counters_.step_seconds.observe(kStepSecondsBounds, last_step_.seconds);
  counters_.step_prefill_tokens.observe(kStepPrefillTokensBounds,
                                        double(sched_out_.shape.prefill_tokens));
  counters_.steps_prefill_capped += sched_out_.prefill_capped;
  return {};
}

}  // namespace vela

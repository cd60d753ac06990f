#include "engine/engine.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>

#include "engine/engine_cache.h"
#include "engine/engine_live.h"
#include "engine/engine_proposer.h"
#include "spec/acceptance.h"
#include "util/trace.h"

namespace vela {

namespace {

// A speculating request takes K + 1 rows; never more rows than tokens in a pass.
int32_t max_logits_rows(const EngineConfig& c) {
  const int32_t per_seq = c.speculative.enabled() ? 1 + c.speculative.num_speculative_tokens : 1;
  return std::min(c.scheduler.max_num_batched_tokens,
                  int32_t(int64_t(c.scheduler.max_num_seqs) * per_seq));
}

ForwardOptions forward_options(const EngineConfig& c) {
  ForwardOptions fo;
  fo.max_batch_tokens = c.scheduler.max_num_batched_tokens;
  fo.max_logits = max_logits_rows(c);
  fo.max_context = c.max_context;
  fo.n_threads = c.n_threads;
  fo.tensor_parallel = c.tensor_parallel;
  // An EAGLE-3 head reads the inputs of three of the model's layers.
  if (c.speculative.method == SpecMethod::kEagle3 && c.draft_head && c.draft_head->config().eagle3)
    fo.capture_layer_inputs.assign(c.draft_head->config().eagle3->extract_layers.begin(),
                                   c.draft_head->config().eagle3->extract_layers.end());
  return fo;
}

}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, Tokenizer tokenizer, const EngineConfig& config)
    : config_(config),
      tokenizer_(std::move(tokenizer)),
      forward_(std::make_unique<DecoderForward>(model, forward_options(config))),
      cache_(engine_cache::cache_config(*model, config)),
      pool_(cache_.config().n_blocks, config.enable_prefix_caching),
      state_slots_(model->config().recurrent() ? config.scheduler.max_num_seqs : 0),
      checkpoints_(config.scheduler.max_num_seqs,
                   engine_cache::state_checkpoint_slots(*model, config),
                   engine_cache::state_checkpoint_interval(cache_.config(), config)),
      kv_(pool_, config.block_size, model->config().recurrent() ? &state_slots_ : nullptr,
          &checkpoints_, cache_.config().group_windows),
      scheduler_(config.scheduler, kv_),
      constraints_(std::make_unique<constraint::ConstraintCompiler>(
          [tok = tokenizer_] { return constraint::TokenVocabulary::from_tokenizer(tok); })),
      spec_policy_(step_cost_, config.speculative.adaptive) {
  assert(validate(config.speculative).ok());
  scheduler_.set_cost_estimator(&step_cost_);
  config_.n_blocks = cache_.config().n_blocks;
  const auto& sc = config.scheduler;
  max_blocks_per_seq_ =
      (config.max_context + config.block_size - 1) / config.block_size * cache_.config().n_groups();
  batch_tokens_.resize(size_t(sc.max_num_batched_tokens));
  batch_positions_.resize(size_t(sc.max_num_batched_tokens));
  batch_seq_.resize(size_t(sc.max_num_batched_tokens));
  batch_state_slots_.resize(size_t(sc.max_num_seqs));
  planned_checkpoints_.reserve(size_t(sc.max_num_batched_tokens));
  batch_checkpoints_.reserve(size_t(sc.max_num_batched_tokens));
  pending_state_copies_.reserve(2 * size_t(sc.max_num_seqs));
  if (engine_cache::speculation_state_slots(*model, config) > 0)
    speculation_slots_ = sc.max_num_seqs + engine_cache::state_checkpoint_slots(*model, config);
  if (model->config().recurrent()) state_slot_populated_.assign(size_t(sc.max_num_seqs), false);
  block_tables_.resize(size_t(sc.max_num_seqs) * size_t(max_blocks_per_seq_));
  logits_rows_.resize(size_t(max_logits_rows(config)));
  logits_.resize(size_t(max_logits_rows(config)) * size_t(model->config().n_vocab));
  drafted_.reserve(size_t(sc.max_num_seqs));
  if (config.speculative.enabled()) {
    proposal_requests_.reserve(size_t(sc.max_num_seqs));
    proposal_out_.resize(size_t(sc.max_num_seqs) *
                         size_t(config.speculative.num_speculative_tokens));
    configured_proposer_ = engine_proposer::make_proposer(*model, config_, forward_->pool());
    proposer_ = configured_proposer_.get();
  }
  if (proposer_ != nullptr && proposer_->follows_passes()) {
    followed_.reserve(size_t(sc.max_num_seqs));
    pass_rows_.reserve(size_t(sc.max_num_seqs));
    ensure_hidden_rows();
    layer_input_width_ =
        int64_t(proposer_->followed_layer_inputs().size()) * model->config().n_embd;
    layer_inputs_.resize(size_t(sc.max_num_batched_tokens) * size_t(layer_input_width_));
  }
  verify_work_.resize(size_t(model->config().n_vocab));
  if (config.overlap_pipeline_passes && (proposer_ == nullptr || !proposer_->runs_passes()))
    max_in_flight_ = forward_->max_passes_in_flight();
  plans_.resize(size_t(max_in_flight_));
  describe_cache_groups();
  for (StepPlan& plan : plans_) plan.sampling.resize(size_t(sc.max_num_seqs));
}

Engine::~Engine() {
  // The other ranks finish the passes in flight before they can take anything else.
  while (forward_->passes_in_flight() > 0) forward_->finish_forward();
}

Status Engine::validate_request(std::span<const int32_t> prompt,
                                const SamplingParams& params) const {
  if (auto st = Sampler::validate(params); !st) return st;
  if (prompt.empty()) return make_error("the prompt is empty (no tokens)");
  if (params.structured_outputs.active()) {
    auto g = constraints_->compile(params.structured_outputs);
    if (!g) return g.error();
    // The first mask of a new grammar can take milliseconds (a large vocabulary); made here, on
    // the submitting thread, it is a cache hit for the engine thread, which others wait on.
    constraint::SequenceConstraint(*g).mask();
  }
  const int32_t n_vocab = forward_->model().config().n_vocab;
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab)
      return make_error("prompt token id " + std::to_string(t) + " is out of range");
  for (const std::vector<int32_t>* list : {&params.forced_tokens, &params.reasoning.end_tokens})
    for (int32_t t : *list)
      if (t < 0 || t >= n_vocab)
        return make_error("token id " + std::to_string(t) + " is out of range");
  // A request can never hold more tokens than the context or the whole KV budget.
  const int64_t capacity = request_capacity();
  if (int64_t(prompt.size()) >= capacity)
    return make_error(
        "prompt of " + std::to_string(prompt.size()) + " tokens does not fit: the limit is " +
        std::to_string(capacity - 1) + " tokens (" +
        (capacity == config_.max_context ? "context length" : "KV cache budget") + ")");
  return {};
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
  live->begin_control();
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

Result<uint64_t> Engine::add_embedding_request(std::vector<int32_t> prompt, Pooling pooling,
                                               int32_t priority, RequestCallback callback,
                                               uint64_t id) {
  SamplingParams params;
  params.max_tokens = 1;
  if (auto st = validate_request(prompt, params); !st) return st.error();
  const ModelConfig& mc = forward_->model().config();
  ensure_hidden_rows();
  auto live = std::make_unique<Live>(params, mc.n_vocab, tokenizer_);
  live->pooling = pooling;
  live->pooled.assign(size_t(mc.n_embd), 0.0f);
  Request& r = live->request;
  r.id = id != 0 ? id : reserve_id();
  r.n_prompt = static_cast<int32_t>(prompt.size());
  r.max_total_tokens = r.n_prompt;
  r.tokens = std::move(prompt);
  r.priority = priority;
  r.embedding = true;
  r.timeline.arrival = Clock::now();
  live->callback = std::move(callback);
  id = r.id;
  counters_.prompt_tokens += uint64_t(r.n_prompt);
  scheduler_.add(&r);
  requests_.emplace(id, std::move(live));
  return id;
}

void Engine::ensure_hidden_rows() {
  if (!hidden_.empty()) return;
  const size_t rows = size_t(config_.scheduler.max_num_batched_tokens);
  hidden_rows_.resize(rows);
  hidden_owner_.resize(rows);
  hidden_.resize(rows * size_t(forward_->model().config().n_embd));
  embeddings_done_.reserve(size_t(config_.scheduler.max_num_seqs));
}

void Engine::add_hidden_rows(Live& live, int32_t first, int32_t n) {
  const Request& r = live.request;
  if (r.num_computed == 0) std::fill(live.pooled.begin(), live.pooled.end(), 0.0f);  // (re)start
  const bool completes = r.num_computed + n == r.n_prompt;
  // Mean: every token's row; last: only the prompt's last token.
  const int32_t from = *live.pooling == Pooling::kMean ? first
                       : completes                     ? first + n - 1
                                                       : first + n;
  for (int32_t i = from; i < first + n; ++i) {
    hidden_rows_[size_t(n_hidden_)] = i;
    hidden_owner_[size_t(n_hidden_)] = &live;
    ++n_hidden_;
  }
  if (completes) embeddings_done_.push_back(&live);
}

void Engine::pool_hidden_rows() {
  const size_t E = size_t(forward_->model().config().n_embd);
  for (int32_t i = 0; i < n_hidden_; ++i) {
    Live& live = *hidden_owner_[size_t(i)];
    const float* row = hidden_.data() + size_t(i) * E;
    if (*live.pooling == Pooling::kMean)
      for (size_t k = 0; k < E; ++k) live.pooled[k] += row[k];
    else
      std::copy(row, row + E, live.pooled.begin());
  }
  for (Live* live : embeddings_done_) {
    // The mean's 1/n does not change the direction; L2-normalise (OpenAI's embeddings are).
    double norm = 0;
    for (float v : live->pooled) norm += double(v) * double(v);
    const float scale = norm > 0 ? float(1.0 / std::sqrt(norm)) : 0.0f;
    for (float& v : live->pooled) v *= scale;
    if (live->request.timeline.first_token == Clock::time_point{})
      live->request.timeline.first_token = live->request.timeline.last_token = Clock::now();
    finish(*live, FinishReason::kStop);
  }
  embeddings_done_.clear();
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
  if (proposer_) proposer_->release(r.id);
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
    if (live.pooling && reason != FinishReason::kAbort) e.embedding = live.pooled;
    live.callback(e);
  }
  requests_.erase(id);
}

bool Engine::on_token(Live& live, const SampledToken& s) {
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
  std::string text, piece;
  if (!stop_token) {
    piece = live.detokenizer.push(s.token);
    text = live.stop.push(piece);
  }
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
  if (live.thinking) live.follow_reasoning(piece);  // may start the constraint for what follows
  if (stop_token || live.stop.stopped() || constraint_done) {
    finish(live, FinishReason::kStop);
    return false;
  }
  if (r.n_output() >= p.max_tokens || int32_t(r.tokens.size()) >= r.max_total_tokens) {
    finish(live, FinishReason::kLength);
    return false;
  }
  return true;
}

Status Engine::step() {
  // Cancellations first, so their blocks are free for this step; a request whose pass is still
  // in flight is cancelled once its outputs are back.
  size_t deferred = 0;
  for (uint64_t id : aborted_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    if (it->second->request.in_flight)
      aborted_[deferred++] = id;
    else
      finish(*it->second, FinishReason::kAbort);
  }
  aborted_.resize(deferred);

  // Trace (when on): the step with its batch composition, partitioned into scheduling,
  // building the batch, the forward pass, pooling, and per request sampling and detokenizing.
  trace::Span step_span("engine_step", "engine");
  trace::Phases phases("engine");
  // The step's forward-pass time as the engine's own clock measures it (the metric's), beside
  // the trace's spans of the same passes: two readings a test can hold against each other.
  const double forward_seconds_before = counters_.forward_seconds;
  const StepPlan* newest = nullptr;
  if (auto st = launch(phases, newest); !st) return st;
  if (n_plans_ == 0) {
    step_span.cancel();
    phases.cancel();
    return {};
  }
  if (newest) {
    step_span.arg("prefill_tokens", newest->sched.shape.prefill_tokens);
    step_span.arg("decode_tokens", newest->sched.shape.decode_tokens);
    step_span.arg("requests", int64_t(newest->sched.scheduled.size()));
  }
  // The oldest pass completes once every stage has one (or nothing more could be launched); a
  // pass with embedding rows completes at once, with those before it.
  if (newest && newest->hidden)
    while (n_plans_ > 0) complete(phases);
  else if (n_plans_ >= max_in_flight_ || !newest)
    complete(phases);

  // The other ranks' traffic figures: a bounded interval apart while requests run (one small
  // message from each rank, never one per pass), and when the last request has finished. The
  // ranks answer between passes, so a pipeline first completes the passes in flight.
  TensorParallel* const group = config_.tensor_parallel.get();
  if (tp_passes_ungathered_ &&
      (requests_.empty() || Clock::now() - tp_gathered_at_ >= std::chrono::seconds(1))) {
    while (n_plans_ > 0) complete(phases);
    std::vector<TensorParallelTraffic> ranks = group->gather_traffic();
    tp_passes_ungathered_ = false;
    tp_gathered_at_ = Clock::now();
    if (!ranks.empty()) {
      ranks[0] = {counters_.tp_bytes_sent, counters_.tp_communication_seconds};
      counters_.tp_ranks = std::move(ranks);
    }
  }
  step_span.arg("forward_ns",
                int64_t((counters_.forward_seconds - forward_seconds_before) * 1e9 + 0.5));
  return {};
}

void Engine::count_forward(Clock::time_point start, const TensorParallelTraffic& before) {
  counters_.forward_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  if (TensorParallel* const group = config_.tensor_parallel.get()) {
    const TensorParallelTraffic after = group->traffic();
    counters_.tp_bytes_sent += after.bytes_sent - before.bytes_sent;
    counters_.tp_communication_seconds += after.seconds - before.seconds;
    tp_passes_ungathered_ = true;
  }
}

Status Engine::launch(trace::Phases& phases, const StepPlan*& launched) {
  launched = nullptr;
  assert(n_plans_ < max_in_flight_);  // step() completes a pass whenever the ring is full
  StepPlan& plan = plans_[size_t((first_plan_ + n_plans_) % max_in_flight_)];
  SchedulerOutput& sched = plan.sched;
  phases.next("schedule");
  plan.start = Clock::now();
  // A draft pass that fails only costs this step its proposals. The draft's time is the
  // policy's to weigh, not the step-cost model's (it prices the target's pass).
  if (config_.speculative.enabled() && !propose()) drop_proposals();
  plan.unpriced_seconds = std::chrono::duration<double>(Clock::now() - plan.start).count();
  // With passes in flight, this one takes a share of the requests that are free, so that the
  // passes still to launch before the first returns get theirs.
  const size_t free_passes = size_t(max_in_flight_ - n_plans_);
  scheduler_.schedule(
      plan.start, sched,
      free_passes > 1
          ? std::max<size_t>(1, (scheduler_.n_schedulable() + free_passes - 1) / free_passes)
          : std::numeric_limits<size_t>::max());
  if (config_.speculative.enabled()) trim_unscheduled_proposals(sched);
  // A preempted request gives its proposer's blocks back too: it holds no KV while it waits (the
  // running requests' drafts need the room), and its proposer catches up when it resumes.
  if (proposer_)
    for (Request* r : sched.preempted) proposer_->drop_kv(r->id);
  if (sched.empty()) return {};
  ++counters_.steps;
  restore_states(sched);
  if (kv_.state_slots() != nullptr) {
    const auto populate_start = Clock::now();
    populate_state_slots(sched);
    plan.unpriced_seconds += std::chrono::duration<double>(Clock::now() - populate_start).count();
  }
  phases.next("build_batch");

  // Build the batch: every scheduled request's next tokens, its block table row, and a logits
  // row for each request whose tokens will all be computed after this step.
  int32_t n_tokens = 0, n_logits = 0;
  plan.n_runs = 0;
  n_hidden_ = 0;
  n_follow_hidden_ = 0;
  followed_.clear();
  const bool follow = proposer_ != nullptr && proposer_->follows_passes();
  std::fill(block_tables_.begin(), block_tables_.end(), -1);
  batch_checkpoints_.clear();
  const int32_t n_seqs = static_cast<int32_t>(sched.scheduled.size());
  for (int32_t i = 0; i < n_seqs; ++i) {
    const ScheduledRequest& s = sched.scheduled[size_t(i)];
    Request& r = *s.request;
    for (int32_t k = 0; k < s.num_new_tokens; ++k) {
      batch_tokens_[size_t(n_tokens)] = r.tokens[size_t(r.num_computed + k)];
      batch_positions_[size_t(n_tokens)] = r.num_computed + k;
      batch_seq_[size_t(n_tokens)] = i;
      ++n_tokens;
    }
    std::copy(r.kv.blocks.begin(), r.kv.blocks.end(),
              block_tables_.begin() + long(i) * max_blocks_per_seq_);
    batch_state_slots_[size_t(i)] = r.kv.state_slot;
    if (!r.embedding && kv_.state_slots() != nullptr) {
      planned_checkpoints_.clear();
      kv_.plan_checkpoints(r.tokens, r.num_computed, s.num_new_tokens, r.kv, planned_checkpoints_);
      // The state after the decode token and after each proposal but the last (whose state
      // the sequence's own slot will hold).
      for (int32_t j = 0; j < r.n_draft; ++j)
        planned_checkpoints_.push_back(
            {r.num_computed + 1 + j, speculation_slot(r.kv.state_slot, j)});
      std::stable_sort(planned_checkpoints_.begin(), planned_checkpoints_.end(),
                       [](const PlannedCheckpoint& a, const PlannedCheckpoint& b) {
                         return a.position < b.position;
                       });
      for (const PlannedCheckpoint& p : planned_checkpoints_)
        batch_checkpoints_.push_back({i, p.position, p.slot});
    }
    if (follow && !r.embedding) {
      followed_.push_back(
          {r.id, r.num_computed, s.num_new_tokens, n_follow_hidden_, n_tokens - s.num_new_tokens});
      n_follow_hidden_ += s.num_new_tokens;
    }
    if (r.embedding) {
      add_hidden_rows(*requests_.at(r.id), n_tokens - s.num_new_tokens, s.num_new_tokens);
    } else if (r.num_computed + s.num_new_tokens == int32_t(r.tokens.size())) {
      // The last token's row, or the rows after the decode token and after each proposal.
      const int32_t n_rows = 1 + r.n_draft;
      for (int32_t k = n_rows; k >= 1; --k) logits_rows_[size_t(n_logits++)] = n_tokens - k;
      plan.sampling[size_t(plan.n_runs++)] = {requests_.at(r.id).get(), n_rows};
    }
  }
  plan.hidden = n_hidden_ > 0 || !embeddings_done_.empty();
  // The followed rows' hidden states come after the embedding requests' (rows in batch order).
  if (n_follow_hidden_ > 0) {
    int32_t next = n_hidden_;
    for (const FollowedRows& f : followed_)
      for (int32_t k = 0; k < f.n_rows; ++k) hidden_rows_[size_t(next++)] = f.batch_first + k;
  }
  const int32_t n_hidden_rows = n_hidden_ + n_follow_hidden_;
  ForwardBatch batch;
  batch.token_ids = std::span<const int32_t>(batch_tokens_.data(), size_t(n_tokens));
  batch.positions = std::span<const int32_t>(batch_positions_.data(), size_t(n_tokens));
  batch.seq_index = std::span<const int32_t>(batch_seq_.data(), size_t(n_tokens));
  batch.block_tables =
      std::span<const int32_t>(block_tables_.data(), size_t(n_seqs) * size_t(max_blocks_per_seq_));
  batch.max_blocks_per_seq = max_blocks_per_seq_;
  batch.n_kv_groups = cache_.config().n_groups();
  batch.logits_indices = std::span<const int32_t>(logits_rows_.data(), size_t(n_logits));
  batch.hidden_indices = std::span<const int32_t>(hidden_rows_.data(), size_t(n_hidden_rows));
  if (layer_input_width_ > 0 && n_follow_hidden_ > 0)
    batch.layer_inputs =
        std::span<float>(layer_inputs_.data(), size_t(n_hidden_rows) * size_t(layer_input_width_));
  if (kv_.state_slots() != nullptr) {
    batch.state_slots = std::span<const int32_t>(batch_state_slots_.data(), size_t(n_seqs));
    batch.state_checkpoints = batch_checkpoints_;
    batch.state_copies = pending_state_copies_;
  }
  phases.done();  // the forward pass has its own span
  TensorParallel* const group = config_.tensor_parallel.get();
  const TensorParallelTraffic traffic_before = group ? group->traffic() : TensorParallelTraffic{};
  const Clock::time_point forward_start = Clock::now();
  const Status forward_status = forward_->begin_forward(batch, cache_, logits_, hidden_);
  count_forward(forward_start, traffic_before);
  pending_state_copies_.clear();  // done by the pass, or by none when it failed
  // This pass writes the checkpoints on every rank before any pass launched after it reads them
  // (each pipeline stage runs its passes in launch order); a failed pass writes none.
  for (const StateCheckpointWrite& cp : batch_checkpoints_) {
    if (!checkpoints_.owns(cp.slot)) continue;  // a speculation slot
    if (forward_status)
      checkpoints_.commit(cp.slot);
    else
      checkpoints_.cancel(cp.slot);
  }
  if (const Status& st = forward_status; !st) {
    embeddings_done_.clear();
    for (const ScheduledRequest& s : sched.scheduled)
      finish(*requests_.at(s.request->id), FinishReason::kAbort);
    return st;
  }
  for (const ScheduledRequest& s : sched.scheduled) s.request->in_flight = true;
  counters_.passes_overlapped += n_plans_ > 0;
  ++n_plans_;
  launched = &plan;
  return {};
}

void Engine::complete(trace::Phases& phases) {
  StepPlan& plan = plans_[size_t(first_plan_)];
  first_plan_ = (first_plan_ + 1) % max_in_flight_;
  --n_plans_;
  const SchedulerOutput& sched = plan.sched;
  {
    TensorParallel* const group = config_.tensor_parallel.get();
    const TensorParallelTraffic traffic_before = group ? group->traffic() : TensorParallelTraffic{};
    const Clock::time_point forward_start = Clock::now();
    forward_->finish_forward();
    count_forward(forward_start, traffic_before);
  }

  phases.next("bookkeeping");
  for (const ScheduledRequest& s : sched.scheduled) {
    Request& r = *s.request;
    r.in_flight = false;
    if (r.n_draft > 0) continue;  // verify() settles what was computed
    r.num_computed += s.num_new_tokens;
    kv_.cache_full_blocks(r.tokens, r.num_computed, r.kv);
    kv_.release_out_of_window(r.kv, r.num_computed);
  }
  record_kv_occupancy();
  const double seconds = std::chrono::duration<double>(Clock::now() - plan.start).count();
  for (const ScheduledRequest& s : sched.scheduled) {
    Request& r = *s.request;
    if (r.timeline.first_token == Clock::time_point{})
      r.timeline.prefill_seconds += seconds;
    else
      r.timeline.decode_seconds += seconds;
  }

  if (plan.hidden) pool_hidden_rows();  // may finish requests

  const int32_t n_vocab = forward_->model().config().n_vocab;
  size_t row = 0;
  for (int32_t i = 0; i < plan.n_runs; ++i) {
    const LogitsRun run = plan.sampling[size_t(i)];
    phases.next("sample");
    std::span<float> rows(logits_.data() + row * size_t(n_vocab),
                          size_t(run.n_rows) * size_t(n_vocab));
    row += size_t(run.n_rows);
    if (run.n_rows > 1) {
      verify(*run.live, rows);  // may finish and destroy the request
      continue;
    }
    Live& live = *run.live;
    SampledToken token;
    if (!live.forced.empty()) {
      token = live.sampler.describe(rows, live.forced.front());
      live.forced.pop_front();
    } else if (live.refused_proposal >= 0) {
      // Its only proposal fell outside the grammar: the row's draw comes from the residual.
      live.sampler.restrict_to(live.constraint->mask());
      token = verify_sampled_proposal(live.sampler, rows, live.refused_proposal,
                                      live.draft_q.first(size_t(n_vocab)), verify_work_)
                  .token;
      live.sampler.restrict_to({});
      live.refused_proposal = -1;
      live.draft_q = {};
    } else {
      const std::span<const uint64_t> allowed =
          live.constraint ? live.constraint->mask() : std::span<const uint64_t>();
      token = live.sampler.sample(rows, allowed);
    }
    if (live.shadow_proposal >= 0) {
      observe_acceptance(live, token.token == live.shadow_proposal, 1);
      live.shadow_proposal = -1;
    }
    phases.next("detokenize");
    on_token(live, token);  // may finish and destroy the request
  }
  if (!followed_.empty()) {
    phases.next("follow");
    follow_pass();
  }
  phases.next("account");

  // The whole step, as the streams see it: scheduling, the pass, sampling and callbacks.
  last_step_.shape = sched.shape;
  last_step_.seconds = std::chrono::duration<double>(Clock::now() - plan.start).count();
  last_step_.predicted_seconds = step_cost_.ready() ? step_cost_.predict_seconds(sched.shape) : -1;
  last_step_.prefill_capped = sched.prefill_capped;
  step_cost_.observe(sched.shape, last_step_.seconds - plan.unpriced_seconds);
  counters_.step_seconds.observe(kStepSecondsBounds, last_step_.seconds);
  counters_.step_prefill_tokens.observe(kStepPrefillTokensBounds,
                                        double(sched.shape.prefill_tokens));
  counters_.steps_prefill_capped += sched.prefill_capped;
}

}  // namespace vela

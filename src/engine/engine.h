#pragma once
// The serving engine: continuous batching over the paged, prefix-cached KV cache. One step =
// schedule → build the batch (token ids, positions, block tables) → forward pass over every
// scheduled token → sample for each request whose tokens are all computed → detokenize, check
// stop conditions, report to the request's callback.
// Thread-safety: not synchronised — one thread calls add_request/abort/step (AsyncEngine wraps
// it for multi-threaded callers). Callbacks run on that thread, inside step().
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constraint/constraint.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_manager.h"
#include "model/decoder_forward.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "sched/scheduler.h"
#include "sched/step_cost_model.h"
#include "spec/lookup_proposer.h"
#include "spec/proposer.h"
#include "spec/speculation_policy.h"
#include "spec/speculative_config.h"
#include "tokenizer/tokenizer.h"
#include "util/bucket_counts.h"
#include "util/trace.h"
#include "vela/llm.h"

namespace vela {

struct EngineConfig {
  int32_t max_context = 2048;  // longest prompt + output of one request
  int32_t block_size = 16;
  int32_t n_blocks = 0;  // KV budget in blocks (0 = enough for max_num_seqs x max_context)
  KvType kv_type = KvType::kF16;
  bool enable_prefix_caching = true;
  // Models with recurrent layers: a cached prefix is reusable where its recurrent state was saved.
  // Positions between checkpoints (a multiple of block_size and of 64; 0: chosen so that a
  // checkpoint weighs about as much as the K/V of the tokens it covers), and the checkpoint slots
  // (-1: max_num_seqs; 0: no prefix reuse).
  int32_t state_checkpoint_interval = 0;
  int32_t n_state_checkpoints = -1;
  int32_t n_threads = 0;  // forward-pass threads, 0 = physical cores
  SchedulerConfig scheduler;
  SpeculativeConfig speculative;  // must pass validate()
  // SpecMethod::kDraft: the draft model, with the model's vocabulary (make_engine checks it).
  std::shared_ptr<const Model> draft_model;
  // A draft head reading the model's hidden states: SpecMethod::kMtp, the model's
  // multi-token-prediction block (Model::mtp_block); kEagle3, an EAGLE-3 head
  // (Model::eagle3_head).
  std::shared_ptr<const Model> draft_head;
  // Tensor parallelism: this process is rank 0 of the group, the model its slice, and the other
  // ranks serve its passes (src/dist/); null = one process.
  std::shared_ptr<TensorParallel> tensor_parallel;
  // A pipeline keeps a pass per stage in flight, of different requests, so that its stages
  // work at once (false: one pass at a time). Not with a proposer that runs passes (a draft
  // model's q is the step's own; the MTP block follows each pass's outputs).
  bool overlap_pipeline_passes = true;
};

// One report to a request's owner: a generated token and the text that became safe to emit,
// or the end of the request.
struct RequestEvent {
  uint64_t request_id = 0;
  int32_t token = -1;                       // -1 on the final event
  std::string_view text;                    // new text (may be empty)
  const TokenLogprobs* logprobs = nullptr;  // when requested
  bool finished = false;
  const CompletionOutput* output = nullptr;  // the whole result, on the final event
  const Request* request = nullptr;          // counters and timeline
  // An embedding request's final event: its pooled, L2-normalised final hidden state.
  std::span<const float> embedding;  // [n_embd]
};

// How an embedding request turns its prompt's final hidden states into one vector.
enum class Pooling { kMean, kLast };
using RequestCallback = std::function<void(const RequestEvent&)>;

// A lookup standing in for the configured proposer (Engine::set_proposer).
using TokenProposer = TokenLookup;

// Bucket bounds of the per-step histograms.
inline constexpr std::array<double, 16> kStepSecondsBounds = {
    0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0};
inline constexpr std::array<double, 13> kStepPrefillTokensBounds = {
    0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};

// One engine step as measured: what it computed, how long it took (scheduling to the last
// sampled token), and what the cost model had predicted (negative when it could not yet).
struct StepRecord {
  StepShape shape;
  double seconds = 0;
  double predicted_seconds = -1;
  bool prefill_capped = false;  // the latency target held prefill tokens back
};

// The cache of one group of layers that share a cache spec, for metrics and the start-up line.
struct CacheGroupUsage {
  // "attention" (paged K/V of the global layers), "sliding_window" (paged K/V of the windowed
  // layers, the window's blocks only), "recurrent_state" (a state slot per sequence)
  const char* name = "";
  int32_t n_layers = 0;
  int32_t window = 0;            // sliding_window: positions a token sees
  uint64_t bytes_per_token = 0;  // K/V of one token over the group's layers (0 for a state)
  // The most one running sequence holds: its state, or a window's blocks (0: grows with it)
  uint64_t bytes_per_sequence = 0;
  int32_t used = 0;  // blocks (the pool is shared by the K/V groups) or state slots held
  int32_t total = 0;
};

// Running totals, for metrics.
struct EngineCounters {
  uint64_t prompt_tokens = 0;  // prompt tokens of finished or running requests (admission)
  uint64_t generation_tokens = 0;
  uint64_t finished_stop = 0, finished_length = 0, finished_abort = 0;
  uint64_t steps = 0;
  uint64_t passes_overlapped = 0;   // passes launched while an earlier one was still in flight
  uint64_t peak_slot_capacity = 0;  // at the step with the most KV blocks in use: their slots
  uint64_t peak_slots_used = 0;     //   and how many of those slots held a token
  BucketCounts<kStepSecondsBounds.size()> step_seconds;
  BucketCounts<kStepPrefillTokensBounds.size()> step_prefill_tokens;
  uint64_t steps_prefill_capped = 0;  // steps whose prefill the latency target limited
  // Speculative decoding (vLLM's names): verified runs, tokens proposed in them, proposals
  // accepted, and acceptances by position in the run.
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  std::array<uint64_t, kMaxSpeculativeTokens> spec_accepted_at{};
  // Tensor parallelism (rank 0's side; zero in one process): bytes sent to the other ranks and
  // seconds spent in the group's calls during forward passes, and the passes' whole time.
  uint64_t tp_bytes_sent = 0;
  double tp_communication_seconds = 0;
  double forward_seconds = 0;
  // Every world rank's figures in this engine's passes (index: world rank; entry 0 is rank 0's
  // two above). The other ranks' are gathered between passes, at most once a second while
  // requests run and once more when the engine has none left, so they are current whenever it is
  // idle. Empty in one process.
  std::vector<TensorParallelTraffic> tp_ranks;
};

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, Tokenizer tokenizer, const EngineConfig& config);
  ~Engine();

  // Queues a request; errors (bad parameters, a prompt longer than the context or than the
  // whole KV budget) are returned at once and nothing is queued.
  // `id` 0 takes the next id; a caller that needs the id before queueing uses reserve_id().
  Result<uint64_t> add_request(std::vector<int32_t> prompt_tokens, const SamplingParams& params,
                               int32_t priority, RequestCallback callback, uint64_t id = 0);
  // Queues an embedding request: its prompt is computed like any prefill (batched with the
  // other requests, chunked, never served from the prefix cache) and it finishes with the
  // pooled final hidden state in its final event; nothing is sampled.
  Result<uint64_t> add_embedding_request(std::vector<int32_t> prompt_tokens, Pooling pooling,
                                         int32_t priority, RequestCallback callback,
                                         uint64_t id = 0);
  // The checks add_request makes, without queueing anything. Safe from any thread (reads only
  // immutable configuration).
  Status validate_request(std::span<const int32_t> prompt_tokens,
                          const SamplingParams& params) const;
  // A fresh request id; safe from any thread.
  uint64_t reserve_id() { return next_id_.fetch_add(1); }
  // Cancels a request: it finishes (reason abort) and frees its blocks at the next step.
  void abort(uint64_t request_id);
  // Cancels every request at the next step (shutdown).
  void abort_all();

  // Replaces the configured method's proposer (speculation must be enabled), e.g. an oracle in
  // tests. An empty function restores the configured one.
  void set_proposer(TokenProposer proposer);
  // Benchmarks: the configured proposer still runs (its passes cost what they cost), and the
  // tokens it proposed are replaced by the lookup's, as many as it gives up to the count the
  // proposer made. An empty function turns it off.
  void set_proposal_replay(TokenProposer replay) { proposal_replay_ = std::move(replay); }

  // Runs one engine step (nothing when no request is ready). If the forward pass fails, the
  // requests of that step are finished (reason abort) and the error is returned.
  Status step();
  bool has_unfinished() const { return !requests_.empty(); }

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Model& model() const { return forward_->model(); }
  const EngineConfig& config() const { return config_; }
  const EngineCounters& counters() const { return counters_; }
  // Compiles (and caches) structured-output grammars for this engine's vocabulary.
  constraint::ConstraintCompiler& constraints() const { return *constraints_; }
  // The step-time model the latency target uses, and the last step it learned from.
  const StepCostModel& step_cost() const { return step_cost_; }
  const StepRecord& last_step() const { return last_step_; }
  BlockPoolUsage kv_usage() const { return pool_.usage(); }
  StateCheckpointUsage state_checkpoint_usage() const { return checkpoints_.usage(); }
  // Each cache group's geometry and usage: the attention layers' paged K/V (one entry per sliding
  // window), and the recurrent layers' per-sequence state where the model has such layers.
  std::vector<CacheGroupUsage> cache_groups() const;
  // Recurrent-state slots held by running sequences (0 for a model without recurrent layers).
  int32_t state_slots_used() const { return state_slots_.n_used(); }
  size_t n_waiting() const { return scheduler_.n_waiting(); }
  size_t n_running() const { return scheduler_.n_running(); }
  uint64_t n_preemptions() const { return scheduler_.n_preemptions(); }
  std::string check_kv_invariants() const { return pool_.check_invariants(); }
  // Blocks of the draft model's KV cache held by sequences (0 without a draft model).
  int32_t draft_kv_blocks_used() const {
    return configured_proposer_ ? configured_proposer_->blocks_in_use() : 0;
  }

 private:
  struct Live;  // a request with its sampling and streaming state

  // One row of logits (or a request's K + 1 rows when it speculates) in the step's pass.
  struct LogitsRun {
    Live* live;
    int32_t n_rows;
  };
  // A pass launched and not yet completed: what was scheduled, and whose logits rows it returns.
  struct StepPlan {
    SchedulerOutput sched;
    std::vector<LogitsRun> sampling;  // [max_num_seqs] requests with logits, in row order
    int32_t n_runs = 0;
    bool hidden = false;  // embedding rows: completes in the step that launched it
    Clock::time_point start;
    // Spent before the pass on what the step-cost model does not price: proposals, mapping state
    // slots' first pages.
    double unpriced_seconds = 0;
  };

  // Proposes, schedules, builds the batch and begins its pass (launched: its plan, or null when
  // no request was ready). A pass that cannot begin finishes its requests (reason abort).
  Status launch(trace::Phases& phases, const StepPlan*& launched);
  // Waits for the oldest launched pass's outputs, then samples, verifies and reports its tokens.
  void complete(trace::Phases& phases);
  // Adds the forward-pass time and group traffic since `start` and `before` to the counters.
  void count_forward(Clock::time_point start, const TensorParallelTraffic& before);

  void finish(Live& live, FinishReason reason);
  // The hidden-state rows of an embedding request's scheduled tokens (batch indices first ..
  // first + n - 1), and, once its prompt is done, its pooled vector.
  void add_hidden_rows(Live& live, int32_t first, int32_t n);
  // Sizes the hidden-row buffers (once: the first embedding request, or a following proposer).
  void ensure_hidden_rows();
  void pool_hidden_rows();
  // Records a generated token; false when it finished (and destroyed) the request.
  bool on_token(Live& live, const SampledToken& s);
  // Appends proposals to running decodes (as far as the policy grants) before scheduling.
  Status propose();
  // The proposals of a proposer that runs passes for proposal_requests_ (their lengths granted);
  // appends what it proposed.
  Status propose_granted();
  // Hands a proposer that follows passes the rows the completed pass computed (rows_of_plan_).
  void follow_pass();
  // A request's tested proposals, into its acceptance estimate and the engine's.
  void observe_acceptance(Live& live, int32_t n_accepted, int32_t n_tested);
  // How many of `proposals` a structured-output request's grammar allows in a row (all, for
  // a request without one).
  int32_t grammar_prefix(const Live& live, std::span<const int32_t> proposals) const;
  // Drops every proposal of this step.
  void drop_proposals();
  // Drops proposals the scheduler did not run.
  void trim_unscheduled_proposals(const SchedulerOutput& scheduled);
  // The tokens a speculating request keeps from its rows; rolls back the rest.
  void verify(Live& live, std::span<float> rows);
  void record_kv_occupancy();
  // Queues the copy of each newly admitted request's cached prefix's checkpointed state into its
  // slot (the pass about to be built does it first).
  void restore_states(const SchedulerOutput& scheduled);
  // Maps the pages of the state slots (and speculation slots) that scheduled requests use for
  // the first time, so that the pass, whose time the step-cost model learns from, does not
  // take their page faults (a first verification step of qwen35-0.8b mapped two 18 MB slots).
  void populate_state_slots(const SchedulerOutput& scheduled);
  // Fills cache_groups_ and group_entry_ from the cache's layout (once, at construction).
  void describe_cache_groups();
  // Recurrent models that speculate: where the sequence in state slot `slot` saves its state after
  // its decode token and proposal j (its state then covers proposals 0..j-1).
  int32_t speculation_slot(int32_t slot, int32_t j) const {
    return speculation_slots_ + slot * config_.speculative.num_speculative_tokens + j;
  }
  int64_t request_capacity() const;  // most tokens (prompt + output) one request can hold
  // Requests kept from speculating probe on these steps only (one in SpeculationPolicy's
  // kReprobeSteps); the same answer from the previous step's completion to this step's proposals.
  bool probe_step() const { return counters_.steps % SpeculationPolicy::kReprobeSteps == 0; }

  EngineConfig config_;
  Tokenizer tokenizer_;
  std::unique_ptr<DecoderForward> forward_;
  KvCache cache_;
  BlockPool pool_;
  StateSlotPool state_slots_;     // recurrent models' sequence states (unused otherwise)
  StateCheckpoints checkpoints_;  // and their cached prefixes' states
  KvCacheManager kv_;
  Scheduler scheduler_;
  StepCostModel step_cost_;
  StepRecord last_step_;
  std::unordered_map<uint64_t, std::unique_ptr<Live>> requests_;
  std::vector<uint64_t> aborted_;
  std::atomic<uint64_t> next_id_{1};
  EngineCounters counters_;
  std::unique_ptr<constraint::ConstraintCompiler> constraints_;  // thread-safe

  // Passes launched and not completed: a ring of max_in_flight_ plans, the oldest at
  // first_plan_. A pipeline keeps up to one pass per stage in flight (each of other requests),
  // so that every stage works at once; elsewhere each step completes the pass it launched.
  std::vector<StepPlan> plans_;  // [max_in_flight_]
  int32_t first_plan_ = 0, n_plans_ = 0, max_in_flight_ = 1;
  // Step buffers, sized once.
  std::vector<int32_t> batch_tokens_;       // [max_num_batched_tokens]
  std::vector<int32_t> batch_positions_;    // [max_num_batched_tokens]
  std::vector<int32_t> batch_seq_;          // [max_num_batched_tokens]
  std::vector<int32_t> batch_state_slots_;  // [max_num_seqs] state slot of each batch sequence
  std::vector<PlannedCheckpoint> planned_checkpoints_;   // [<= max_num_batched_tokens] a request's
  std::vector<StateCheckpointWrite> batch_checkpoints_;  // [<= max_num_batched_tokens] the pass's
  // [<= 2 * max_num_seqs] state copies for the next pass to do first (every rank holds its part
  // of the states): prefix checkpoints restored, speculative states kept
  std::vector<StateCopy> pending_state_copies_;
  // First speculation state slot (recurrent models that speculate), or -1.
  int32_t speculation_slots_ = -1;
  std::vector<bool> state_slot_populated_;     // [max_num_seqs] a sequence slot's pages were mapped
  std::vector<CacheGroupUsage> cache_groups_;  // geometry of cache_groups(), usage left at 0
  std::vector<int32_t> group_entry_;   // [n_groups] each layer group's entry of cache_groups_
  std::vector<int32_t> block_tables_;  // [max_num_seqs, max_blocks_per_seq]
  std::vector<int32_t> logits_rows_;   // [max_logits]
  std::vector<float> logits_;          // [max_logits, n_vocab] the completing pass's
  // Embedding requests only (sized at the first one): rows whose final hidden state is wanted.
  std::vector<int32_t> hidden_rows_;  // [max_num_batched_tokens] batch indices
  std::vector<Live*> hidden_owner_;   // [max_num_batched_tokens] request of each row
  std::vector<float> hidden_;         // [max_num_batched_tokens, n_embd]
  // The inputs of the layers a following proposer reads, for the same rows as hidden_.
  std::vector<float> layer_inputs_;     // [max_num_batched_tokens, n_captured * n_embd]
  int64_t layer_input_width_ = 0;       // n_captured * n_embd (0: the final hidden states)
  std::vector<Live*> embeddings_done_;  // [max_num_seqs] prompts completed this step
  int32_t n_hidden_ = 0;
  SpeculationPolicy spec_policy_;
  AcceptanceEstimate all_acceptance_ = AcceptanceEstimate::for_engine();  // every request's runs
  std::unique_ptr<Proposer> configured_proposer_;   // the configured method's (null: none)
  std::unique_ptr<Proposer> override_proposer_;     // set_proposer's, or null
  Proposer* proposer_ = nullptr;                    // the one in use
  TokenProposer proposal_replay_;                   // set_proposal_replay's, or empty
  std::vector<ProposalRequest> proposal_requests_;  // [max_num_seqs] granted this step
  std::vector<int32_t> proposal_out_;               // [max_num_seqs, K] their proposals
  std::vector<float> verify_work_;                  // [n_vocab]
  std::vector<Request*> drafted_;  // [max_num_seqs] requests with proposals this step
  // A proposer that follows passes: each scheduled request's rows in the completing pass, and
  // where its hidden rows start among the pass's (after the embedding requests' n_hidden_).
  struct FollowedRows {
    uint64_t id;
    int32_t first_position;
    int32_t n_rows;        // the pass's tokens of the request
    int32_t first_hidden;  // counted from n_hidden_
    int32_t batch_first;   // batch index of its first token
  };
  std::vector<FollowedRows> followed_;  // [max_num_seqs]
  std::vector<PassRows> pass_rows_;     // [max_num_seqs]
  int32_t n_follow_hidden_ = 0;         // hidden rows of the pass for the proposer
  int32_t max_blocks_per_seq_ = 0;
  // Tensor parallelism: passes run since the ranks' figures were last gathered, and when.
  bool tp_passes_ungathered_ = false;
  Clock::time_point tp_gathered_at_{};
};

}  // namespace vela

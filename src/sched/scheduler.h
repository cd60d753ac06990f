#pragma once
// Iteration-level (continuous) batching. Every step it decides how many new tokens each request
// computes, under a token budget and a cap on running sequences: running requests first (their
// next decode token or prefill chunk), then waiting ones by effective priority, with long
// prompts split into chunks so decoding never stalls behind them. When KV blocks run out, the
// lowest-priority, most recently arrived running request is preempted (its blocks freed, to be
// recomputed later — the prefix cache makes that cheap).
//
// Effective priority = priority + aging_per_second x seconds since arrival
//                      + preemption_boost x times preempted,
// so nothing starves and a preempted request is not thrashed.
//
// Speculative proposals (Request::n_draft) are tokens like any others: a decode runs its token
// and its proposals together, counted in the token budget, the plan and its KV blocks; when
// blocks are short the proposals are dropped before anyone is preempted for them.
//
// Latency target: a step that carries running decodes admits only as many prefill tokens as
// keep its time, as the cost estimator predicts it, under the target, so every stream's
// inter-token latency stays near it while long prompts are split over several steps. The
// target is target_step_seconds, raised to target_decode_ratio x the predicted time of the
// decodes alone: a fixed ITL cannot fit every model and machine (a batch of decodes may by
// itself take longer), while a ratio keeps the slowest gaps a bounded multiple of the typical
// one and leaves prefill a fixed share of each step. While the estimator is not ready yet,
// only min_prefill_tokens go in beside decodes; and at least that many always do, so prompts
// finish in a bounded number of steps whatever the decode load. Steps without decodes use the
// whole token budget. Waiting prompts age: once the oldest unfinished prefill has waited longer
// than prefill_patience x the target, the target grows in proportion, so a backlog of prompts
// (a burst of arrivals) is cleared at close to full speed and their TTFT stays bounded.
// Pipelines: a request whose tokens are in a pass still in flight (Request::in_flight) is
// neither scheduled nor preempted until the engine has that pass's outputs; the engine asks for
// steps of a share of the requests (max_requests), so that several passes of different requests
// keep every stage busy.
// Thread-safety: not synchronised; the engine thread owns it.
#include <cstdint>
#include <limits>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/step_cost_model.h"

namespace vela {

// Prefill tokens that join running decodes in every step at least, under a latency target. Small:
// on a slow CPU one 32-token chunk can take as long as several decode steps.
inline constexpr int32_t kDefaultMinPrefillTokens = 8;

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 512;  // token budget of one step
  int32_t max_num_seqs = 64;             // running requests at most
  bool enable_chunked_prefill = true;    // split prompts longer than the remaining budget
  double priority_aging_per_second = 0.1;
  double preemption_boost = 1.0;
  double target_step_seconds = 0;  // predicted step time to stay under with decodes; 0 = off
  double target_decode_ratio = 0;  // ... or this multiple of the decodes' own time, if longer
  double prefill_patience = 20;    // in targets: longer waits raise the target (aging)
  // Per step under the target, so prompts keep progressing.
  int32_t min_prefill_tokens = kDefaultMinPrefillTokens;
};

struct ScheduledRequest {
  Request* request = nullptr;
  int32_t num_new_tokens = 0;  // tokens [num_computed, num_computed + num_new_tokens) run this step
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  std::vector<Request*> preempted;
  int32_t total_tokens = 0;
  StepShape shape;              // what the scheduled tokens compute
  bool prefill_capped = false;  // the latency target limited this step's prefill tokens
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);
  // The step-time predictions the latency target uses (null = none: the target is ignored).
  // Must outlive the scheduler.
  void set_cost_estimator(const StepCostEstimator* estimator) { cost_ = estimator; }

  const SchedulerConfig& config() const { return config_; }
  void add(Request* request);  // joins the waiting queue
  // Removes a request wherever it is and frees its blocks (finish or abort).
  void remove(Request* request);

  // Plans one step of at most max_requests requests into `out` (its vectors are reused; no
  // allocation in steady state).
  void schedule(Clock::time_point now, SchedulerOutput& out,
                size_t max_requests = std::numeric_limits<size_t>::max());
  // Waiting requests and running ones not in flight: those a step could schedule.
  size_t n_schedulable() const;

  size_t n_waiting() const { return waiting_.size(); }
  size_t n_running() const { return running_.size(); }
  uint64_t n_preemptions() const { return n_preemptions_; }
  bool has_requests() const { return !waiting_.empty() || !running_.empty(); }

 private:
  double effective_priority(const Request& r, Clock::time_point now) const;
  void sort_by_priority(std::vector<Request*>& queue, Clock::time_point now) const;
  void preempt(Request* r, SchedulerOutput& out);
  // This step's target, seconds: fixed or a multiple of planned_'s decodes, raised by aging.
  double latency_target(Clock::time_point now) const;
  // Prefill tokens request `r` may compute this step, out of `wanted`, under the latency target.
  int32_t prefill_allowance(const Request& r, int32_t wanted) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  const StepCostEstimator* cost_ = nullptr;
  // The step being planned: every running decode plus the prefill tokens granted so far.
  StepShape planned_;
  bool cap_prefill_ = false;  // the target applies this step: decodes run beside prefill
  double step_target_ = 0;    // seconds, this step
  std::vector<Request*> waiting_;
  std::vector<Request*> running_;
  uint64_t n_preemptions_ = 0;
};

}  // namespace vela

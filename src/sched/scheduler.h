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
// Thread-safety: not synchronised; the engine thread owns it.
#include <cstdint>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"

namespace vela {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 512;  // token budget of one step
  int32_t max_num_seqs = 64;             // running requests at most
  bool enable_chunked_prefill = true;    // split prompts longer than the remaining budget
  double priority_aging_per_second = 0.1;
  double preemption_boost = 1.0;
};

struct ScheduledRequest {
  Request* request = nullptr;
  int32_t num_new_tokens = 0;  // tokens [num_computed, num_computed + num_new_tokens) run this step
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  std::vector<Request*> preempted;
  int32_t total_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  const SchedulerConfig& config() const { return config_; }
  void add(Request* request);  // joins the waiting queue
  // Removes a request wherever it is and frees its blocks (finish or abort).
  void remove(Request* request);

  // Plans one step into `out` (its vectors are reused; no allocation in steady state).
  void schedule(Clock::time_point now, SchedulerOutput& out);

  size_t n_waiting() const { return waiting_.size(); }
  size_t n_running() const { return running_.size(); }
  uint64_t n_preemptions() const { return n_preemptions_; }
  bool has_requests() const { return !waiting_.empty() || !running_.empty(); }

 private:
  double effective_priority(const Request& r, Clock::time_point now) const;
  void sort_by_priority(std::vector<Request*>& queue, Clock::time_point now) const;
  void preempt(Request* r, SchedulerOutput& out);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::vector<Request*> waiting_;
  std::vector<Request*> running_;
  uint64_t n_preemptions_ = 0;
};

}  // namespace vela

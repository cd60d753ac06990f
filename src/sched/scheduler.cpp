#include "sched/scheduler.h"

#include <algorithm>
#include <cassert>

namespace vela {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  waiting_.reserve(256);
  running_.reserve(size_t(config.max_num_seqs));
}

void Scheduler::add(Request* r) {
  r->status = RequestStatus::kWaiting;
  waiting_.push_back(r);
}

void Scheduler::remove(Request* r) {
  for (auto* queue : {&waiting_, &running_}) {
    auto it = std::find(queue->begin(), queue->end(), r);
    if (it != queue->end()) queue->erase(it);
  }
  kv_.release(r->kv);
  r->status = RequestStatus::kFinished;
}

double Scheduler::effective_priority(const Request& r, Clock::time_point now) const {
  const double age = std::chrono::duration<double>(now - r.timeline.arrival).count();
  return r.priority + config_.priority_aging_per_second * age +
         config_.preemption_boost * r.n_preemptions;
}

void Scheduler::sort_by_priority(std::vector<Request*>& queue, Clock::time_point now) const {
  // Highest effective priority first; ties by arrival, then id, so the order is total.
  std::stable_sort(queue.begin(), queue.end(), [&](const Request* a, const Request* b) {
    const double pa = effective_priority(*a, now), pb = effective_priority(*b, now);
    if (pa != pb) return pa > pb;
    if (a->timeline.arrival != b->timeline.arrival)
      return a->timeline.arrival < b->timeline.arrival;
    return a->id < b->id;
  });
}

void Scheduler::preempt(Request* r, SchedulerOutput& out) {
  kv_.release(r->kv);
  r->num_computed = 0;
  r->status = RequestStatus::kWaiting;
  ++r->n_preemptions;
  ++n_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), r));
  waiting_.push_back(r);
  out.preempted.push_back(r);
}

void Scheduler::schedule(Clock::time_point now, SchedulerOutput& out) {
  out.scheduled.clear();
  out.preempted.clear();
  out.total_tokens = 0;
  int32_t budget = config_.max_num_batched_tokens;

  // 1. Running requests, most important first; victims come from the back.
  sort_by_priority(running_, now);
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    const int32_t n = std::min(r->n_pending(), budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!kv_.allocate(r->kv, r->num_computed + n)) {
      Request* victim = running_.back();
      preempt(victim, out);
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // everything after it was lower priority and is gone too
    out.scheduled.push_back({r, n});
    budget -= n;
    ++i;
  }

  // 2. Waiting requests, unless this step had to preempt (memory is tight: let it drain).
  if (out.preempted.empty()) {
    sort_by_priority(waiting_, now);
    size_t admitted = 0;
    for (;
         admitted < waiting_.size() && budget > 0 && running_.size() < size_t(config_.max_num_seqs);
         ++admitted) {
      Request* r = waiting_[admitted];
      if (r->kv.blocks.empty()) {
        r->num_computed = kv_.acquire_cached_prefix(r->tokens, r->kv);
        if (r->n_preemptions == 0) r->cached_prompt_tokens = std::min(r->num_computed, r->n_prompt);
      }
      const int32_t pending = r->n_pending();
      const int32_t n = std::min(pending, budget);
      if ((!config_.enable_chunked_prefill && n < pending) ||
          !kv_.allocate(r->kv, r->num_computed + n)) {
        kv_.release(r->kv);  // give back prefix-cache references while it waits
        r->num_computed = 0;
        break;
      }
      r->status = RequestStatus::kRunning;
      if (r->timeline.first_scheduled == Clock::time_point{}) r->timeline.first_scheduled = now;
      running_.push_back(r);
      out.scheduled.push_back({r, n});
      budget -= n;
    }
    waiting_.erase(waiting_.begin(), waiting_.begin() + long(admitted));
  }
  out.total_tokens = config_.max_num_batched_tokens - budget;
}

}  // namespace vela

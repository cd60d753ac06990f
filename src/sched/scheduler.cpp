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

double Scheduler::latency_target(Clock::time_point now) const {
  double target = std::max(config_.target_step_seconds,
                           config_.target_decode_ratio * cost_->predict_seconds(planned_));
  Clock::time_point oldest = now;
  for (const auto* queue : {&waiting_, &running_})
    for (const Request* r : *queue)
      if (r->num_computed < r->n_prompt) oldest = std::min(oldest, r->timeline.arrival);
  const double waited = std::chrono::duration<double>(now - oldest).count();
  const double patience = config_.prefill_patience * target;
  if (patience > 0 && waited > patience) target *= waited / patience;
  return target;
}

int32_t Scheduler::prefill_allowance(const Request& r, int32_t wanted) const {
  if (!cap_prefill_ || wanted <= 0) return wanted;
  const int32_t floor = std::max(0, config_.min_prefill_tokens - planned_.prefill_tokens);
  if (!cost_->ready()) return std::min(wanted, floor);
  const auto predicted = [&](int32_t n) {
    StepShape s = planned_;
    s.add(r.num_computed, n, false);
    return cost_->predict_seconds(s);
  };
  // Largest n whose predicted step fits (the prediction grows with n).
  int32_t lo = 0, hi = wanted;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (predicted(mid) <= step_target_)
      lo = mid;
    else
      hi = mid - 1;
  }
  return std::max(lo, std::min(wanted, floor));
}

void Scheduler::schedule(Clock::time_point now, SchedulerOutput& out, size_t max_requests) {
  out.scheduled.clear();
  out.preempted.clear();
  out.total_tokens = 0;
  out.shape = {};
  out.prefill_capped = false;
  int32_t budget = config_.max_num_batched_tokens;

  // The latency target applies when decodes run; the plan starts from every running decode,
  // wherever it sits in the priority order. Until the estimator can predict (the first steps
  // of a server), only the minimum chunk goes in beside decodes: an unknown step is not
  // allowed to stall every stream.
  planned_ = {};
  if (config_.target_step_seconds > 0 && config_.enable_chunked_prefill && cost_)
    for (const Request* r : running_)
      if (!r->in_flight && r->is_decode()) planned_.add(r->num_computed, 1 + r->n_draft, true);
  cap_prefill_ = planned_.decode_tokens > 0;
  if (cap_prefill_ && cost_->ready()) step_target_ = latency_target(now);

  // Tokens the request computes this step, as much of `wanted` as the target lets through.
  const auto allowance = [&](const Request& r, int32_t wanted) {
    if (r.is_decode()) return wanted;  // a decode: already in the plan
    const int32_t n = prefill_allowance(r, wanted);
    out.prefill_capped |= n < wanted;
    return n;
  };
  // `from_waiting`: a decode admitted now was not in the plan yet.
  const auto take = [&](Request* r, int32_t n, bool from_waiting) {
    const bool decode = r->is_decode();
    if (!decode || from_waiting) planned_.add(r->num_computed, n, decode);
    out.shape.add(r->num_computed, n, decode);
    out.scheduled.push_back({r, n});
    budget -= n;
  };

  // 1. Running requests, most important first; victims come from the back.
  sort_by_priority(running_, now);
  for (size_t i = 0; i < running_.size() && budget > 0 && out.scheduled.size() < max_requests;) {
    Request* r = running_[i];
    if (r->in_flight) {
      ++i;
      continue;
    }
    int32_t n = allowance(*r, std::min(r->n_pending(), budget));
    if (n <= 0) {
      ++i;
      continue;
    }
    // Proposals never preempt anyone: without room for them the decode runs alone.
    if (r->n_draft > 0 && !kv_.allocate(r->kv, r->num_computed + n)) n = 1;
    bool self_preempted = false;
    while (!kv_.allocate(r->kv, r->num_computed + n)) {
      // The least important request whose blocks no pass is using (r itself at worst).
      Request* victim = *std::find_if(running_.rbegin(), running_.rend(),
                                      [](const Request* q) { return !q->in_flight; });
      preempt(victim, out);
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // everything after it was lower priority: gone or in flight
    take(r, n, false);
    ++i;
  }

  // 2. Waiting requests, unless this step had to preempt (memory is tight: let it drain).
  if (out.preempted.empty()) {
    sort_by_priority(waiting_, now);
    size_t admitted = 0;
    for (; admitted < waiting_.size() && budget > 0 &&
           running_.size() < size_t(config_.max_num_seqs) && out.scheduled.size() < max_requests;
         ++admitted) {
      Request* r = waiting_[admitted];
      if (r->kv.blocks.empty()) {
        r->num_computed = r->embedding ? 0 : kv_.acquire_cached_prefix(r->tokens, r->kv);
        if (r->n_preemptions == 0) r->cached_prompt_tokens = std::min(r->num_computed, r->n_prompt);
      }
      const int32_t pending = r->n_pending();
      const int32_t n = allowance(*r, std::min(pending, budget));
      if (n <= 0 || (!config_.enable_chunked_prefill && n < pending) ||
          !kv_.allocate(r->kv, r->num_computed + n)) {
        kv_.release(r->kv);  // give back prefix-cache references while it waits
        r->num_computed = 0;
        break;
      }
      r->status = RequestStatus::kRunning;
      if (r->timeline.first_scheduled == Clock::time_point{}) r->timeline.first_scheduled = now;
      running_.push_back(r);
      take(r, n, true);
    }
    waiting_.erase(waiting_.begin(), waiting_.begin() + long(admitted));
  }
  out.total_tokens = config_.max_num_batched_tokens - budget;
}

size_t Scheduler::n_schedulable() const {
  return waiting_.size() + size_t(std::count_if(running_.begin(), running_.end(),
                                                [](const Request* r) { return !r->in_flight; }));
}

}  // namespace vela

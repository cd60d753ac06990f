#pragma once
// A scheduler over a real block pool, with requests that are only token counts, stepped as the
// engine would step it.
#include <chrono>
#include <deque>

#include "sched/scheduler.h"

namespace vela {

inline constexpr int32_t kBlock = 4;

struct Fixture {
  BlockPool pool;
  KvCacheManager kv;
  Scheduler scheduler;
  std::deque<Request> requests;
  Clock::time_point t0 = Clock::now();

  Fixture(int32_t n_blocks, SchedulerConfig config)
      : pool(n_blocks, false), kv(pool, kBlock), scheduler(config, kv) {}

  Request* add(int32_t n_prompt, int32_t priority = 0, double arrival_s = 0) {
    Request& r = requests.emplace_back();
    r.id = requests.size();
    r.tokens.assign(size_t(n_prompt), 7);
    r.n_prompt = n_prompt;
    r.priority = priority;
    r.timeline.arrival =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s));
    scheduler.add(&r);
    return &r;
  }

  // Plans a step and applies it as the engine would (computed tokens advance; a request whose
  // tokens are all computed "samples" one more token).
  SchedulerOutput step(double now_s = 0) {
    SchedulerOutput out;
    scheduler.schedule(
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(now_s)),
        out);
    for (const auto& s : out.scheduled) {
      s.request->num_computed += s.num_new_tokens;
      if (s.request->n_pending() == 0) s.request->tokens.push_back(1);
    }
    return out;
  }
};

inline SchedulerConfig config(int32_t budget, int32_t max_seqs) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.priority_aging_per_second = 0;
  return c;
}

}  // namespace vela

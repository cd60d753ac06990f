// The scheduler alone, with requests that are only token counts: token budget and chunked
// prefill, the sequence cap, priority order, aging, preemption when blocks run out, and the
// requests of passes in flight.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace vela {
namespace {

TEST(Scheduler, LongPromptIsChunkedAndDecodeIsNeverStalled) {
  Fixture f(64, config(8, 8));
  Request* decoding = f.add(3);
  f.step();  // prefill of the short prompt
  Request* long_prompt = f.add(21);
  for (int i = 0; i < 3; ++i) {
    const SchedulerOutput out = f.step();
    ASSERT_EQ(out.scheduled.size(), 2u);
    EXPECT_EQ(out.scheduled[0].request, decoding);  // running decode first: 1 token
    EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
    EXPECT_EQ(out.scheduled[1].request, long_prompt);  // the rest of the budget: a chunk
    EXPECT_EQ(out.scheduled[1].num_new_tokens, 7);
    EXPECT_LE(out.total_tokens, 8);
  }
  EXPECT_EQ(long_prompt->num_computed, 21);  // three chunks of 7 prompt tokens
}

TEST(Scheduler, SequenceCapAndPriorityOrderAtAdmission) {
  Fixture f(64, config(100, 2));
  Request* low = f.add(2, 0, 0.0);
  Request* high = f.add(2, 5, 0.1);
  Request* mid = f.add(2, 1, 0.2);
  const SchedulerOutput out = f.step(1);
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].request, high);
  EXPECT_EQ(out.scheduled[1].request, mid);
  EXPECT_EQ(low->status, RequestStatus::kWaiting);
  EXPECT_EQ(f.scheduler.n_running(), 2u);
}

TEST(Scheduler, AgingLetsAnOldLowPriorityRequestIn) {
  SchedulerConfig c = config(100, 1);
  c.priority_aging_per_second = 1.0;
  Fixture f(64, c);
  Request* old_low = f.add(2, 0, 0.0);
  // A stream of newer priority-3 requests: after ~3 s of waiting the old one overtakes them.
  Request* fresh = f.add(2, 3, 10.0);
  const SchedulerOutput out = f.step(10.0);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].request, old_low);
  EXPECT_EQ(fresh->status, RequestStatus::kWaiting);
}

TEST(Scheduler, OutOfBlocksPreemptsLowestPriorityMostRecent) {
  // 6 blocks of 4 slots; three requests of 8 tokens take 2 blocks each; growth needs more.
  Fixture f(6, config(100, 8));
  Request* a = f.add(8, 1, 0.0);
  Request* b = f.add(8, 0, 0.1);
  Request* c = f.add(8, 0, 0.2);
  f.step(1);  // all admitted: 2 blocks each, pool full, each samples its 9th token
  EXPECT_EQ(f.pool.n_free(), 0);
  // Next step each wants position 8 -> a third block; c (lowest priority, latest) goes first.
  SchedulerOutput out = f.step(2);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], c);
  EXPECT_EQ(c->num_computed, 0);
  EXPECT_TRUE(c->kv.blocks.empty());
  EXPECT_EQ(c->n_preemptions, 1);
  EXPECT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(a->status, RequestStatus::kRunning);
  EXPECT_EQ(b->status, RequestStatus::kRunning);
  for (Request* r : {a, b}) f.scheduler.remove(r);
  // With room again the preempted request is recomputed from scratch: prompt + its sampled token.
  out = f.step(3);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].request, c);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 9);
  f.scheduler.remove(c);
  EXPECT_EQ(f.pool.usage().used, 0);
}

TEST(Scheduler, ARequestThatCannotGrowPreemptsItself) {
  Fixture f(2, config(100, 8));
  Request* r = f.add(8);
  f.step();
  const SchedulerOutput out = f.step();  // position 8 needs a third block that does not exist
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], r);
  EXPECT_TRUE(out.scheduled.empty());
  f.scheduler.remove(r);
  EXPECT_EQ(f.pool.usage().used, 0);
}

// A pipeline's passes in flight: their requests are neither scheduled nor preempted (a victim
// is found among the others), and a step takes at most max_requests requests, the rest staying
// for the next pass.
TEST(Scheduler, RequestsInFlightAreNeitherScheduledNorPreempted) {
  // 6 blocks of 4 slots: three 8-token prompts fill the pool.
  Fixture f(6, config(100, 8));
  Request* low = f.add(8, 0, 0.0);
  Request* mid = f.add(8, 1, 0.1);
  Request* high = f.add(8, 2, 0.2);
  SchedulerOutput out;
  f.scheduler.schedule(f.t0, out, 2);  // a share: two of the three
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].request, high);
  EXPECT_EQ(out.scheduled[1].request, mid);
  EXPECT_EQ(f.scheduler.n_schedulable(), 3u);
  for (Request* r : {high, mid}) r->in_flight = true;
  EXPECT_EQ(f.scheduler.n_schedulable(), 1u);
  f.scheduler.schedule(f.t0, out);  // the next pass: the one left
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].request, low);
  low->in_flight = true;
  // The first pass returns; the next token of each needs a third block, and the pool is full.
  // The least important request, `low`, is in flight, so `mid` gives its blocks instead.
  for (Request* r : {high, mid}) {
    r->in_flight = false;
    r->num_computed = 8;
    r->tokens.push_back(1);
  }
  f.scheduler.schedule(f.t0, out);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], mid);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].request, high);
  EXPECT_EQ(low->status, RequestStatus::kRunning);
  EXPECT_EQ(low->kv.blocks.size(), 2u);
  for (Request* r : {low, mid, high}) f.scheduler.remove(r);
  EXPECT_EQ(f.pool.usage().used, 0);
}

}  // namespace
}  // namespace vela

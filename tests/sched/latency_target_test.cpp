// The scheduler under a step-time target, with a fake, exactly known cost estimator: prefill
// chunks shrink to what fits beside the running decodes, the whole budget is used when nothing
// decodes, prompts still finish in bounded steps, and priorities and preemption work as without
// a target.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace vela {
namespace {

// 10 ms per step, 5 ms per decode token, 1 ms per prefill token, 1 us per position read.
class FakeCost final : public StepCostEstimator {
 public:
  bool is_ready = true;
  bool ready() const override { return is_ready; }
  double predict_seconds(const StepShape& s) const override {
    return 0.010 + 0.005 * s.decode_tokens + 0.001 * s.prefill_tokens +
           1e-6 * double(s.context_reads);
  }
};

SchedulerConfig target_config(int32_t budget, int32_t max_seqs, double target_s) {
  SchedulerConfig c = config(budget, max_seqs);
  c.target_step_seconds = target_s;
  c.min_prefill_tokens = 4;
  return c;
}

struct TargetFixture : Fixture {
  FakeCost cost;
  TargetFixture(int32_t n_blocks, SchedulerConfig c) : Fixture(n_blocks, c) {
    scheduler.set_cost_estimator(&cost);
  }
  // Admits `n` short prompts and runs their prefill, so they decode from the next step on.
  std::vector<Request*> start_decodes(int n) {
    std::vector<Request*> out;
    for (int i = 0; i < n; ++i) out.push_back(add(2));
    step();
    return out;
  }
};

TEST(LatencyTarget, ChunkFitsBesideDecodesAndEveryStepStaysUnderTheTarget) {
  TargetFixture f(4096, target_config(512, 16, 0.060));
  f.start_decodes(4);
  Request* long_prompt = f.add(300);
  int steps = 0;
  while (long_prompt->num_computed < 300) {
    const int32_t start = long_prompt->num_computed;
    const SchedulerOutput out = f.step();
    ++steps;
    ASSERT_EQ(out.shape.decode_tokens, 4);
    EXPECT_LE(f.cost.predict_seconds(out.shape), 0.060) << "step " << steps;
    EXPECT_TRUE(out.prefill_capped || long_prompt->num_computed == 300);
    // The chunk is the largest that fits: one more token would cross the target.
    StepShape more = out.shape;
    more.add(long_prompt->num_computed, 1, false);
    EXPECT_GT(long_prompt->num_computed, start);
    if (long_prompt->num_computed < 300) EXPECT_GT(f.cost.predict_seconds(more), 0.060);
    ASSERT_LT(steps, 100);
  }
  // ~30 ms of the 60 go to decodes; the chunk gets the rest less its attention reads.
  EXPECT_GE(steps, 300 / 30);
  EXPECT_LE(steps, 300 / 20 + 1);
}

TEST(LatencyTarget, RatioRaisesTheTargetToAMultipleOfTheDecodes) {
  // 8 decodes alone predict 50 ms: a 20 ms target with ratio 2 becomes 100 ms, so ~50 prefill
  // tokens fit beside them.
  SchedulerConfig c = target_config(512, 16, 0.020);
  c.target_decode_ratio = 2.0;
  TargetFixture f(4096, c);
  f.start_decodes(8);
  f.add(300);
  const SchedulerOutput out = f.step();
  EXPECT_TRUE(out.prefill_capped);
  EXPECT_LE(f.cost.predict_seconds(out.shape), 0.100);
  EXPECT_GE(out.shape.prefill_tokens, 45);
  EXPECT_LE(out.shape.prefill_tokens, 50);
}

TEST(LatencyTarget, APromptThatWaitedLongRaisesTheTarget) {
  // 4 decodes (30 ms) + the prompt must fit 60 ms; patience 10 x 60 ms = 0.6 s.
  SchedulerConfig c = target_config(512, 16, 0.060);
  c.prefill_patience = 10;
  TargetFixture f(4096, c);
  f.start_decodes(4);
  f.add(300, 0, 0.0);
  const int32_t fresh = f.step(0.3).shape.prefill_tokens;  // waited 0.3 s: plain target
  const int32_t aged = f.step(1.8).shape.prefill_tokens;   // 1.8 s: 3x the patience
  EXPECT_LE(fresh, 30);
  // The target tripled to 180 ms: ~150 ms of prefill tokens beside the decodes.
  EXPECT_GE(aged, 4 * fresh);
}

TEST(LatencyTarget, WithoutDecodesPrefillTakesTheWholeBudget) {
  TargetFixture f(4096, target_config(128, 16, 0.020));
  Request* r = f.add(300);
  const SchedulerOutput out = f.step();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].request, r);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 128);
  EXPECT_FALSE(out.prefill_capped);
}

TEST(LatencyTarget, OffBehavesAsWithoutTarget) {
  TargetFixture f(4096, target_config(128, 16, 0.0));
  f.start_decodes(4);
  f.add(300);
  const SchedulerOutput out = f.step();
  EXPECT_EQ(out.total_tokens, 128);
  EXPECT_EQ(out.shape.decode_tokens, 4);
  EXPECT_EQ(out.shape.prefill_tokens, 124);
  EXPECT_FALSE(out.prefill_capped);
}

TEST(LatencyTarget, BeforeTheEstimatorIsReadyOnlyTheMinimumJoinsDecodes) {
  TargetFixture f(4096, target_config(128, 16, 10.0));  // a target everything would meet
  f.cost.is_ready = false;
  f.start_decodes(2);  // nothing decoded before: their prompts took what they needed
  Request* long_prompt = f.add(300);
  SchedulerOutput out = f.step();
  EXPECT_EQ(out.shape.decode_tokens, 2);
  EXPECT_EQ(out.shape.prefill_tokens, 4);
  EXPECT_TRUE(out.prefill_capped);
  f.cost.is_ready = true;  // now the prediction says everything fits
  out = f.step();
  EXPECT_EQ(out.shape.prefill_tokens, 126);
  EXPECT_FALSE(out.prefill_capped);
  EXPECT_EQ(long_prompt->num_computed, 130);
}

TEST(LatencyTarget, PromptsKeepProgressingWhenDecodesAloneExceedTheTarget) {
  // 12 decodes predict 70 ms, over the 50 ms target: the minimum chunk still goes in.
  TargetFixture f(4096, target_config(512, 16, 0.050));
  f.start_decodes(12);
  Request* long_prompt = f.add(40);
  for (int i = 0; i < 10; ++i) {
    const SchedulerOutput out = f.step();
    EXPECT_EQ(out.shape.prefill_tokens, 4) << "step " << i;
  }
  EXPECT_EQ(long_prompt->num_computed, 40);
  EXPECT_EQ(long_prompt->n_output(), 1);
}

TEST(LatencyTarget, PrefillTokensAreSharedInPriorityOrder) {
  TargetFixture f(4096, target_config(512, 16, 0.050));
  f.start_decodes(2);  // 20 ms of decodes: 30 prefill tokens fit (less their reads)
  Request* low = f.add(100, 0);
  Request* high = f.add(100, 5);
  const SchedulerOutput out = f.step();
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.scheduled[2].request, high);
  EXPECT_GE(out.scheduled[2].num_new_tokens, 25);
  // The rest of the time: nothing; the low-priority prompt waits for the next step.
  EXPECT_EQ(low->status, RequestStatus::kWaiting);
  EXPECT_LE(f.cost.predict_seconds(out.shape), 0.050);
}

TEST(LatencyTarget, PreemptionUnchanged) {
  // As Scheduler.OutOfBlocksPreemptsLowestPriorityMostRecent, with a target that never binds
  // there (all three requests decode): the same victim, the same recomputation.
  TargetFixture f(6, target_config(100, 8, 0.050));
  Request* a = f.add(8, 1, 0.0);
  Request* b = f.add(8, 0, 0.1);
  Request* c = f.add(8, 0, 0.2);
  f.step(1);
  SchedulerOutput out = f.step(2);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], c);
  EXPECT_EQ(out.scheduled.size(), 2u);
  for (Request* r : {a, b}) f.scheduler.remove(r);
  out = f.step(3);  // nothing decodes now: the recomputation is not capped
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 9);
  f.scheduler.remove(c);
  EXPECT_EQ(f.pool.usage().used, 0);
}

}  // namespace
}  // namespace vela

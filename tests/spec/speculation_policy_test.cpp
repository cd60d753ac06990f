// The policy speculates where the expected tokens per second rise and not where they fall:
// with the prior cost, and with a cost model that has measured a token's price.
#include "spec/speculation_policy.h"

#include <gtest/gtest.h>

namespace vela {
namespace {

StepShape one_decode(int32_t position) {
  StepShape s;
  s.add(position, 1, true);
  return s;
}

TEST(SpeculationPolicy, PriorCostSpeculatesOnlyWithEnoughAcceptance) {
  StepCostModel untrained;
  SpeculationPolicy policy(untrained, true);
  policy.begin_step(one_decode(100), 0.05, 0);
  EXPECT_EQ(policy.choose(100, 4, 0.9), 4);
  policy.begin_step(one_decode(100), 0.05, 0);
  EXPECT_EQ(policy.choose(100, 4, 0.02), 0);
  policy.begin_step(one_decode(100), 0.05, 0);
  const int32_t k = policy.choose(100, 8, 0.4);
  EXPECT_GT(k, 0);
  EXPECT_LT(k, 8);  // later proposals are unlikely to count: not worth their cost
}

TEST(SpeculationPolicy, MeasuredCostsDecide) {
  // Steps cost 10 ms fixed + 1 ms per token with logits.
  StepCostModel model;
  for (int i = 0; i < 40; ++i) {
    StepShape s;
    const int32_t tokens = 1 + i % 6;
    s.add(50, tokens, true);
    if (i % 3 == 0) s.add(0, 16, false);
    model.observe(s, 0.010 + 0.001 * tokens + (i % 3 == 0 ? 0.016 * 0.0005 : 0));
  }
  SpeculationPolicy policy(model, true);
  policy.begin_step(one_decode(50), 0.011, 0);
  EXPECT_GT(policy.choose(50, 4, 0.5), 0);  // +1 token expected for +~36% time

  // Compute-bound: 64 decodes per step, one extra token costs as much as any other.
  StepCostModel heavy;
  for (int i = 0; i < 40; ++i) {
    StepShape s;
    const int32_t tokens = 60 + i % 8;
    s.add(50, tokens, true);
    if (i % 3 == 0) s.add(0, 16, false);
    heavy.observe(s, 0.001 + 0.010 * tokens);
  }
  SpeculationPolicy busy(heavy, true);
  StepShape decodes;
  for (int r = 0; r < 64; ++r) decodes.add(50, 1, true);
  busy.begin_step(decodes, 0.641, 0);
  EXPECT_EQ(busy.choose(50, 4, 0.5), 0);
}

TEST(SpeculationPolicy, DraftPassesCount) {
  StepCostModel untrained;
  SpeculationPolicy policy(untrained, true);
  // A draft pass as dear as the whole step: not worth it even at acceptance 0.8.
  policy.begin_step(one_decode(100), 0.05, 0.05);
  EXPECT_EQ(policy.choose(100, 4, 0.8), 0);
  // A cheap draft (a tenth of the step per pass) pays at that acceptance.
  policy.begin_step(one_decode(100), 0.05, 0.005);
  EXPECT_GT(policy.choose(100, 4, 0.8), 0);
  // ... unless it must first catch up on a long prompt and few tokens are left to repay it.
  policy.begin_step(one_decode(100), 0.05, 0.005);
  EXPECT_EQ(policy.choose(100, 4, 0.8, /*upfront_seconds=*/2.0, /*remaining_tokens=*/10), 0);
  policy.begin_step(one_decode(100), 0.05, 0.005);
  EXPECT_GT(policy.choose(100, 4, 0.8, 2.0, 10000), 0);
}

TEST(SpeculationPolicy, NotAdaptiveGrantsEverything) {
  StepCostModel untrained;
  SpeculationPolicy policy(untrained, false);
  policy.begin_step(one_decode(10), 0, 0);
  EXPECT_EQ(policy.choose(10, 3, 0.0), 3);
  EXPECT_EQ(policy.choose(10, 0, 1.0), 0);
}

TEST(AcceptanceEstimate, StartsAtThePriorAndFollowsObservations) {
  AcceptanceEstimate a;
  EXPECT_DOUBLE_EQ(a.rate(0.5), 0.5);
  for (int i = 0; i < 30; ++i) a.observe(0, 4);
  EXPECT_LT(a.rate(0.5), 0.05);
  for (int i = 0; i < 30; ++i) a.observe(4, 4);
  EXPECT_GT(a.rate(0.5), 0.9);
}

}  // namespace
}  // namespace vela

// The policy speculates where the expected tokens per second rise and not where they fall:
// with the prior cost, and with a cost model that has measured a token's price.
#include "spec/speculation_policy.h"

#include <gtest/gtest.h>

#include <vector>

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

// Steps of one token count only (one request, always granted the same k) cannot price a token:
// until the cost model can, every step after one with proposals grants none, so the model sees
// steps of another count; once it can, the policy grants step after step.
TEST(SpeculationPolicy, PlainStepsFollowProposalsUntilTheTokenPriceIsKnown) {
  StepCostModel model;
  SpeculationPolicy policy(model, true);
  StepShape prefill;
  prefill.add(0, 64, false);
  model.observe(prefill, 0.040);
  std::vector<int32_t> granted;
  for (int32_t step = 0; step < 24; ++step) {
    policy.begin_step(one_decode(64 + step), 0.010, 0);
    const int32_t k = policy.choose(64 + step, 2, 0.9);
    granted.push_back(k);
    StepShape s = one_decode(64 + step);
    s.add(65 + step, k, true);
    model.observe(s, 0.010 + 0.001 * s.decode_tokens);  // 1 ms a token
  }
  EXPECT_EQ(granted[0], 2);
  EXPECT_EQ(granted[1], 0);  // the plain step after it
  EXPECT_EQ(granted[2], 2);
  // Known by the end: proposals on every step.
  for (size_t i = granted.size() - 4; i < granted.size(); ++i) EXPECT_EQ(granted[i], 2) << i;
  EXPECT_GE(model.decode_token_spread(), SpeculationPolicy::kMinDecodeSpread);
}

// Under load (16 decodes a step, an extra token priced at a tenth of the step before it was
// measured) no proposal pays: the policy grants none and so is not measuring a token's price (an
// MTP head computes first proposals for every sequence only while it is); one grant starts it.
TEST(SpeculationPolicy, APolicyThatNeverGrantedIsNotMeasuring) {
  StepCostModel model;
  SpeculationPolicy policy(model, true);
  StepShape decodes;
  for (int32_t i = 0; i < 16; ++i) decodes.add(64, 1, true);
  for (int32_t step = 0; step < 8; ++step) {
    policy.begin_step(decodes, 0.050, 0);
    for (int32_t i = 0; i < 16; ++i) EXPECT_EQ(policy.choose(64 + step, 2, 0.6), 0);
    model.observe(decodes, 0.050);
    EXPECT_FALSE(policy.measuring()) << step;
  }
  policy.begin_step(one_decode(64), 0.010, 0);
  EXPECT_EQ(policy.choose(64, 2, 0.9), 2);
  EXPECT_TRUE(policy.measuring());
}

// A request whose first two runs were rejected, alone on the engine: its estimate weighs them
// against the engine's prior (which the same two runs hardly move) and, optimistic while it has
// seen so few, stays above the 0.25 at which one proposal pays, so it keeps proposing; a request
// whose 22 runs were all rejected stops.
TEST(SpeculationPolicy, AFewUnluckyRunsDoNotStopARequest) {
  // 10 ms a step + 2.5 ms per token: one proposal pays from acceptance 0.25.
  StepCostModel model;
  for (int i = 0; i < 40; ++i) {
    StepShape s = one_decode(50);
    s.add(51, i % 3, true);
    if (i % 5 == 0) s.add(0, 16, false);
    model.observe(s, 0.0075 + 0.0025 * s.decode_tokens + 0.0001 * s.prefill_tokens);
  }
  AcceptanceEstimate all = AcceptanceEstimate::for_engine(), request;
  const auto next_k = [&] {
    SpeculationPolicy policy(model, true);
    policy.begin_step(one_decode(50), 0.010, 0);
    return policy.choose(50, 2, request.optimistic_rate(all.rate(AcceptanceEstimate::kFirstPrior)));
  };
  for (int i = 0; i < 2; ++i) {
    all.observe(0, 1);
    request.observe(0, 1);
  }
  EXPECT_GT(next_k(), 0);
  for (int i = 0; i < 20; ++i) {
    all.observe(0, 1);
    request.observe(0, 1);
  }
  EXPECT_EQ(next_k(), 0);
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
  for (int i = 0; i < 30; ++i) a.observe(0, 1);
  EXPECT_LT(a.rate(0.5), 0.25);
  for (int i = 0; i < 30; ++i) a.observe(4, 4);
  EXPECT_GT(a.rate(0.5), 0.9);
}

TEST(AcceptanceEstimate, OptimismShrinksWithEvidence) {
  AcceptanceEstimate a;
  EXPECT_GT(a.optimistic_rate(0.3), a.rate(0.3) + 0.1);
  for (int i = 0; i < 50; ++i) a.observe(i % 2, 1);
  EXPECT_NEAR(a.rate(0.5), 0.5, 0.05);
  EXPECT_LT(a.optimistic_rate(0.5) - a.rate(0.5), 0.15);
  EXPECT_GT(a.optimistic_rate(0.5), a.rate(0.5));
  AcceptanceEstimate sure;
  for (int i = 0; i < 50; ++i) sure.observe(3, 3);
  EXPECT_LE(sure.optimistic_rate(1.0), 1.0);
}

// The engine's estimate, every request's prior, moves slowly: one request's two rejected first
// runs leave a prior near kFirstPrior, under which that request keeps a rate a policy can still
// grant proposals at, where a prior of its own runs alone would have fallen to 0.
TEST(AcceptanceEstimate, TheEnginePriorSurvivesAFewUnluckyRuns) {
  AcceptanceEstimate all = AcceptanceEstimate::for_engine(), request;
  for (int i = 0; i < 2; ++i) {
    all.observe(0, 1);
    request.observe(0, 1);
  }
  const double prior = all.rate(AcceptanceEstimate::kFirstPrior);
  EXPECT_GT(prior, 0.3);
  EXPECT_GT(request.rate(prior), 0.2);
  // Many rejected runs do bring it down.
  for (int i = 0; i < 200; ++i) all.observe(0, 1);
  EXPECT_LT(all.rate(AcceptanceEstimate::kFirstPrior), 0.05);
}

}  // namespace
}  // namespace vela

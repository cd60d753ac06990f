// The step-cost model against steps whose times follow a known linear law: it recovers the law,
// keeps coefficients non-negative when the steps cannot tell terms apart, waits for enough
// steps before predicting, and refits when the machine's speed changes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sched/step_cost_model.h"

namespace vela {
namespace {

StepShape shape(int32_t decodes, int32_t prefill, int32_t context) {
  StepShape s;
  for (int32_t i = 0; i < decodes; ++i) s.add(context, 1, true);
  s.add(context, prefill, false);
  return s;
}

double law(const StepShape& s, double speed = 1) {
  return speed * (0.020 + 0.002 * s.decode_tokens + 0.0015 * s.prefill_tokens +
                  2e-8 * double(s.context_reads));
}

TEST(StepShape, CountsTokensAndTheirAttentionReads) {
  StepShape s;
  s.add(10, 1, true);    // position 10 reads 11 positions
  s.add(0, 4, false);    // positions 0..3 read 1+2+3+4
  s.add(100, 0, false);  // nothing
  EXPECT_EQ(s.decode_tokens, 1);
  EXPECT_EQ(s.prefill_tokens, 4);
  EXPECT_EQ(s.context_reads, 11 + 10);
  EXPECT_EQ(s.tokens(), 5);
}

TEST(StepCostModel, RecoversALinearLawFromVariedSteps) {
  StepCostModel m;
  std::mt19937 rng(1);
  EXPECT_FALSE(m.ready());
  for (int i = 0; i < 200; ++i) {
    const StepShape s = shape(int32_t(rng() % 17), int32_t(rng() % 3 == 0 ? rng() % 512 : 0),
                              int32_t(rng() % 2048));
    m.observe(s, law(s));
  }
  ASSERT_TRUE(m.ready());
  const auto& c = m.coefficients();
  EXPECT_NEAR(c[0], 0.020, 0.001);
  EXPECT_NEAR(c[1], 0.002, 0.0001);
  EXPECT_NEAR(c[2], 0.0015, 0.0001);
  EXPECT_NEAR(c[3], 2e-8, 0.2e-8);
  for (const StepShape& s : {shape(16, 0, 500), shape(4, 100, 50), shape(0, 512, 0)})
    EXPECT_NEAR(m.predict_seconds(s) / law(s), 1.0, 0.02);
  EXPECT_EQ(m.drift_resets(), 0u);
}

// One request decoding alone, every step with the same token count, says nothing of a decode
// token's price apart from the fixed part; steps of two counts do, more as they add up.
TEST(StepCostModel, DecodeTokenSpreadSaysWhenTheTokenPriceIsKnown) {
  StepCostModel m;
  m.observe(shape(0, 128, 0), law(shape(0, 128, 0)));
  for (int i = 0; i < 40; ++i) m.observe(shape(2, 0, 100), law(shape(2, 0, 100)));
  EXPECT_LT(m.decode_token_spread(), 0.1);
  // One step of another count: about one token^2 (it deviates by almost a token from a mean
  // the earlier steps hold near 2).
  m.observe(shape(1, 0, 100), law(shape(1, 0, 100)));
  EXPECT_GT(m.decode_token_spread(), 0.7);
  EXPECT_LT(m.decode_token_spread(), 1.0);
  // Alternating 1 and 2 tokens adds up.
  for (int i = 0; i < 31; ++i) m.observe(shape(1 + i % 2, 0, 100), law(shape(1 + i % 2, 0, 100)));
  EXPECT_GT(m.decode_token_spread(), 4.0);
  EXPECT_NEAR(m.coefficients()[1], 0.002, 0.0002);
}

TEST(StepCostModel, NeedsDecodeAndPrefillStepsBeforeItPredicts) {
  StepCostModel m;
  for (int i = 0; i < 10; ++i) m.observe(shape(4 + i, 0, 10), law(shape(4 + i, 0, 10)));
  EXPECT_FALSE(m.ready());  // never saw a prefill token
  m.observe(shape(0, 64, 0), law(shape(0, 64, 0)));
  EXPECT_FALSE(m.ready());
  m.observe(shape(2, 128, 0), law(shape(2, 128, 0)));
  EXPECT_TRUE(m.ready());
}

TEST(StepCostModel, CoefficientsStayNonNegative) {
  // Steps that grow faster with decodes than any single term explains, and get cheaper with
  // context: plain least squares would give a negative coefficient somewhere.
  StepCostModel m;
  for (int i = 0; i < 50; ++i) {
    const StepShape s = shape(i % 8, (i % 5) * 30, 4000 - 50 * i);
    m.observe(s, 0.05 + 0.01 * (i % 8) - 1e-5 * double(s.context_reads) * 1e-3);
  }
  for (double c : m.coefficients()) EXPECT_GE(c, 0.0);
  EXPECT_GT(m.predict_seconds(shape(8, 100, 100)), m.predict_seconds(shape(1, 0, 100)));
}

TEST(StepCostModel, RefitsWhenTheMachineSlowsDown) {
  StepCostModel m;
  std::mt19937 rng(2);
  const auto random_step = [&] {
    return shape(int32_t(1 + rng() % 16), int32_t(rng() % 2 ? rng() % 256 : 0),
                 int32_t(rng() % 1024));
  };
  for (int i = 0; i < 100; ++i) {
    const StepShape s = random_step();
    m.observe(s, law(s));
  }
  // Everything now takes 3x as long (another tenant, a lower clock).
  int steps_to_adapt = -1;
  for (int i = 0; i < 60 && steps_to_adapt < 0; ++i) {
    const StepShape s = random_step();
    m.observe(s, law(s, 3.0));
    const StepShape probe = shape(8, 64, 200);
    if (std::fabs(m.predict_seconds(probe) / law(probe, 3.0) - 1.0) < 0.1) steps_to_adapt = i + 1;
  }
  EXPECT_GE(m.drift_resets(), 1u);
  ASSERT_GT(steps_to_adapt, 0);
  EXPECT_LE(steps_to_adapt, 20);
}

TEST(StepCostModel, IgnoresMeaninglessTimes) {
  StepCostModel m;
  m.observe(shape(1, 0, 0), std::nan(""));
  m.observe(shape(1, 0, 0), -1);
  EXPECT_EQ(m.steps_observed(), 0u);
}

}  // namespace
}  // namespace vela

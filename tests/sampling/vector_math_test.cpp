// The vectorised helpers: exp accuracy, reductions, and the blocked weighted draw.
#include "sampling/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace vela::sampling {
namespace {

TEST(ExpApprox, RelativeErrorBelowThreeTenthsOfAMillionth) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.000731f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_approx(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
}

TEST(ExpApprox, UnderflowsToZeroAndClampsAbove) {
  EXPECT_EQ(exp_approx(-INFINITY), 0.0f);
  EXPECT_EQ(exp_approx(-87.5f), 0.0f);
  EXPECT_EQ(exp_approx(-1e30f), 0.0f);
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
}

TEST(VectorMath, MaxAndArgmaxWithTiesAndTails) {
  // 37 elements: exercises both the 16-lane body and the tail.
  std::vector<float> x(37, -1.0f);
  x[20] = 3.0f;
  x[36] = 3.0f;
  EXPECT_EQ(max_value(x), 3.0f);
  EXPECT_EQ(argmax(x), 20);
  x[36] = 4.0f;
  EXPECT_EQ(argmax(x), 36);
  const std::vector<float> masked(5, -INFINITY);
  EXPECT_EQ(max_value(masked), -INFINITY);
  EXPECT_EQ(argmax(masked), 0);
  EXPECT_EQ(max_value({}), -INFINITY);
}

TEST(VectorMath, SumExpMatchesDoubleReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 2.0f);
  std::vector<float> x(150001);  // not a multiple of the block size
  for (float& v : x) v = noise(rng);
  x[5] = -INFINITY;
  const float max = max_value(x);
  double exact = 0.0;
  for (const float v : x) exact += std::exp(static_cast<double>(v) - max);
  EXPECT_NEAR(sum_exp(x, max) / exact, 1.0, 2e-6);
}

TEST(VectorMath, WeightsAndDrawFollowCumulativeMass) {
  // 1000 weights over 4 blocks of 256: token i has logit log(i % 7) (so every 7th is -inf,
  // i.e. zero weight).
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::log(static_cast<float>(i % 7));
  std::vector<double> block_sums((x.size() + kSumBlock - 1) / kSumBlock);
  const double total = exp_weights_in_place(x, 0.0f, -INFINITY, block_sums);
  double exact_total = 0.0;
  for (size_t i = 0; i < x.size(); ++i) exact_total += static_cast<double>(i % 7);
  EXPECT_NEAR(total, exact_total, 1e-3);

  // The target just below / at each cumulative boundary selects that index / the next one.
  double cumulative = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 7 == 0) continue;
    const double before = cumulative;
    cumulative += x[i];
    EXPECT_EQ(draw_weighted(x, block_sums, (before + cumulative) / 2), i);
  }
  // Past the end (rounding): the last positive weight, never a zero one.
  EXPECT_EQ(draw_weighted(x, block_sums, total * 2.0), 999u);  // 999 % 7 = 5
}

TEST(VectorMath, WeightsApplyThreshold) {
  std::vector<float> x = {0.0f, -1.0f, -3.0f, -0.5f};
  std::vector<double> block_sums(1);
  const double total = exp_weights_in_place(x, 0.0f, -1.0f, block_sums);
  EXPECT_NEAR(x[0], 1.0f, 1e-6f);
  EXPECT_NEAR(x[1], std::exp(-1.0f), 1e-6f);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_NEAR(total, 1.0 + std::exp(-1.0) + std::exp(-0.5), 1e-6);
  EXPECT_EQ(draw_weighted(x, block_sums, total - 1e-9), 3u);
}

}  // namespace
}  // namespace vela::sampling

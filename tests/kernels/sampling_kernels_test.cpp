// The sampling kernels of every level this CPU runs return the reference's bits exactly: the
// sampler's draws, and so a seed's tokens, must not depend on the machine.
#include "kernels/sampling_kernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

namespace vela::kernels {
namespace {

// Logits with the awkward values a real row has: -inf (masked), ties, very negative.
std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = noise(rng);
    if (i % 17 == 3) x[i] = -INFINITY;
    if (i % 29 == 5) x[i] = -200.0f;
    if (i % 31 == 7 && i > 0) x[i] = x[i - 1];
  }
  return x;
}

// Sizes around the lane width and block size, plus a 150k vocabulary.
const size_t kSizes[] = {0, 1, 15, 16, 17, 255, 256, 257, 1000, 4099, 150001};

TEST(SamplingKernels, EveryLevelMatchesTheReferenceBitForBit) {
  const SamplingKernels& ref = sampling_kernels_ref();
  for (const KernelIsa isa : supported_kernel_isas()) {
    SCOPED_TRACE(kernel_isa_name(isa));
    const SamplingKernels& level = sampling_kernels(isa);
    for (const size_t n : kSizes) {
      SCOPED_TRACE(n);
      for (const size_t stride : {size_t{1}, size_t{2}, size_t{3}}) {
        const std::vector<float> x = random_logits(n * stride, static_cast<uint32_t>(n + stride));
        const float max = level.max_value(x.data(), n, stride);
        EXPECT_EQ(std::bit_cast<uint32_t>(max),
                  std::bit_cast<uint32_t>(ref.max_value(x.data(), n, stride)));
        const float shift = n == 0 ? 0.0f : max;
        EXPECT_EQ(std::bit_cast<uint64_t>(level.sum_exp(x.data(), n, stride, shift)),
                  std::bit_cast<uint64_t>(ref.sum_exp(x.data(), n, stride, shift)));
      }
      std::vector<float> weights = random_logits(n, static_cast<uint32_t>(7 * n + 1));
      std::vector<float> ref_weights = weights;
      const size_t blocks = (n + kSamplingSumBlock - 1) / kSamplingSumBlock;
      std::vector<double> sums(blocks), ref_sums(blocks);
      const double total = level.exp_weights(weights.data(), n, 1.5f, -4.0f, sums.data());
      const double ref_total = ref.exp_weights(ref_weights.data(), n, 1.5f, -4.0f, ref_sums.data());
      EXPECT_EQ(std::bit_cast<uint64_t>(total), std::bit_cast<uint64_t>(ref_total));
      EXPECT_EQ(weights, ref_weights);
      EXPECT_EQ(sums, ref_sums);
    }
  }
}

TEST(SamplingKernels, ReferenceAgreesWithExactArithmetic) {
  const SamplingKernels& ref = sampling_kernels_ref();
  const std::vector<float> x = random_logits(2 * 150001, 11);
  for (const size_t stride : {size_t{1}, size_t{2}}) {
    const size_t n = x.size() / stride;
    float exact_max = -INFINITY;
    for (size_t i = 0; i < n; ++i) exact_max = std::max(exact_max, x[i * stride]);
    EXPECT_EQ(ref.max_value(x.data(), n, stride), exact_max);
    double exact_sum = 0.0;
    for (size_t i = 0; i < n; ++i) exact_sum += std::exp(double{x[i * stride]} - exact_max);
    EXPECT_NEAR(ref.sum_exp(x.data(), n, stride, exact_max) / exact_sum, 1.0, 2e-6);
  }
  // Below the threshold a weight is exactly zero; above it, exp(x - shift).
  std::vector<float> w = {-5.0f, -1.0f, 0.0f, 2.0f, -INFINITY};
  double sums[1];
  const double total = ref.exp_weights(w.data(), w.size(), 2.0f, -1.0f, sums);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[4], 0.0f);
  EXPECT_NEAR(w[1], std::exp(-3.0), 1e-7);
  EXPECT_NEAR(w[3], 1.0, 1e-7);
  EXPECT_NEAR(total, std::exp(-3.0) + std::exp(-2.0) + 1.0, 1e-6);
  EXPECT_EQ(sums[0], total);
}

}  // namespace
}  // namespace vela::kernels

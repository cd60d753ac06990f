#pragma once
// Whole-vocabulary loops of the sampler (max, argmax, sums of exponentials, weighted draw),
// written so that compilers vectorise them without -ffast-math: independent lanes instead of
// one serial reduction, and a branch-free exp. (vela_sampling builds with -fno-trapping-math,
// which lets GCC if-convert the float selects; it does not change any result.)
// Over a 150k vocabulary these run for every token.
// Free functions without state: safe from any thread.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

// Hot whole-vocabulary loops get an AVX2 clone picked at load time (GCC function multiversioning)
// while the build itself targets baseline x86-64. No FMA is enabled, so every clone computes
// bit-identical results and a seed reproduces the same tokens on every machine.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VELA_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VELA_VECTOR_CLONES
#endif

namespace vela::sampling {

// Sums are accumulated in float lanes over blocks of this many elements, then in double: short
// float chains keep the relative error ~1e-7 even over 150k terms.
inline constexpr size_t kSumBlock = 256;

// exp(x) with relative error below ~3e-7 for x in [-87, 88]; exactly 0 below -87 (including
// -inf); clamped above 88. Branch-free so loops calling it vectorise.
inline float exp_approx(float x) {
  // exp(x) = 2^n * exp(r) with n = round(x / ln2) and |r| <= ln2 / 2. ln2 is split into a short
  // high part (n * ln2_hi is exact) and a correction, so r keeps full precision.
  constexpr float kLowest = -87.0f;  // exp(-87) ~ 1.6e-38: still a normal float
  constexpr float kHighest = 88.0f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer

  const float clamped = x < kLowest ? kLowest : (x > kHighest ? kHighest : x);
  const float n = (clamped * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  // Taylor series to r^7 / 7!: the remainder r^8 / 8! is < 6e-9 for |r| <= 0.347.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t biased_exponent = static_cast<int32_t>(n) + 127;
  const float two_to_n = std::bit_cast<float>(static_cast<uint32_t>(biased_exponent) << 23);
  const float result = p * two_to_n;
  return x < kLowest ? 0.0f : result;
}

// Largest element; -inf for an empty span. x: [n], no NaN.
float max_value(std::span<const float> x);

// Index of the largest element, the lowest index among ties; 0 for an empty span. x: [n], no NaN.
int32_t argmax(std::span<const float> x);

// sum_i exp(x_i - shift). x: [n], no NaN; shift: usually max_value(x), so every term is <= 1.
double sum_exp(std::span<const float> x, float shift);

// Turns x into unnormalised probabilities in place: x_i <- exp(x_i - shift) if x_i >= threshold,
// else 0. Writes the sum of each kSumBlock-element block to block_sums and returns the total.
// x: [n]; block_sums: [ceil(n / kSumBlock)].
double exp_weights_in_place(std::span<float> x, float shift, float threshold,
                            std::span<double> block_sums);

// Index i drawn with probability weights_i / total, for target = u * total with u uniform in
// [0, 1): the first i whose cumulative weight exceeds target. Skips whole blocks by their sums,
// so it reads only one block of weights. Never returns an index of zero weight when any weight
// is positive. weights, block_sums: as left by exp_weights_in_place.
size_t draw_weighted(std::span<const float> weights, std::span<const double> block_sums,
                     double target);

}  // namespace vela::sampling

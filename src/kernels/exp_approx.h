#pragma once
// A branch-free exp for whole-vocabulary loops, shared by the sampling kernels (compiled once per
// instruction-set level) and the sampler's scalar code. It has internal linkage on purpose: each
// level's file inlines its own copy under its own flags, and no out-of-line copy compiled for a
// higher level can be picked by the linker for code that runs on a lower one.
// Pure function: safe from any thread.
#include <bit>
#include <cstdint>

namespace vela::kernels {
namespace {

// exp(x) with relative error below ~3e-7 for x in [-87, 88]; exactly 0 below -87 (including
// -inf); clamped above 88. Only adds and multiplies in a fixed order (no FMA where the caller's
// file is built without contraction), so every level computes bit-identical results.
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

}  // namespace
}  // namespace vela::kernels

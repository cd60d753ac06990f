#pragma once
// Worst-case reconstruction error of each format, per block, derived from how the format
// quantizes (shared by the round-trip and the GGUF comparison tests).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "quant/ggml_type.h"

namespace vela::test {

// Relative error of fp16 round-to-nearest for normal values (half an ulp of an 11-bit
// significand), and the absolute error for values in fp16's subnormal range (half of 2^-24).
inline constexpr float kHalfRel = 0x1p-11f;
inline constexpr float kHalfAbs = 0x1p-25f;

// Bound on |x - decode(encode(x))| over one block x[0..n) for the types whose bound follows in
// closed form from the block's extremes. Returns a negative value for the K types, whose
// searched scales have no closed-form bound (they are checked statistically instead).
//  * Symmetric Q4_0 / Q5_0 (levels -L..L-1, L = 8 or 16): d = amax / L maps the largest
//    magnitude onto -L exactly, so its opposite -amax would need level +L and is clamped to
//    L-1: error up to one full step d (elsewhere d/2). d is stored as fp16, moving each level
//    by at most L * |d' - d|.
//  * Affine Q4_1 / Q5_1 (levels 0..M, M = 15 or 31): d = (max - min) / M, nearest level: d/2,
//    plus M * |d' - d| from fp16 d and |m' - min| from fp16 min.
//  * Q8_0 / Q8_1: d = amax / 127, round to nearest: d/2 plus 127 * |d' - d|.
//  * Q8_K: as Q8_0 but d stays fp32 (-127/max inverted), so only d/2 and float rounding.
// A small relative slack (1e-5 of the block's magnitude) covers fp32 arithmetic in the
// quantizer (the scale's reciprocal and the products each round once).
inline float block_error_bound(GgmlType type, const float* x, int64_t n) {
  float amax = 0, lo = x[0], hi = x[0];
  for (int64_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float slack = 1e-5f * amax;
  auto fp16_err = [](float v) { return std::fabs(v) * kHalfRel + kHalfAbs; };
  switch (type) {
    case GgmlType::F32:
      return 0.0f;
    case GgmlType::F16:
      return fp16_err(amax);
    case GgmlType::BF16:
      return amax * 0x1p-8f;
    case GgmlType::Q4_0: {
      const float d = amax / 8;
      return d + 8 * fp16_err(d) + slack;
    }
    case GgmlType::Q5_0: {
      const float d = amax / 16;
      return d + 16 * fp16_err(d) + slack;
    }
    case GgmlType::Q4_1: {
      const float d = (hi - lo) / 15;
      return d / 2 + 15 * fp16_err(d) + fp16_err(lo) + slack;
    }
    case GgmlType::Q5_1: {
      const float d = (hi - lo) / 31;
      return d / 2 + 31 * fp16_err(d) + fp16_err(lo) + slack;
    }
    case GgmlType::Q8_0:
    case GgmlType::Q8_1: {
      const float d = amax / 127;
      return d / 2 + 127 * fp16_err(d) + slack;
    }
    case GgmlType::Q8_K:
      return amax / 127 / 2 + slack;
    default:
      return -1.0f;
  }
}

// Bound on the relative RMS error sqrt(sum (x - x')^2 / sum x^2) for the K types on
// normally distributed data (the weights of the test models are drawn that way).
// Reasoning: a sub-block of 32 normal samples spans about 4 sigma (Q4_K, Q5_K: affine) and a
// sub-block of 16 has a largest magnitude near 2 sigma (Q6_K: symmetric, 64 levels). Uniform
// rounding noise is step / sqrt(12): Q4_K 4/15/3.46 ~ 0.077, Q5_K 4/31/3.46 ~ 0.037,
// Q6_K 2*2/63/3.46 ~ 0.018 sigma. The scale search trims the range a little (less noise) while
// the 6/8-bit scale quantization adds a little; the bounds leave ~25% headroom.
inline double k_type_relative_rms_bound(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K:
      return 0.095;
    case GgmlType::Q5_K:
      return 0.047;
    case GgmlType::Q6_K:
      return 0.023;
    default:
      return -1.0;
  }
}

}  // namespace vela::test

#pragma once
// Float references for the kernel tests: decode both operands and take the dot product in
// double, plus how far a block-integer kernel may legitimately differ from it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/type_traits.h"
#include "quant/blocks.h"
#include "quant/quantize.h"
#include "util/half.h"

namespace vela::test {

inline std::vector<float> normal_values(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

// x: [n] f32 -> n elements of `type` (reference quantizer).
inline std::vector<uint8_t> encode(GgmlType type, const std::vector<float>& x) {
  const auto info = *ggml_type_info(uint32_t(type));
  std::vector<uint8_t> out(size_t(row_bytes(info, int64_t(x.size()))));
  quantize_row(type, x.data(), out.data(), int64_t(x.size()));
  return out;
}

// Decoded row: n elements of `type` at src -> [n] f32.
inline std::vector<float> decode(GgmlType type, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  type_traits(type)->to_float(src, out.data(), n);
  return out;
}

struct DotReference {
  double value = 0;      // sum w_i a_i of the decoded operands, in double (exact for our data)
  double tolerance = 0;  // how far a correct kernel may be from `value`
};

// Reference for vec_dot(n, w_row, act_row), w_row of w_type and act_row of its vec_dot_type.
// Tolerance:
//  * Float rounding: each block's integer sum is exact, then scaled and accumulated in fp32, a
//    few roundings (2^-24 each) per block of terms whose size is at most twice the block's
//    sum |w_i a_i| (the K types split each weight as d*sc*q - dmin*m, and the two parts can
//    each be about twice the weight). 4e-5 relative to sum |w_i a_i| covers 16+ blocks.
//  * Q4_1/Q5_1 x Q8_1 only: the weight offset term uses the activation block's stored s, which
//    is fp16(d * sum q) with the unrounded d, not the decoded d' * sum q. That difference is the
//    format's, not the kernel's, so the reference adds it exactly: m * (s - d' * sum q) per block.
inline DotReference dot_reference(GgmlType w_type, const void* w_row, const void* act_row,
                                  int64_t n) {
  const TypeTraits* traits = type_traits(w_type);
  const auto w = decode(w_type, w_row, n);
  const auto a = decode(traits->vec_dot_type, act_row, n);
  DotReference ref;
  double abs_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref.value += double(w[size_t(i)]) * double(a[size_t(i)]);
    abs_sum += std::fabs(double(w[size_t(i)]) * double(a[size_t(i)]));
  }
  ref.tolerance = 4e-5 * abs_sum + 1e-30;
  if (traits->vec_dot_type == GgmlType::Q8_1) {
    const auto* act = static_cast<const BlockQ8_1*>(act_row);
    const auto w_block_bytes = ggml_type_info(uint32_t(w_type))->type_size;
    for (int64_t b = 0; b < n / kQK8_1; ++b) {
      uint16_t m_bits;  // Q4_1 and Q5_1 both store m right after d
      std::memcpy(&m_bits, static_cast<const uint8_t*>(w_row) + b * w_block_bytes + 2, 2);
      int sum_q = 0;
      for (int j = 0; j < kQK8_1; ++j) sum_q += act[b].qs[j];
      const double s_error =
          double(fp16_to_fp32(act[b].s)) - double(sum_q) * fp16_to_fp32(act[b].d);
      ref.value += double(fp16_to_fp32(m_bits)) * s_error;
    }
  }
  return ref;
}

}  // namespace vela::test

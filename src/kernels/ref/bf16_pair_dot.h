#pragma once
// One f32 lane of vdpbf16ps, which both the scalar reference and the emulated AVX-512 library
// (x86/avx512/avx512_emulation.h) follow: acc plus the products of one bf16 pair, the odd
// element's first, each added with its own rounding (bf16 products are exact in f32), with
// subnormal inputs and results flushed to zero.
// Thread-safety: pure functions.
#include <cmath>
#include <cstdint>

#include "util/half.h"

namespace vela::kernels {

inline float flush_subnormal(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

// w and x: [2] bf16 values, element 0 even, element 1 odd.
inline float bf16_pair_dot(float acc, const uint16_t* w, const uint16_t* x) {
  const auto in = [](uint16_t v) { return flush_subnormal(bf16_to_fp32(v)); };
  acc = flush_subnormal(std::fma(in(w[1]), in(x[1]), flush_subnormal(acc)));
  return flush_subnormal(std::fma(in(w[0]), in(x[0]), acc));
}

}  // namespace vela::kernels

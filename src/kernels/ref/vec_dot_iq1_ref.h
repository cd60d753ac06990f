#pragma once
// Scalar reference dot products of IQ1_S / IQ1_M weight rows (quant/blocks_iq1.h) with Q8_K
// activation rows, the pairing ggml's CPU backend uses. They define the numerics the SIMD
// kernels reproduce: per super-block, the exact integer
//   S = sum over groups of ls * (8 * (g . p) + sign(delta) * sum p)
// (g the codebook values, p the activation quants, ls the group's scale; the delta is 1/8, so S
// counts in eighths), then d_w * d_a * (S / 8) in f32. IQ1_S takes each sub-block's sum p from
// Q8_K's 16-element bsums; IQ1_M's deltas change every 8 elements, so it sums p itself.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela::kernels::ref {

// n: elements, a multiple of 256; w: one row of n / 256 weight blocks; a: one row of n / 256
// BlockQ8_K. Returns sum_i w[i] * a[i].
float vec_dot_iq1_s_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq1_m_q8_k(int64_t n, const void* w, const void* a);

}  // namespace vela::kernels::ref

#pragma once
// Scalar reference dot products of the E8-lattice codebook types (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S; layouts in quant/blocks_iq23.h) with Q8_K activations, the pairing of ggml's
// CPU backend. Per super-block the integer sum of ls * (signed magnitudes . activation quants)
// over the scale groups is exact in int32; it is scaled once by d_w * d_a, and the row's float
// sum by the format's constant f (1/8, 1/4 or 1; a power of two, so exact). The SIMD kernels
// reproduce these numerics up to float summation order.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela::kernels::ref {

// Each: n elements (a multiple of 256); w: one row of the weight type; a: one row of Q8_K.
// Returns sum_i w[i] * a[i].
float vec_dot_iq2_xxs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq2_xs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq2_s_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq3_xxs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq3_s_q8_k(int64_t n, const void* w, const void* a);

}  // namespace vela::kernels::ref

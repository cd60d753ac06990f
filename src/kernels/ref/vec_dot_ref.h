#pragma once
// Scalar reference dot products of one weight row with one activation row, already converted to
// the weight type's vec_dot_type (see kernels/type_traits.h). These define the numerics the
// SIMD kernels must reproduce: integer sums per block, scaled once per block by d_w * d_a, plus
// the offset terms of the affine types taken from the activation's precomputed sums.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela::kernels::ref {

// Each: n elements (a multiple of the weight type's block size); w: one row of the weight
// type; a: one row of the activation type. Returns sum_i w[i] * a[i].
float vec_dot_f32_f32(int64_t n, const void* w, const void* a);
float vec_dot_f16_f16(int64_t n, const void* w, const void* a);
// f16 weights against f32 activations (the pairing the engine uses: activations stay exact).
float vec_dot_f16_f32(int64_t n, const void* w, const void* a);
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a);
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* a);

}  // namespace vela::kernels::ref

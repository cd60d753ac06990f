#pragma once
// Scalar reference dot products of Q2_K, Q3_K, TQ1_0 and TQ2_0 weight rows with Q8_K activation
// rows (the pairing of ggml's CPU backend). They define the numerics the SIMD kernels must
// reproduce: per super-block, exact integer sums of level x activation quant, weighted by the
// integer sub-block scales (Q2_K, Q3_K), scaled once in f32 by d_w * d_a; Q2_K's mins and the
// level offsets of Q3_K (-4) and the ternary types (-1) apply through Q8_K's 16-element bsums.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela::kernels::ref {

// Each: n elements (a multiple of 256); w: one row of the weight type; a: [n / 256] BlockQ8_K.
// Returns sum_i w[i] * a[i].
float vec_dot_q2_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_q3_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_tq1_0_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_tq2_0_q8_k(int64_t n, const void* w, const void* a);

}  // namespace vela::kernels::ref

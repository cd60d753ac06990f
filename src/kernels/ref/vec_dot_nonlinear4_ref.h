#pragma once
// Scalar reference dot products of the 4-bit non-linear weight types (quant/blocks_nonlinear4.h)
// with their activation types, paired as in ggml's CPU backend: IQ4_NL and MXFP4 with Q8_0,
// IQ4_XS with Q8_K. They define the numerics the SIMD kernels must reproduce: the integer sum of
// table level times activation quant per 32-element block (IQ4_XS: per sub-block, weighted by
// the integer sub-block scale and summed over the super-block) is exact, then scaled once in f32
// by d_w * d_a and accumulated in order.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela::kernels::ref {

// Each: n elements (a multiple of the weight type's block size); w: one row of the weight type;
// a: one row of the activation type. Returns sum_i w[i] * a[i].
float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a);

}  // namespace vela::kernels::ref

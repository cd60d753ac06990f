#pragma once
// Internal: the AVX2 + FMA + F16C kernels that register_avx2_kernels() installs. Signatures are
// those of TypeTraits (kernels/type_traits.h): vec_dot_* take one weight row and one activation
// row of the weight type's vec_dot_type; vec_dot_rows_* the batched form; quantize_* are
// from_float conversions that give the same bytes as the scalar quantizers in quant/quantize.h.
// Only call these when cpu_features().avx2 is set.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstddef>
#include <cstdint>

namespace vela::kernels::avx2 {

// vec_dot_rows_* (unnamed parameters: n, w_row, act, act_stride, n_act, out, out_stride):
// out[t * out_stride] = vec_dot(n, w_row, act + t * act_stride) for t < n_act, bit-identical to
// the matching vec_dot for every t whatever n_act is.

// Float weights (dot_float_avx2.cpp); any n.
float vec_dot_f32_f32(int64_t n, const void* w, const void* a);    // w, a: [n] f32
float vec_dot_f16_f32(int64_t n, const void* w, const void* a);    // w: [n] f16, a: [n] f32
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a);  // w, a: [n] bf16
void vec_dot_rows_f32_f32(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_f16_f32(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_bf16_bf16(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
// gemm_tile_* (TypeTraits::gemm_tile; parameters n, w, w_stride, n_w_rows, act, act_stride, n_act,
// out, out_stride): bit-identical to the vec_dot above (gemm_float_avx2.cpp).
void gemm_tile_f32_f32(int64_t, const void*, size_t, int64_t, const uint8_t*, size_t, int64_t,
                       float*, int64_t);
void gemm_tile_f16_f32(int64_t, const void*, size_t, int64_t, const uint8_t*, size_t, int64_t,
                       float*, int64_t);
void gemm_tile_bf16_bf16(int64_t, const void*, size_t, int64_t, const uint8_t*, size_t, int64_t,
                         float*, int64_t);
// The codebook and ternary types: each group of 8 weight rows decoded once to int8 levels
// (gemm_int8_levels_avx2.h), bit-identical to their vec_dot.
#define VELA_AVX2_INT8_LEVELS_GEMM_TILE(name)                                                 \
  void gemm_tile_##name##_q8_k(int64_t, const void*, size_t, int64_t, const uint8_t*, size_t, \
                               int64_t, float*, int64_t);
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq2_xxs)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq2_xs)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq2_s)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq3_xxs)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq3_s)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq1_s)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(iq1_m)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(tq1_0)
VELA_AVX2_INT8_LEVELS_GEMM_TILE(tq2_0)
#undef VELA_AVX2_INT8_LEVELS_GEMM_TILE

// 32-element block weights (dot_q_avx2.cpp); n a multiple of 32.
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a);
void vec_dot_rows_q4_0_q8_0(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q5_0_q8_0(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q8_0_q8_0(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q4_1_q8_1(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q5_1_q8_1(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);

// K-quant weights against Q8_K (dot_k_avx2.cpp); n a multiple of 256.
float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* a);
void vec_dot_rows_q4_k_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q5_k_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q6_k_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);

// E8-lattice codebook weights against Q8_K (dot_iq23_avx2.cpp); n a multiple of 256.
float vec_dot_iq2_xxs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq2_xs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq2_s_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq3_xxs_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq3_s_q8_k(int64_t n, const void* w, const void* a);
void vec_dot_rows_iq2_xxs_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                               int64_t);
void vec_dot_rows_iq2_xs_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                              int64_t);
void vec_dot_rows_iq2_s_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);
void vec_dot_rows_iq3_xxs_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                               int64_t);
void vec_dot_rows_iq3_s_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);

// 2- and 3-bit K and ternary weights against Q8_K (dot_low_k_avx2.cpp); n a multiple of 256.
float vec_dot_q2_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_q3_k_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_tq1_0_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_tq2_0_q8_k(int64_t n, const void* w, const void* a);
void vec_dot_rows_q2_k_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_q3_k_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t);
void vec_dot_rows_tq1_0_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);
void vec_dot_rows_tq2_0_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);

// 4-bit non-linear weights (dot_nonlinear4_avx2.cpp): IQ4_NL and MXFP4 against Q8_0 (n a multiple
// of 32), IQ4_XS against Q8_K (n a multiple of 256).
float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_q8_k(int64_t n, const void* w, const void* a);
void vec_dot_rows_iq4_nl_q8_0(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                              int64_t);
void vec_dot_rows_mxfp4_q8_0(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);
void vec_dot_rows_iq4_xs_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                              int64_t);

// 1-bit codebook weights against Q8_K (dot_iq1_avx2.cpp); n a multiple of 256.
float vec_dot_iq1_s_q8_k(int64_t n, const void* w, const void* a);
float vec_dot_iq1_m_q8_k(int64_t n, const void* w, const void* a);
void vec_dot_rows_iq1_s_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);
void vec_dot_rows_iq1_m_q8_k(int64_t, const void*, const uint8_t*, size_t, int64_t, float*,
                             int64_t);

// Activation conversions (quantize_avx2.cpp): src [n] f32 -> n elements of the type, the same
// bytes as quantize_row_bf16, quantize_row_q8_0_activations, quantize_row_q8_1_activations and
// quantize_row_q8_k.
void quantize_row_bf16(const float* src, void* dst, int64_t n);
void quantize_row_q8_0_activations(const float* src, void* dst, int64_t n);
void quantize_row_q8_1_activations(const float* src, void* dst, int64_t n);
void quantize_row_q8_k(const float* src, void* dst, int64_t n);

}  // namespace vela::kernels::avx2

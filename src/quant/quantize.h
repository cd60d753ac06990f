#pragma once
// Reference (scalar) conversion of fp32 rows to every supported tensor type.
// The legacy types (Q4_0 .. Q8_1) and Q8_K follow ggml's reference quantizers rule for rule
// (same scale choice, same rounding), so weights and activations quantize to the same bytes as
// ggml's reference implementation. Q4_K, Q5_K and Q6_K use a ggml-style scale search of their
// own: any valid encoding decodes correctly; these aim for low error, not identical bytes.
// Thread-safety: all functions are pure (no shared state); safe to call concurrently.
#include <cstdint>

#include "quant/ggml_type.h"

namespace vela {

// Whether quantize_row() handles this type: every weight type the GGUF reader accepts (the
// low-bit ones through quantize_row_weighted with no importance) and the activation types Q8_1
// and Q8_K.
bool can_quantize(GgmlType type);

// src: [n] f32; dst: n elements of `type` (n / block_size blocks, row_bytes() bytes).
// n must be a multiple of the type's block size; the type must satisfy can_quantize()
// (violations abort: they are programming errors, not data errors).
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// Per-type entry points, all with the signature of a from_float kernel: src is [n] f32, dst
// receives n elements (whole blocks).
void quantize_row_f32(const float* src, void* dst, int64_t n);
void quantize_row_f16(const float* src, void* dst, int64_t n);
void quantize_row_bf16(const float* src, void* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);
void quantize_row_q5_0(const float* src, void* dst, int64_t n);
void quantize_row_q5_1(const float* src, void* dst, int64_t n);
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q8_1(const float* src, void* dst, int64_t n);
// Activation quantizers for the Q8_0/Q8_1 dot products: scale by 127/amax and round ties to
// even, as ggml's x86 SIMD quantizer does (the reference quantizers above use 1/d and ties away
// from zero, which is what GGUF weight files hold). Matching the SIMD rounding keeps our logits
// comparable with engines built for x86.
void quantize_row_q8_0_activations(const float* src, void* dst, int64_t n);
void quantize_row_q8_1_activations(const float* src, void* dst, int64_t n);
void quantize_row_q4_k(const float* src, void* dst, int64_t n);
void quantize_row_q5_k(const float* src, void* dst, int64_t n);
void quantize_row_q6_k(const float* src, void* dst, int64_t n);
void quantize_row_q8_k(const float* src, void* dst, int64_t n);

// Whether quantize_row_weighted() handles this type (a superset of can_quantize()'s weight types).
bool can_quantize_weighted(GgmlType type);
// Whether the type cannot be made well without an importance matrix (the 1- and 2-bit codebook
// types): `vela quantize` refuses to make them without one.
bool needs_importance(GgmlType type);
// src: [n] f32 (one row); dst: n elements of `type`; importance: [n] per-column weights of this
// row's tensor (an importance matrix's entry), or nullptr for the type's default weighting.
void quantize_row_weighted(GgmlType type, const float* src, void* dst, int64_t n,
                           const float* importance);

}  // namespace vela

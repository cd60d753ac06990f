#pragma once
// Conversion of rows of any supported tensor type to fp32.
// Thread-safety: all functions are pure (no shared state); safe to call concurrently.
#include <cstdint>

#include "quant/ggml_type.h"

namespace vela {

// Whether dequantize_row() handles this type: every weight type the GGUF reader accepts
// (is_supported_weight_type) and the activation types Q8_1 and Q8_K.
bool can_dequantize(GgmlType type);

// src: n elements of `type` (n / block_size blocks); dst: [n] f32.
// n must be a multiple of the type's block size; the type must satisfy can_dequantize()
// (violations abort: they are programming errors, not data errors).
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Per-type entry points, all with the signature of a to_float kernel: src holds n elements
// (whole blocks), dst is [n] f32.
void dequantize_row_f32(const void* src, float* dst, int64_t n);
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_1(const void* src, float* dst, int64_t n);
void dequantize_row_q5_0(const void* src, float* dst, int64_t n);
void dequantize_row_q5_1(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q8_1(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k(const void* src, float* dst, int64_t n);
void dequantize_row_q5_k(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k(const void* src, float* dst, int64_t n);
void dequantize_row_q8_k(const void* src, float* dst, int64_t n);

}  // namespace vela

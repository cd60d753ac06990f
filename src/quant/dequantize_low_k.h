#pragma once
// Conversion of Q2_K, Q3_K, TQ1_0 and TQ2_0 rows to fp32 (layouts: quant/blocks_low_k.h).
// dequantize_row() in quant/dequantize.h dispatches to these.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela {

// Each: src holds n elements (n a multiple of 256, whole super-blocks); dst is [n] f32.
// Every bit pattern decodes to a defined value; a NaN or infinite fp16 scale gives NaN or
// infinite outputs.
void dequantize_row_q2_k(const void* src, float* dst, int64_t n);
void dequantize_row_q3_k(const void* src, float* dst, int64_t n);
void dequantize_row_tq1_0(const void* src, float* dst, int64_t n);
void dequantize_row_tq2_0(const void* src, float* dst, int64_t n);

}  // namespace vela

#pragma once
// Conversion of rows of the 1-bit codebook types IQ1_S and IQ1_M (layouts in quant/blocks_iq1.h)
// to fp32. dequantize_row() (quant/dequantize.h) dispatches to these.
// Thread-safety: pure functions (no shared state); safe to call concurrently.
#include <cstdint>

namespace vela {

// Each has the signature of a to_float kernel: src holds n elements (whole blocks: n a multiple
// of 256), dst is [n] f32. Every bit pattern decodes to a defined value (a NaN/Inf fp16 scale
// gives NaN/Inf outputs).
void dequantize_row_iq1_s(const void* src, float* dst, int64_t n);
void dequantize_row_iq1_m(const void* src, float* dst, int64_t n);

}  // namespace vela

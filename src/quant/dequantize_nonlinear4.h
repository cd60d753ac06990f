#pragma once
// Conversion of rows of the 4-bit non-linear types (IQ4_NL, IQ4_XS, MXFP4; layouts in
// quant/blocks_nonlinear4.h) to fp32. dequantize_row() (quant/dequantize.h) dispatches to these.
// Thread-safety: pure functions (no shared state); safe to call concurrently.
#include <cstdint>

namespace vela {

// Each has the signature of a to_float kernel: src holds n elements (whole blocks: n a multiple
// of 32 for IQ4_NL and MXFP4, of 256 for IQ4_XS), dst is [n] f32. Every bit pattern decodes to a
// defined value (a NaN/Inf fp16 scale gives NaN/Inf outputs).
void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n);
void dequantize_row_mxfp4(const void* src, float* dst, int64_t n);

}  // namespace vela

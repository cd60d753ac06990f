#pragma once
// Quantizers of the 1-bit codebook types IQ1_S and IQ1_M (formats: quant/blocks_iq1.h).
// Each minimises the weighted squared error sum_i w_i (x_i - x'_i)^2 of its 256-element
// super-block, with w_i = importance_i * sqrt(2 sigma^2 + x_i^2) (sigma^2: the super-block's mean
// square; importance all ones when none is given, or when the super-block's importance is all
// zero). Bytes differ from ggml's; the error is the same or lower. Both types are meant to be made
// with an importance matrix (needs_importance()), but work without one.
// Thread-safety: pure functions (the codebook search tables are built once, thread-safely, on
// first use); safe to call concurrently.
#include <cstdint>

namespace vela {

// src: [n] f32 (n a multiple of 256); dst: n elements of the type; importance: [n] per-column
// weights (>= 0) of the row's tensor, or nullptr. Non-finite inputs are clamped (NaN to 0,
// +-Inf to +-FLT_MAX); scales beyond fp16's range saturate at its largest finite value.
void quantize_row_iq1_s_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_iq1_m_weighted(const float* src, void* dst, int64_t n, const float* importance);

// The same with the default weighting (the from_float signature used by quantize_row()).
void quantize_row_iq1_s(const float* src, void* dst, int64_t n);
void quantize_row_iq1_m(const float* src, void* dst, int64_t n);

}  // namespace vela

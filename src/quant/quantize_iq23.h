#pragma once
// Quantizers of the E8 / D4-lattice codebook types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S
// (formats: quant/blocks_iq23.h). Each minimises the weighted squared error sum_i w_i (x_i -
// x'_i)^2 of its 256-element super-block, with w_i = importance_i * sqrt(c sigma^2 + x_i^2)
// (sigma^2: the super-block's mean square; c = 1 for IQ2_XXS / IQ2_XS, 2 for the others, as ggml
// weighs them). Without an importance vector, or where the super-block's importance is all zero,
// the importance is all ones. Bytes differ from ggml's; the error is the same or lower. IQ2_XXS,
// IQ2_XS and IQ2_S are meant to be made with an importance matrix (needs_importance()), but work
// without one. Thread-safety: pure functions (the codebook search tables are built once,
// thread-safely, on first use); safe to call concurrently.
#include <cstdint>

namespace vela {

// src: [n] f32 (n a multiple of 256); dst: n elements of the type; importance: [n] per-column
// weights (>= 0) of the row's tensor, or nullptr. NaN inputs count as 0; inputs beyond the
// largest magnitude the type decodes (fp16's largest d, multiplier 31, the codebook's largest
// byte; infinities included) are clamped to it.
void quantize_row_iq2_xxs_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_iq2_xs_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_iq2_s_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_iq3_xxs_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_iq3_s_weighted(const float* src, void* dst, int64_t n, const float* importance);

// The same with the default weighting (the from_float signature used by quantize_row()).
void quantize_row_iq2_xxs(const float* src, void* dst, int64_t n);
void quantize_row_iq2_xs(const float* src, void* dst, int64_t n);
void quantize_row_iq2_s(const float* src, void* dst, int64_t n);
void quantize_row_iq3_xxs(const float* src, void* dst, int64_t n);
void quantize_row_iq3_s(const float* src, void* dst, int64_t n);

}  // namespace vela

#pragma once
// Quantizers of the 4-bit non-linear types IQ4_NL, IQ4_XS and MXFP4 (layouts in
// quant/blocks_nonlinear4.h).
//
// IQ4_NL / IQ4_XS minimise the weighted squared error sum_i w_i (x_i - x'_i)^2 of each block:
// w_i = importance_i * sqrt(sigma^2 + x_i^2) (sigma^2: twice the mean square of the 32- or
// 256-element block, as ggml's importance weighting), importance all ones without an importance
// vector. (ggml weights by x_i^2 there; that leaves about 3-4% more plain RMS error on the shared
// test models than this.) Bytes differ from ggml's; the error is the same or lower.
//
// MXFP4 without an importance vector makes ggml's bytes (its shared exponent rule and its
// e2m1 rounding); with one it picks, among that exponent and its neighbours, the one with the
// lowest weighted error (details in quantize_nonlinear4.cpp).
//
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela {

// src: [n] f32 (n a multiple of 32, of 256 for IQ4_XS); dst: n elements of the type;
// importance: [n] per-column weights (>= 0) of the row's tensor, or nullptr. An importance that
// is zero (or not finite) throughout a block is treated as absent for that block.
void quantize_row_iq4_nl_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_iq4_xs_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_mxfp4_weighted(const float* src, void* dst, int64_t n, const float* importance);

// The same with the default weighting (the from_float signature used by quantize_row()).
void quantize_row_iq4_nl(const float* src, void* dst, int64_t n);
void quantize_row_iq4_xs(const float* src, void* dst, int64_t n);
void quantize_row_mxfp4(const float* src, void* dst, int64_t n);

}  // namespace vela

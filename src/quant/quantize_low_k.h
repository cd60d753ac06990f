#pragma once
// Quantizers of the 2- and 3-bit K types (Q2_K, Q3_K) and the ternary types (TQ1_0, TQ2_0).
// Each minimises the weighted squared error sum_i w_i (x_i - x'_i)^2 of its super-block, with
// w_i = importance_i * sqrt(sigma^2 + x_i^2) (sigma^2: the super-block's mean square), importance
// all ones when none is given. Bytes differ from ggml's; the error is the same or lower.
// Thread-safety: pure functions; safe to call concurrently.
#include <cstdint>

namespace vela {

// src: [n] f32 (n a multiple of 256); dst: n elements of the type; importance: [n] per-column
// weights (>= 0) of the row's tensor, or nullptr.
void quantize_row_q2_k_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_q3_k_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_tq1_0_weighted(const float* src, void* dst, int64_t n, const float* importance);
void quantize_row_tq2_0_weighted(const float* src, void* dst, int64_t n, const float* importance);

// The same with the default weighting (the from_float signature used by quantize_row()).
void quantize_row_q2_k(const float* src, void* dst, int64_t n);
void quantize_row_q3_k(const float* src, void* dst, int64_t n);
void quantize_row_tq1_0(const float* src, void* dst, int64_t n);
void quantize_row_tq2_0(const float* src, void* dst, int64_t n);

}  // namespace vela

#pragma once
// Element-wise and row-wise operations of the Llama-family layers (scalar; the kernels issue
// adds SIMD versions). All buffers are f32, row-major.
#include <cstdint>

#include "model/model_config.h"

namespace vela {

// y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * weight  for t < n_rows.
// x, y: [n_rows, n]; weight: [n]. y may alias x.
void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* y);

// x[t, :] += b  for t < n_rows.  x: [n_rows, n]; b: [n]
void add_bias(float* x, const float* b, int64_t n_rows, int64_t n);

// x += y.  x, y: [n]
void add_inplace(float* x, const float* y, int64_t n);

// gate = silu(gate) * up.  gate, up: [n]  (kernels/elementwise.h for the selected ISA)
void silu_mul(float* gate, const float* up, int64_t n);

// Rotary embedding tables for one pass: cos/sin of position * frequency of each rotated pair.
// freqs: [n_rot / 2] inverse frequencies (already divided by any per-dimension factors).
// cos_sin: [n_tokens, n_rot / 2, 2]
void rope_tables(const int32_t* positions, int64_t n_tokens, const float* freqs, int32_t n_rot,
                 float freq_scale, float* cos_sin);

// Rotates the first n_rot dimensions of every head of every token in place.
// x: [n_tokens, n_heads, head_dim]; cos_sin: [n_tokens, n_rot / 2, 2]
void rope_apply(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                RopeStyle style, const float* cos_sin);

}  // namespace vela

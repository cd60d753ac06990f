#pragma once
// Element-wise and row-wise operations of the decoder layers (scalar, or dispatched to the
// kernels of elementwise.h where a transcendental per element makes that worth it). All buffers are
// f32, row-major.
#include <cmath>
#include <cstdint>

#include "model/architecture.h"

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

// gate = gelu_tanh(gate) * up.  gate, up: [n]  (kernels/elementwise.h for the selected ISA)
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// g = min(gate, 7); gate = g * sigmoid(1.702 g) * (clamp(up, -7, 7) + 1) (gpt-oss).
// gate, up: [n]
void swiglu_clamped_mul(float* gate, const float* up, int64_t n);

// gate = act(gate) * up, the family's gated FFN activation.  gate, up: [n]
void gated_activation(FfnActivation act, float* gate, const float* up, int64_t n);

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// x = cap * tanh(x / cap).  x: [n]; cap > 0
void soft_cap(float* x, int64_t n, float cap);

}  // namespace vela

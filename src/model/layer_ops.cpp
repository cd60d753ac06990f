#include "model/layer_ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/elementwise.h"

namespace vela {

void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* y) {
  for (int64_t t = 0; t < n_rows; ++t) {
    const float* xr = x + t * n;
    float* yr = y + t * n;
    double sum = 0.0;  // double keeps long rows exact enough to match f32 references
    for (int64_t i = 0; i < n; ++i) sum += double(xr[i]) * double(xr[i]);
    const float scale = 1.0f / std::sqrt(float(sum / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * weight[i];
  }
}

void add_bias(float* x, const float* b, int64_t n_rows, int64_t n) {
  for (int64_t t = 0; t < n_rows; ++t) add_inplace(x + t * n, b, n);
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void silu_mul(float* gate, const float* up, int64_t n) {
  kernels::elementwise_kernels().silu_mul(gate, up, n);
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  kernels::elementwise_kernels().gelu_tanh_mul(gate, up, n);
}

void swiglu_clamped_mul(float* gate, const float* up, int64_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    gate[i] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
  }
}

void gated_activation(FfnActivation act, float* gate, const float* up, int64_t n) {
  if (act == FfnActivation::kGeluTanh)
    gelu_tanh_mul(gate, up, n);
  else if (act == FfnActivation::kSwigluClamped)
    swiglu_clamped_mul(gate, up, n);
  else
    silu_mul(gate, up, n);
}

void soft_cap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

}  // namespace vela

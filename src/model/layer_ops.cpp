#include "model/layer_ops.h"

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

void rope_tables(const int32_t* positions, int64_t n_tokens, const float* freqs, int32_t n_rot,
                 float freq_scale, float* cos_sin) {
  const int32_t half = n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const double pos = double(positions[t]) * double(freq_scale);
    float* cs = cos_sin + t * half * 2;
    for (int32_t i = 0; i < half; ++i) {
      const double theta = pos * double(freqs[i]);
      cs[2 * i] = static_cast<float>(std::cos(theta));
      cs[2 * i + 1] = static_cast<float>(std::sin(theta));
    }
  }
}

void rope_apply(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                RopeStyle style, const float* cos_sin) {
  const int32_t half = n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cs = cos_sin + t * half * 2;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        // kNormal pairs adjacent dimensions; kNeox pairs dimension i with i + n_rot/2.
        const int32_t a = style == RopeStyle::kNormal ? 2 * i : i;
        const int32_t b = style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace vela

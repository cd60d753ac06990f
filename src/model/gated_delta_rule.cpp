#include "model/gated_delta_rule.h"

#include <cmath>

namespace vela {

namespace {

float dot(const float* a, const float* b, int32_t n) {
  float s = 0.0f;
  for (int32_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void delta_rule_recurrent(const DeltaRuleHead& h, int32_t n_tokens, int32_t d_k, int32_t d_v) {
  const float scale = 1.0f / std::sqrt(float(d_k));
  float* S = h.state;
  for (int32_t t = 0; t < n_tokens; ++t) {
    const float* q = h.q + t * h.q_stride;
    const float* k = h.k + t * h.k_stride;
    const float* v = h.v + t * h.v_stride;
    const float decay = std::exp(h.g[t * h.gb_stride]);
    const float beta = h.beta[t * h.gb_stride];
    float* out = h.out + t * h.out_stride;
    for (int32_t j = 0; j < d_v; ++j) {
      float* row = S + int64_t(j) * d_k;
      for (int32_t i = 0; i < d_k; ++i) row[i] *= decay;
      const float delta = (v[j] - dot(row, k, d_k)) * beta;
      for (int32_t i = 0; i < d_k; ++i) row[i] += delta * k[i];
      out[j] = dot(row, q, d_k) * scale;
    }
  }
}

}  // namespace vela

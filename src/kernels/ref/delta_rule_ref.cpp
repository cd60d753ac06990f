// Scalar reference of the delta rule step (kernels/delta_rule_kernels.h): dot products summed in
// element order.
#include <algorithm>

#include "kernels/delta_rule_kernels.h"

namespace vela::kernels {
namespace {

float dot(const float* a, const float* b, int32_t n) {
  float s = 0.0f;
  for (int32_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void delta_rule_step_ref(float* state, const float* q, const float* k, const float* v, float decay,
                         float beta, float scale, float* out, int32_t d_k, int32_t d_v) {
  for (int32_t j = 0; j < d_v; ++j) {
    float* row = state + int64_t(j) * d_k;
    for (int32_t i = 0; i < d_k; ++i) row[i] *= decay;
    const float delta = (v[j] - dot(row, k, d_k)) * beta;
    for (int32_t i = 0; i < d_k; ++i) row[i] += delta * k[i];
    out[j] = dot(row, q, d_k) * scale;
  }
}

void save_state_ref(float* dst, const float* src, int64_t n) {
  std::copy_n(src, n, dst);
}

}  // namespace

const DeltaRuleKernels& delta_rule_kernels_ref() {
  static const DeltaRuleKernels table = {
      delta_rule_step_ref, save_state_ref,
      delta_rule_steps_by_token<delta_rule_step_ref, save_state_ref>};
  return table;
}

}  // namespace vela::kernels

#include "model/gated_delta_rule.h"

#include <cmath>

#include "kernels/delta_rule_kernels.h"

namespace vela {

void delta_rule_recurrent(const DeltaRuleHead& h, int32_t n_tokens, int32_t d_k, int32_t d_v) {
  const kernels::DeltaRuleStepFn step = kernels::delta_rule_kernels().step;
  const float scale = 1.0f / std::sqrt(float(d_k));
  for (int32_t t = 0; t < n_tokens; ++t)
    step(h.state, h.q + t * h.q_stride, h.k + t * h.k_stride, h.v + t * h.v_stride,
         std::exp(h.g[t * h.gb_stride]), h.beta[t * h.gb_stride], scale, h.out + t * h.out_stride,
         d_k, d_v);
}

}  // namespace vela

#include "model/gated_delta_rule.h"

#include <algorithm>
#include <cmath>

#include "kernels/delta_rule_kernels.h"

namespace vela {

void delta_rule_recurrent(const DeltaRuleHead& h, int32_t n_tokens, int32_t d_k, int32_t d_v,
                          float* const* saves) {
  const kernels::DeltaRuleStepsFn steps = kernels::delta_rule_kernels().steps;
  const float scale = 1.0f / std::sqrt(float(d_k));
  kernels::DeltaRuleToken run[kernels::kMaxDeltaRuleRun];
  for (int32_t t0 = 0; t0 < n_tokens; t0 += kernels::kMaxDeltaRuleRun) {
    const int32_t n = std::min(kernels::kMaxDeltaRuleRun, n_tokens - t0);
    for (int32_t i = 0; i < n; ++i) {
      const int64_t t = t0 + i;
      run[i] = {h.q + t * h.q_stride,
                h.k + t * h.k_stride,
                h.v + t * h.v_stride,
                std::exp(h.g[t * h.gb_stride]),
                h.beta[t * h.gb_stride],
                h.out + t * h.out_stride,
                saves != nullptr ? saves[t] : nullptr};
    }
    steps(h.state, run, n, scale, d_k, d_v);
  }
}

}  // namespace vela

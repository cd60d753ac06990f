#pragma once
// The recurrent step of the gated delta rule (model/gated_delta_rule.h): one token of one value
// head on the head's state, one table per instruction-set level. The scalar reference sums each
// dot product in element order; the SIMD levels sum in lanes, within f32 rounding of it. Decode
// runs this step for every DeltaNet head of every layer, so it is vectorized like a matmul.
// Thread-safety: the tables are immutable; the kernels are pure functions over caller buffers.
#include <cstdint>

#include "kernels/cpu_features.h"

namespace vela::kernels {

// One token on state S [d_v, d_k] (row j: column j of the paper's S), in place:
//   S_j  <- decay * S_j
//   S_j  <- S_j + beta * (v_j - S_j . k) * k
//   out_j = scale * (S_j . q)
// for every row j < d_v. q, k [d_k]; v, out [d_v].
using DeltaRuleStepFn = void (*)(float* state, const float* q, const float* k, const float* v,
                                 float decay, float beta, float scale, float* out, int32_t d_k,
                                 int32_t d_v);

// dst[i] = src[i] for i < n, with stores that bypass the caches where the level has them: a
// state saved at a speculative checkpoint is read again only if a proposal is rejected (at the
// next step), so its lines need neither be read for ownership nor evict the live state (qwen35-0.8b
// verifying 2 proposals: two 18 MB checkpoints a step; replayed at 0.8, about 5% faster end to
// end). Ends with a store fence: the copy is complete when it returns.
using StateSaveFn = void (*)(float* dst, const float* src, int64_t n);

struct DeltaRuleKernels {
  DeltaRuleStepFn step;
  StateSaveFn save_state;
};

const DeltaRuleKernels& delta_rule_kernels_ref();
const DeltaRuleKernels& delta_rule_kernels_avx2();
const DeltaRuleKernels& delta_rule_kernels_avx512();

// The table of one level (tests; the caller checks the CPU supports it).
inline const DeltaRuleKernels& delta_rule_kernels(KernelIsa isa) {
  if (isa == KernelIsa::kAvx512) return delta_rule_kernels_avx512();
  if (isa == KernelIsa::kAvx2) return delta_rule_kernels_avx2();
  return delta_rule_kernels_ref();
}

// The table of the level in use (selected_kernel_isa()).
inline const DeltaRuleKernels& delta_rule_kernels() {
  return delta_rule_kernels(selected_kernel_isa());
}

}  // namespace vela::kernels

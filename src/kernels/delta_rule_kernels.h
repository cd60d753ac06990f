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

// One token of a run on one head's state (DeltaRuleStepsFn).
struct DeltaRuleToken {
  const float* q;  // [d_k]
  const float* k;  // [d_k]
  const float* v;  // [d_v]
  float decay, beta;
  float* out;   // [d_v]
  float* save;  // [d_v, d_k] where the state after this token is saved (as save_state), or null
};
// Up to kMaxDeltaRuleRun tokens in a row on one state: the outputs, the saved states and the final
// state of n_tokens step calls (and save_state after each token that has a save), bit for bit. A
// level may keep each row of the state in registers across the tokens, reading and writing the
// state once instead of once per token (a verification step of k + 1 tokens).
inline constexpr int32_t kMaxDeltaRuleRun = 8;
using DeltaRuleStepsFn = void (*)(float* state, const DeltaRuleToken* tokens, int32_t n_tokens,
                                  float scale, int32_t d_k, int32_t d_v);

struct DeltaRuleKernels {
  DeltaRuleStepFn step;
  StateSaveFn save_state;
  DeltaRuleStepsFn steps;
};

// The steps of a level without a kernel of its own: its step and save_state per token.
template <DeltaRuleStepFn Step, StateSaveFn Save>
void delta_rule_steps_by_token(float* state, const DeltaRuleToken* tokens, int32_t n_tokens,
                               float scale, int32_t d_k, int32_t d_v) {
  for (int32_t t = 0; t < n_tokens; ++t) {
    const DeltaRuleToken& x = tokens[t];
    Step(state, x.q, x.k, x.v, x.decay, x.beta, scale, x.out, d_k, d_v);
    if (x.save != nullptr) Save(x.save, state, int64_t(d_k) * d_v);
  }
}

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

// Qwen1.5-MoE / Qwen2-MoE (`qwen2moe`): Qwen2's attention with Q/K/V biases; every FFN a mixture
// of experts whose softmax weights are not renormalised, beside a shared expert gated by
// sigmoid(ffn_gate_inp_shexp . x).
#include "model/architecture.h"

namespace vela::arch {

ArchDescription qwen2moe() {
  ArchDescription d = qwen2();
  d.name = "qwen2moe";
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = false;
  d.gated_shared_expert = true;
  return d;
}

}  // namespace vela::arch

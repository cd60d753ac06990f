// GLM-4.5 / 4.6 / 4.7 and their Air forms (`glm4moe`): Q/K/V biases, per-head Q/K norms where the
// file has them (GLM-4.5-Air has none), RoPE over part of each head (rope.dimension_count);
// leading dense layers, then mixtures of experts routed by sigmoid scores with a selection bias
// (exp_probs_b), renormalised and scaled (keys in the file), beside an ungated shared expert. The
// FFN's input norm is named post_attention_norm. The decoder does not run the next-token-prediction
// layer stored after its own (nextn_predict_layers); Model::mtp_block loads it as a model.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription glm4moe() {
  ArchDescription d;
  d.name = "glm4moe";
  d.qkv_bias = TensorRule::kRequired;
  d.qk_norm = QkNorm::kPerHead;
  d.qk_norm_rule = TensorRule::kOptional;
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = true;
  d.ungated_shared_expert = true;
  d.expert_gating = ExpertGating::kSigmoid;
  d.ffn_norm_name = "post_attention_norm";
  return d;
}

}  // namespace vela::arch

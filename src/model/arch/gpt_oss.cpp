// OpenAI gpt-oss (`gpt-oss`): sliding-window and global layers alternating (even layers
// windowed), NeoX RoPE with YaRN from the file, q/k/v and output biases, a learned sink logit per
// head in every attention softmax, and a mixture of experts in every layer: router and expert
// biases, experts chosen by the top-k logits and weighed by the softmax over those k, each one a
// clamped SwiGLU. The FFN's input norm is named post_attention_norm.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription gpt_oss() {
  ArchDescription d;
  d.name = "gpt-oss";
  d.rope_style = RopeStyle::kNeox;
  d.qkv_bias = TensorRule::kRequired;
  d.output_bias = TensorRule::kRequired;
  d.attention_sinks = true;
  d.activation = FfnActivation::kSwigluClamped;
  d.default_window_pattern = 2;
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = false;
  d.expert_gating = ExpertGating::kSoftmaxOfChosen;
  d.expert_biases = true;
  d.ffn_norm_name = "post_attention_norm";
  return d;
}

}  // namespace vela::arch

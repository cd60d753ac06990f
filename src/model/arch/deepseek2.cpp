// DeepSeek-V2/V3 (`deepseek2`): multi-head latent attention (queries through a low-rank
// q_lora bottleneck, or one attn_q matrix in the Lite form; keys and values from one compressed
// kv_lora row per token, the only thing cached) with decoupled RoPE on a rope-sized part of each
// head, pairs (2i, 2i+1) as the converter leaves them; leading dense layers, then mixtures of
// experts beside ungated shared experts. The V3 form routes by sigmoid scores with a selection
// bias and expert groups (keys in the file); files without expert_gating_func use softmax.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription deepseek2() {
  ArchDescription d;
  d.name = "deepseek2";
  d.rope_style = RopeStyle::kNormal;
  d.layer_pattern = LayerPattern::kLatentAttention;
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = false;
  d.ungated_shared_expert = true;
  d.expert_gating = ExpertGating::kSoftmax;
  return d;
}

}  // namespace vela::arch

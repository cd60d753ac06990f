// Qwen3.5 (dense `qwen35`, MoE `qwen35moe`): three Gated DeltaNet layers to each full-attention
// layer by default. The attention layers gate their output per head with sigmoid(gate) from a
// second half of the query projection, normalise q and k per head and rotate part of each head
// (rope.dimension_count of key_length; the text positions make the sections of its multi-axis RoPE
// one ordinary NeoX rotation). The FFN's input norm is named post_attention_norm. The MoE forms
// route with a softmax over the experts, renormalised, beside a shared expert gated by sigmoid.
// Qwen3-Next (`qwen3next`) is the MoE form with the DeltaNet projections fused per key head
// (ArchDescription::fused_delta_projections) and its value heads in the checkpoint's order.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription qwen35() {
  ArchDescription d;
  d.name = "qwen35";
  d.qk_norm = QkNorm::kPerHead;
  d.layer_pattern = LayerPattern::kDeltaNetHybrid;
  d.attention_output_gate = true;
  d.ffn_norm_name = "post_attention_norm";
  return d;
}

ArchDescription qwen35moe() {
  ArchDescription d = qwen35();
  d.name = "qwen35moe";
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = true;
  d.gated_shared_expert = true;
  return d;
}

ArchDescription qwen3next() {
  ArchDescription d = qwen35moe();
  d.name = "qwen3next";
  d.fused_delta_projections = true;
  return d;
}

}  // namespace vela::arch

// Llama 2/3, TinyLlama, Mistral; with <arch>.expert_count > 0 the Mixtral MoE (top-k of the
// router's softmax, renormalised).
#include "model/architecture.h"

namespace vela::arch {

ArchDescription llama() {
  ArchDescription d;
  d.name = "llama";
  d.rope_style = RopeStyle::kNormal;  // the converter permuted Q/K rows for adjacent pairs
  d.qkv_bias = TensorRule::kOptional;
  d.ffn = FfnKind::kDenseOrMoe;
  return d;
}

}  // namespace vela::arch

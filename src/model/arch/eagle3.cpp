// EAGLE-3 draft heads as llama.cpp converts them (`eagle3`): one Llama-style layer (normal RoPE,
// dense SwiGLU FFN) whose attention reads [attn_norm(embedding) | hidden_norm(g)], 2 * n_embd wide,
// where g is fc of three target layers' inputs or the head's own previous output. Not a model of
// its own: Model::eagle3_head loads it with its target (eagle3_head_config).
#include "model/architecture.h"

namespace vela::arch {

ArchDescription eagle3() {
  ArchDescription d;
  d.name = "eagle3";
  d.rope_style = RopeStyle::kNormal;
  d.ffn = FfnKind::kDense;
  return d;
}

}  // namespace vela::arch

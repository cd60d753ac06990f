// Gemma 2: embeddings scaled by sqrt(n_embd), GeGLU (tanh GELU), norms before and after each
// sub-layer, sliding-window and global layers alternating (even layers windowed), attention and
// final-logit soft-caps from the file; the 27B scales queries by its width (n_embd / n_head).
#include "model/architecture.h"

namespace vela::arch {

ArchDescription gemma2() {
  ArchDescription d;
  d.name = "gemma2";
  d.activation = FfnActivation::kGeluTanh;
  d.post_norms = true;
  d.scale_embeddings = true;
  d.default_window_pattern = 2;
  d.prescale_query = true;
  d.model_width_query_scale_layers = 46;  // 27B
  return d;
}

}  // namespace vela::arch

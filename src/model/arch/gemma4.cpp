// Gemma 4 (E2B/E4B, 31B, 26B-A4B): Gemma 3's layout (scaled embeddings, GeGLU with tanh GELU,
// pre- and post-norms, per-head Q/K norms, windowed layers on their own RoPE base) with a score
// scale of 1, a weightless RMS norm on V, a per-layer output scale, and in the MoE form a dense
// FFN beside the experts. The file states the rest: per-layer KV heads and FFN widths, the
// windowed layers' head size, KV sharing, per-layer embeddings and the full layers' rope_freqs.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription gemma4() {
  ArchDescription d = gemma3();
  d.name = "gemma4";
  d.model_width_query_scale_layers = 0;
  d.prescale_query = false;  // the scale is 1: nothing to fold into the query
  d.ffn = FfnKind::kDenseOrMoe;
  d.unit_attention_scale = true;
  d.value_norm = true;
  d.layer_output_scale = true;
  d.moe_beside_dense = true;
  return d;
}

}  // namespace vela::arch

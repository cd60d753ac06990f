// Gemma 3 (text): Gemma 2's layout plus per-head Q/K norms, five windowed layers to one global
// by default, and a separate RoPE base (10000 unless the file says) for the windowed layers.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription gemma3() {
  ArchDescription d = gemma2();
  d.name = "gemma3";
  d.qk_norm = QkNorm::kPerHead;
  d.default_window_pattern = 6;
  d.default_rope_base_swa = 10000.0f;
  d.model_width_query_scale_layers = 62;  // 27B
  return d;
}

}  // namespace vela::arch

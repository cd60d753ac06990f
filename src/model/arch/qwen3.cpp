// Qwen3 (dense): no biases; per-head RMS norms of Q and K before RoPE; the head size comes from
// attention.key_length and need not be n_embd / n_head.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription qwen3() {
  ArchDescription d;
  d.name = "qwen3";
  d.qk_norm = QkNorm::kPerHead;
  return d;
}

}  // namespace vela::arch

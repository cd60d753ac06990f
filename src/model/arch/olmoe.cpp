// OLMoE: RMS norms over the whole Q and K projections (not per head); every FFN a mixture of
// experts whose chosen weights keep their softmax values (no renormalisation).
#include "model/architecture.h"

namespace vela::arch {

ArchDescription olmoe() {
  ArchDescription d;
  d.name = "olmoe";
  d.qk_norm = QkNorm::kWhole;
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = false;
  return d;
}

}  // namespace vela::arch

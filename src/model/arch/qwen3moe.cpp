// Qwen3-MoE (e.g. Qwen3-30B-A3B): Qwen3 attention; every FFN a mixture of experts whose chosen
// weights are renormalised to sum 1.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription qwen3moe() {
  ArchDescription d = qwen3();
  d.name = "qwen3moe";
  d.ffn = FfnKind::kMoe;
  d.renormalize_experts = true;
  return d;
}

}  // namespace vela::arch

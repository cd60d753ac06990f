// Phi-3 / 3.5 / 4: fused attn_qkv (rows Q, K, V) and fused gate+up ffn_up (gate rows first);
// LongRoPE short/long per-pair factors when the file has them.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription phi3() {
  ArchDescription d;
  d.name = "phi3";
  d.fused_qkv = true;
  d.fused_gate_up = true;
  d.longrope = true;
  d.prescale_query = true;
  return d;
}

}  // namespace vela::arch

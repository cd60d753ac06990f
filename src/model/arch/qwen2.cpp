// Qwen2 / Qwen2.5: Llama's decoder with Q/K/V biases and NeoX RoPE.
#include "model/architecture.h"

namespace vela::arch {

ArchDescription qwen2() {
  ArchDescription d;
  d.name = "qwen2";
  d.qkv_bias = TensorRule::kRequired;
  return d;
}

}  // namespace vela::arch

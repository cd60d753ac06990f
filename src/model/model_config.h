#pragma once
// Hyper-parameters of a decoder, read from GGUF metadata (`<arch>.*` keys) and completed by the
// architecture's description (architecture.h) where the file leaves something implicit.
// A plain value type; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/architecture.h"
#include "util/result.h"

namespace vela {

enum class RopeScaling {
  kNone,
  kLinear,    // positions times freq_scale
  kYarn,      // per-pair blend of interpolated and original frequencies, magnitude scaled
  kLongRope,  // per-pair factors from the rope_factors_{short,long} tensors (phi3)
};

// One RoPE variant; every layer uses the global one or, where the family has a separate base
// for its windowed layers, the local one.
struct RopeConfig {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / rope.scaling.factor (linear, yarn)
  RopeScaling scaling = RopeScaling::kNone;
  int32_t original_context = 0;  // rope.scaling.original_context_length (yarn, longrope)
  float attn_factor = 1.0f;      // rope.scaling.attn_factor: cos/sin magnitude
  float yarn_ext_factor = 1.0f;  // weight of the ramp between interpolation and extrapolation
  float yarn_beta_fast = 32.0f;  // rotations per context where pairs keep their frequency
  float yarn_beta_slow = 1.0f;   // rotations per context where pairs are fully interpolated
};

struct LayerConfig {
  int32_t sliding_window = 0;  // 0 = global attention; else the last `window` positions
  bool local_rope = false;     // windowed with ModelConfig::separate_local_rope: rope_local
};

struct ModelConfig {
  const ArchDescription* arch = nullptr;  // never null in a loaded config
  std::string arch_name;                  // the GGUF general.architecture value
  std::string name;                       // general.name, if any

  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // context length the model was trained for
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // per-head size of Q/K/V (attention.key_length, else n_embd / n_head)
  int32_t n_ff = 0;      // dense FFN width
  float rms_eps = 1e-5f;

  RopeStyle rope_style = RopeStyle::kNormal;
  int32_t n_rot = 0;                 // dimensions of each head that are rotated
  RopeConfig rope;                   // every layer's, or the global layers'
  bool separate_local_rope = false;  // windowed layers use rope_local (their own base: gemma3)
  RopeConfig rope_local;             // meaningful when separate_local_rope

  int32_t sliding_window = 0;       // as declared; which layers use it: layers[i].sliding_window
  int32_t window_pattern = 0;       // 0 = every layer windowed; n = layer i when i % n < n - 1
  std::vector<LayerConfig> layers;  // [n_layer]

  float attn_softcap = 0.0f;   // scores -> cap * tanh(scores / cap); 0 = none
  float final_softcap = 0.0f;  // the same on the output logits
  float embed_scale = 1.0f;    // input embeddings times this (sqrt(n_embd) for gemma)

  // Mixture of experts (n_expert > 0): every FFN routes each token to n_expert_used experts.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;  // expert FFN width
  bool renormalize_experts = true;

  bool moe() const { return n_expert > 0; }

  static Result<ModelConfig> from_gguf(const GgufFile& gguf);
};

}  // namespace vela

#pragma once
// Hyper-parameters of a Llama-family decoder, read from GGUF metadata (`<arch>.*` keys).
// A plain value type; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "util/result.h"

namespace vela {

enum class Architecture { kLlama, kQwen2 };

// How rotary embedding pairs dimensions: kNormal rotates (2i, 2i+1) (GGUF llama, whose Q/K rows
// the converter permuted), kNeox rotates (i, i + n_rot/2) (qwen2).
enum class RopeStyle { kNormal, kNeox };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;  // the GGUF general.architecture value
  std::string name;       // general.name, if any

  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // context length the model was trained for
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // per-head size of Q/K/V
  int32_t n_ff = 0;
  float rms_eps = 1e-5f;

  RopeStyle rope_style = RopeStyle::kNormal;
  int32_t n_rot = 0;              // dimensions of each head that are rotated
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;   // linear position scaling (1 / rope.scaling.factor)
  int32_t sliding_window = 0;     // 0 = full attention; else attend to the last `window` positions

  // Supported architectures, for error messages.
  static constexpr const char* kSupported = "llama, qwen2";

  static Result<ModelConfig> from_gguf(const GgufFile& gguf);
};

}  // namespace vela

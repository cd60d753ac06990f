#pragma once
// Named model shapes for `vela synth` (the hyper-parameters of well-known checkpoints, plus tiny
// shapes for tests) and the GGUF tensor layout of a Llama-family model of a given shape.
// Plain value types and pure functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vela {

struct ModelShape {
  std::string name;          // e.g. "tinyllama-1.1b"
  std::string architecture;  // GGUF general.architecture: "llama" or "qwen2"
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;
  int32_t n_vocab = 0;  // the checkpoint's vocabulary size (synth takes it from --vocab-from)
  int32_t n_ctx = 0;    // training context length
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the output reuses token_embd
  bool qkv_bias = false;         // attn_{q,k,v}.bias (qwen2)

  int32_t head_dim() const { return n_embd / n_head; }
};

// The shapes synth knows, in a fixed order.
const std::vector<ModelShape>& known_shapes();
// The shape of that name, or nullptr.
const ModelShape* find_shape(std::string_view name);
// "tiny, tiny-qwen2, ..." for help and error messages.
std::string known_shape_names();

// What a tensor is for; the quantization recipe and the weight initialisation depend on it.
enum class TensorKind { kTokenEmbd, kOutputNorm, kOutput, kNorm, kMatrix, kBias };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length
  TensorKind kind = TensorKind::kMatrix;
  int32_t layer = -1;  // block index, -1 outside the blocks

  int64_t n_rows() const;  // product of ne[1..]
  int64_t n_elements() const { return ne[0] * n_rows(); }
};

// Every tensor of a model of this shape with n_vocab tokens, in the order the common GGUF
// converters write them (token_embd, output_norm, output, then block by block).
std::vector<TensorSpec> model_tensors(const ModelShape& shape, int32_t n_vocab);

}  // namespace vela

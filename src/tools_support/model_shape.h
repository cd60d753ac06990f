#pragma once
// Named model shapes for `vela synth` (the hyper-parameters of well-known checkpoints, plus tiny
// shapes for tests) and the GGUF tensor layout of a model of a given shape, with the tensor names
// and metadata of the common GGUF converters: Llama, Qwen2, Qwen3, Qwen3-MoE, OLMoE, Mixtral
// (Llama with experts), Gemma 2, Gemma 3 and Phi-3. A shape is a plain description: each family
// differs from the Llama layout only through the optional fields below.
// Plain value types and pure functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/architecture.h"

namespace vela {

struct ModelShape {
  std::string name;          // e.g. "tinyllama-1.1b"
  std::string architecture;  // GGUF general.architecture: "llama", "qwen2", "qwen3", "gemma3"...
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;     // <arch>.feed_forward_length (Mixtral-style MoE: the experts' width)
  int32_t n_vocab = 0;  // the checkpoint's vocabulary size (synth takes it from --vocab-from)
  int32_t n_ctx = 0;    // training context length
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the output reuses token_embd
  bool qkv_bias = false;         // attn_{q,k,v}.bias (qwen2)

  // The rest defaults to the Llama layout.
  // Explicit attention head size, written as <arch>.attention.key_length / value_length; needed
  // when n_head * head size != n_embd. 0: n_embd / n_head, no key written.
  int32_t head_size = 0;
  QkNorm qk_norm = QkNorm::kNone;  // attn_q_norm / attn_k_norm (architecture.h)
  bool post_norms = false;     // post_attention_norm and post_ffw_norm after each sublayer (gemma)
  bool fused_qkv = false;      // one attn_qkv (rows Q, then K, then V) for attn_q/k/v (phi3)
  bool fused_gate_up = false;  // ffn_up holds the gate rows, then the up rows; no ffn_gate (phi3)
  int32_t n_expert = 0;        // MoE experts per block (router + *_exps tensors); 0: dense FFN
  int32_t n_expert_used = 0;   // experts each token is routed to
  // Expert FFN width, written as <arch>.expert_feed_forward_length; 0: n_ff with no key written
  // (Mixtral files).
  int32_t n_ff_exp = 0;
  int32_t sliding_window = 0;  // <arch>.attention.sliding_window; 0: none
  // <arch>.attention.sliding_window_pattern; 0: not written (engines use the family's default).
  int32_t sliding_window_pattern = 0;
  float rope_freq_base_swa = 0.0f;  // <arch>.rope.freq_base_swa (sliding layers); 0: not written
  float attn_softcap = 0.0f;        // <arch>.attn_logit_softcapping; 0: none
  float final_softcap = 0.0f;       // <arch>.final_logit_softcapping; 0: none

  int32_t head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int32_t expert_ff() const { return n_ff_exp > 0 ? n_ff_exp : n_ff; }
};

// The shapes synth knows, in a fixed order.
const std::vector<ModelShape>& known_shapes();
// The shape of that name, or nullptr.
const ModelShape* find_shape(std::string_view name);
// "tiny, tiny-qwen2, ..." for help and error messages.
std::string known_shape_names();
// Why the shape cannot describe a model ("" when it can): non-positive sizes, heads that do
// not divide n_embd without an explicit head size, inconsistent expert counts.
std::string shape_problem(const ModelShape& shape);

// What a tensor is for; the quantization recipe and the weight initialisation depend on it.
enum class TensorKind { kTokenEmbd, kOutputNorm, kOutput, kNorm, kMatrix, kBias };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length (expert tensors are 3-D)
  TensorKind kind = TensorKind::kMatrix;
  int32_t layer = -1;  // block index, -1 outside the blocks

  int64_t n_rows() const;  // product of ne[1..]
  int64_t n_elements() const { return ne[0] * n_rows(); }
};

// Every tensor of a model of this shape with n_vocab tokens, in the order the common GGUF
// converters write them (token_embd, output_norm, output, then block by block).
std::vector<TensorSpec> model_tensors(const ModelShape& shape, int32_t n_vocab);

}  // namespace vela

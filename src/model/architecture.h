#pragma once
// What distinguishes one decoder family from another, as data the one forward pass
// (llama_forward.h) follows: norm placement, Q/K norms, biases, fused projections, activation,
// embedding scale, sliding-window layout, RoPE pairing and MoE routing. What a GGUF file states
// itself (head counts, windows, soft-caps, expert counts, RoPE scaling) is read from its
// metadata by ModelConfig; a description holds only what the file leaves implicit.
// Each family is one short file in model/arch/.
// Plain constant data; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>

namespace vela {

// How rotary embedding pairs dimensions: kNormal rotates (2i, 2i+1) (GGUF llama, whose Q/K rows
// the converter permuted), kNeox rotates (i, i + n_rot/2) (qwen2 and the newer families).
enum class RopeStyle { kNormal, kNeox };

enum class TensorRule { kAbsent, kOptional, kRequired };

// RMS norms of the query and key projections, applied before RoPE.
enum class QkNorm {
  kNone,
  kPerHead,  // attn_q_norm / attn_k_norm: [head_dim], each head normalised on its own (qwen3)
  kWhole,    // [n_head * head_dim] / [n_head_kv * head_dim] over the whole projection (olmoe)
};

enum class FfnActivation {
  kSilu,      // SwiGLU: silu(gate) * up
  kGeluTanh,  // GeGLU with the tanh approximation of GELU (gemma)
};

// Whether the feed-forward blocks are dense (ffn_gate/up/down) or mixtures of experts
// (ffn_gate_inp router + stacked ffn_{gate,up,down}_exps).
enum class FfnKind {
  kDense,
  kMoe,
  kDenseOrMoe,  // MoE when <arch>.expert_count > 0 (llama: Mixtral files)
};

struct ArchDescription {
  std::string_view name;  // general.architecture
  RopeStyle rope_style = RopeStyle::kNeox;
  TensorRule qkv_bias = TensorRule::kAbsent;  // attn_{q,k,v}.bias
  QkNorm qk_norm = QkNorm::kNone;
  bool fused_qkv = false;      // one attn_qkv matrix: rows Q, then K, then V (phi3)
  bool fused_gate_up = false;  // ffn_up holds gate rows, then up rows; no ffn_gate (phi3)
  FfnActivation activation = FfnActivation::kSilu;
  bool post_norms = false;        // post_attention_norm / post_ffw_norm on the sub-layer outputs
  bool scale_embeddings = false;  // input embeddings times sqrt(n_embd) (gemma)
  // The query is multiplied by 1/sqrt(head_dim) before attention rather than the scores after:
  // the same in exact arithmetic, but an f16 KV cache's rounding of the query sees the scaled
  // values, as in the reference graphs of these families (gemma, phi3).
  bool prescale_query = false;
  FfnKind ffn = FfnKind::kDense;
  bool renormalize_experts = true;  // chosen experts' weights rescaled to sum 1
  // Which layers use the declared sliding window when the file names no pattern: 0 = every
  // layer; n > 0 = layer i when i % n < n - 1 (the last of every n layers is global).
  int32_t default_window_pattern = 0;
  // RoPE base of the windowed layers when the file has no rope.freq_base_swa; 0 = the same RoPE
  // as the global layers.
  float default_rope_base_swa = 0.0f;
  bool longrope = false;  // rope_factors_short / rope_factors_long tensors (phi3)
};

// The description of a supported architecture, or nullptr.
const ArchDescription* find_architecture(std::string_view name);
// "llama, qwen2, ..." for error messages.
std::string supported_architectures();

namespace arch {
// One per family (model/arch/<family>.cpp).
ArchDescription llama();
ArchDescription qwen2();
ArchDescription qwen3();
ArchDescription qwen3moe();
ArchDescription olmoe();
ArchDescription gemma2();
ArchDescription gemma3();
ArchDescription phi3();
}  // namespace arch

}  // namespace vela

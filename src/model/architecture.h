#pragma once
// What distinguishes one decoder family from another, as data the one forward pass
// (decoder_forward.h) follows: norm placement, Q/K norms, biases, fused projections, activation,
// embedding scale, sliding-window layout, RoPE pairing, MoE routing, and which layers mix tokens
// by attention and which by a recurrent state. What a GGUF file states
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
  // gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7); g * sigmoid(1.702 g) * (u + 1)
  kSwigluClamped,
};

// Whether the feed-forward blocks are dense (ffn_gate/up/down) or mixtures of experts
// (ffn_gate_inp router + stacked ffn_{gate,up,down}_exps).
enum class FfnKind {
  kDense,
  kMoe,
  kDenseOrMoe,  // MoE when <arch>.expert_count > 0 (llama: Mixtral files)
};

// Which mixer each layer has.
enum class LayerPattern {
  kAttention,  // every layer attends (some perhaps through a sliding window)
  // Gated DeltaNet layers, with full attention on every full_attention_interval-th layer
  // ((i + 1) % interval == 0; qwen35); the ssm.* keys give the DeltaNet geometry.
  kDeltaNetHybrid,
  // Every layer multi-head latent attention (deepseek2): the cache holds one compressed row per
  // token, the attention.*_lora_rank and *_mla keys give the geometry.
  kLatentAttention,
};

// How router logits become expert scores (<arch>.expert_gating_func: 1 softmax, 2 sigmoid).
enum class ExpertGating {
  kSoftmax,  // softmax over all experts
  kSigmoid,  // each expert's sigmoid on its own (deepseek2 V3 form, glm4moe)
  // Chosen by the logits themselves; weights the softmax over the k chosen logits (gpt-oss)
  kSoftmaxOfChosen,
};

struct ArchDescription {
  std::string_view name;  // general.architecture
  RopeStyle rope_style = RopeStyle::kNeox;
  TensorRule qkv_bias = TensorRule::kAbsent;  // attn_{q,k,v}.bias
  QkNorm qk_norm = QkNorm::kNone;
  // Whether a layer must have its Q/K norm tensors (when qk_norm is not kNone); kOptional: a
  // layer without them normalises nothing.
  TensorRule qk_norm_rule = TensorRule::kRequired;
  bool fused_qkv = false;      // one attn_qkv matrix: rows Q, then K, then V (phi3)
  bool fused_gate_up = false;  // ffn_up holds gate rows, then up rows; no ffn_gate (phi3)
  FfnActivation activation = FfnActivation::kSilu;
  bool post_norms = false;        // post_attention_norm / post_ffw_norm on the sub-layer outputs
  bool scale_embeddings = false;  // input embeddings times sqrt(n_embd) (gemma)
  // The query is multiplied by 1/sqrt(head_dim) before attention rather than the scores after:
  // the same in exact arithmetic, but an f16 KV cache's rounding of the query sees the scaled
  // values, as in the reference graphs of these families (gemma, phi3).
  bool prescale_query = false;
  // A model of this many layers scales its queries by 1/sqrt(n_embd / n_head) instead of
  // 1/sqrt(head_dim) (Gemma 2/3 27B, whose query_pre_attn_scalar is n_embd / n_head; the reference
  // engines recognise that size by its layer count). 0 = none.
  int32_t model_width_query_scale_layers = 0;
  FfnKind ffn = FfnKind::kDense;
  bool renormalize_experts = true;  // chosen experts' weights rescaled to sum 1
  // Which layers use the declared sliding window when the file names no pattern: 0 = every
  // layer; n > 0 = layer i when i % n < n - 1 (the last of every n layers is global).
  int32_t default_window_pattern = 0;
  // RoPE base of the windowed layers when the file has no rope.freq_base_swa; 0 = the same RoPE
  // as the global layers.
  float default_rope_base_swa = 0.0f;
  bool longrope = false;  // rope_factors_short / rope_factors_long tensors (phi3)
  LayerPattern layer_pattern = LayerPattern::kAttention;
  int32_t default_full_attention_interval = 4;  // kDeltaNetHybrid without the key
  // attn_q holds, per head, the query and then as many rows of an output gate: the head's
  // attention output is multiplied by sigmoid(gate) (qwen35).
  bool attention_output_gate = false;
  // Gated DeltaNet projections fused per key head (qwen3next): ssm_in holds, for each key head,
  // its q and k rows, then the v and then the z rows of the value heads reading it; ssm_ba (or
  // ssm_beta_alpha) those value heads' beta rows, then their alpha rows. Value head h reads key
  // head h / (n_v_heads / n_k_heads) (DeltaNetConfig::grouped_value_heads).
  bool fused_delta_projections = false;
  // The norm in front of the FFN ("ffn_norm"; qwen35 calls it post_attention_norm).
  std::string_view ffn_norm_name = "ffn_norm";
  // A shared expert beside the routed ones (ffn_{gate,up,down}_shexp, expert_shared_feed_forward
  // _length wide), its output scaled by sigmoid(ffn_gate_inp_shexp . x).
  bool gated_shared_expert = false;
  // Shared experts beside the routed ones, their output simply added: ffn_{gate,up,down}_shexp,
  // expert_feed_forward_length x expert_shared_count wide (deepseek2).
  bool ungated_shared_expert = false;
  // Expert scores when the file has no expert_gating_func key.
  ExpertGating expert_gating = ExpertGating::kSoftmax;
  // attn_sinks.weight [n_head]: one learned logit per head that joins each softmax's max and
  // denominator without a value (gpt-oss).
  bool attention_sinks = false;
  TensorRule output_bias = TensorRule::kAbsent;  // attn_output.bias [n_embd]
  // ffn_gate_inp.bias [n_expert] added to the router logits, and per-expert biases
  // ffn_{gate,up}_exps.bias [n_expert, n_ff_expert], ffn_down_exps.bias [n_expert, n_embd] added
  // to each expert's products (gpt-oss).
  bool expert_biases = false;
  // Gemma 4. The scores' scale is 1 when the file states none (q/k norms set the magnitude).
  bool unit_attention_scale = false;
  // V is RMS-normalised per head without a weight; a layer without attn_v takes the K projection
  // (before its norm and RoPE) as V.
  bool value_norm = false;
  // layer_output_scale.weight [1] multiplies the residual stream at the end of each layer.
  bool layer_output_scale = false;
  // MoE layers run the dense FFN and the experts side by side, each with its own norms
  // (ffn_norm / post_ffw_norm_1 for the dense one, pre_ffw_norm_2 / post_ffw_norm_2 for the
  // experts), their sum then post_ffw_norm'd; the router reads rms_norm(x) / sqrt(n_embd) times
  // ffn_gate_inp.scale, and each expert's output is scaled by its ffn_down_exps.scale entry.
  bool moe_beside_dense = false;
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
ArchDescription qwen35();
ArchDescription qwen35moe();
ArchDescription qwen3next();
ArchDescription deepseek2();
ArchDescription gpt_oss();
ArchDescription qwen2moe();
ArchDescription glm4moe();
ArchDescription gemma4();
ArchDescription eagle3();
}  // namespace arch

}  // namespace vela

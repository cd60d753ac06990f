#pragma once
// Named model shapes for `vela synth` (the hyper-parameters of well-known checkpoints, plus tiny
// shapes for tests) and the GGUF tensor layout of a model of a given shape, with the tensor names
// and metadata of the common GGUF converters: Llama, Qwen2, Qwen3, Qwen3-MoE, OLMoE, Mixtral
// (Llama with experts), Gemma 2, Gemma 3, Gemma 4 (dense), Phi-3, Qwen3.5 (dense and MoE: Gated
// DeltaNet layers beside gated attention ones), DeepSeek-V3, gpt-oss and GLM-4.5 (the Qwen3.5,
// DeepSeek-V3 and GLM-4.5 shapes with the multi-token-prediction block of their checkpoints after
// the decoder's layers). A shape is a plain description: each family differs from the Llama layout
// only through the optional fields below.
// Plain value types and pure functions; no thread-safety concerns.
#include <algorithm>
#include <array>
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

  // <arch>.rope.dimension_count: the rotated leading part of each head; 0: the whole head.
  int32_t rope_dim = 0;
  // <arch>.rope.dimension_sections (multi-axis RoPE, in rotated pairs); all 0: not written.
  std::array<int32_t, 4> rope_sections = {};
  // attn_q has 2 * n_head * head_dim rows: per head its query rows, then as many rows of a
  // sigmoid gate on the head's attention output (qwen35).
  bool attn_output_gate = false;
  // The FFN's input norm is named post_attention_norm, written right after attn_norm, and there
  // is no ffn_norm (qwen35; not gemma's post-norm of the attention output).
  bool ffn_norm_post_attention = false;
  // Hybrid Gated DeltaNet (qwen35): layer i attends when (i + 1) % full_attention_interval == 0
  // and is a DeltaNet mixer otherwise; 0: every layer attends. The <arch>.ssm.* geometry:
  int32_t full_attention_interval = 0;
  int32_t ssm_conv_kernel = 0;  // ssm.conv_kernel: causal convolution taps
  int32_t ssm_k_heads = 0;      // ssm.group_count: query and key heads
  int32_t ssm_v_heads = 0;      // ssm.time_step_rank: value heads (a multiple of the key heads)
  int32_t ssm_head_dim = 0;     // ssm.state_size: key and value head size
  // A shared expert beside the routed ones (ffn_{gate,up,down}_shexp), written as
  // <arch>.expert_shared_feed_forward_length; 0: none.
  int32_t n_ff_shexp = 0;
  bool shexp_gate = false;  // ffn_gate_inp_shexp [n_embd]: its output times sigmoid(gate . x)
  // Ungated shared experts of n_ff_exp each, written as <arch>.expert_shared_count (deepseek2:
  // one ffn_*_shexp of n_shared_experts * n_ff_exp); 0: none, or n_ff_shexp's.
  int32_t n_shared_experts = 0;
  // Multi-head latent attention (deepseek2): the query through a q_lora_rank bottleneck
  // (attn_q_a, its norm, attn_q_b; 0: one attn_q), keys and values out of one compressed row of
  // kv_lora_rank values per token (attn_kv_a_mqa, its norm, the per-head attn_k_b / attn_v_b);
  // each head's key is mla_nope_dim + rope_dim, its value mla_v_dim. 0 kv_lora_rank: none.
  int32_t q_lora_rank = 0;
  int32_t kv_lora_rank = 0;
  int32_t mla_nope_dim = 0;
  int32_t mla_v_dim = 0;
  // DeepSeek-V3 routing: <arch>.leading_dense_block_count dense layers (n_ff wide) first;
  // sigmoid scores with a selection bias exp_probs_b (expert_gating_func 2); expert groups;
  // routed weights renormalised and scaled.
  int32_t n_dense_lead = 0;
  bool sigmoid_routing = false;
  int32_t n_expert_groups = 0;        // 0: not written
  int32_t n_expert_groups_used = 0;   // 0: not written
  float expert_weights_scale = 0.0f;  // 0: not written
  // gpt-oss: a learned sink logit per head (attn_sinks.weight [n_head]), attn_output.bias, the
  // router's bias (ffn_gate_inp.bias [n_expert]) and per-expert biases
  // (ffn_{gate,up}_exps.bias [n_expert, n_ff_exp], ffn_down_exps.bias [n_expert, n_embd]).
  bool attn_sinks = false;
  bool output_bias = false;
  bool expert_biases = false;
  // YaRN: rope.scaling.type = yarn with this factor and original_context_length; 0: no
  // rope.scaling keys.
  float yarn_factor = 0.0f;
  int32_t yarn_original_context = 0;
  // Multi-token-prediction ("NextN") blocks after the decoder's n_layer layers, written as
  // <arch>.nextn_predict_layers (block_count counts them, as the converters write it): each an
  // attention layer whatever full_attention_interval says, with the last decoder layer's FFN
  // (experts or dense), then nextn.eh_proj (ne {2 * n_embd, n_embd}: n_embd rows over
  // [embedding | hidden state]) and nextn.{enorm, hnorm, shared_head_norm} [n_embd]; it shares
  // token_embd and the output head. 0: none.
  int32_t n_nextn = 0;
  // Gemma 4: layers of their own geometry, KV sharing, per-layer embeddings (all 0 elsewhere).
  // The windowed layers' head size, written as attention.key_length_swa / value_length_swa and
  // rope.dimension_count_swa (their whole head turns); 0: head_dim(), nothing written.
  int32_t head_size_swa = 0;
  // The global layers' KV heads when they differ from n_head_kv (the windowed layers'):
  // attention.head_count_kv is then written with one entry per layer; 0: n_head_kv everywhere.
  int32_t n_head_kv_global = 0;
  // attention.sliding_window_pattern written as one bool per layer (true: windowed) rather than
  // the period sliding_window_pattern, which still says which layers slide.
  bool window_pattern_per_layer = false;
  // The last n_kv_shared layers (attention.shared_kv_layers) attend over the cache of the last
  // earlier layer of their kind: no attn_k / attn_v / attn_k_norm of their own. 0: none.
  int32_t n_kv_shared = 0;
  // Their FFN width when it differs (E2B's double-wide MLP): feed_forward_length is then written
  // with one entry per layer; 0: n_ff everywhere.
  int32_t n_ff_kv_shared = 0;
  // Per-layer embeddings (embedding_length_per_layer_input): per_layer_token_embd [n_layer *
  // width, n_vocab], per_layer_model_proj [n_embd, n_layer * width], per_layer_proj_norm [width],
  // and in each layer inp_gate [n_embd, width], proj [width, n_embd], post_norm [n_embd]. 0: none.
  int32_t n_embd_per_layer = 0;
  bool layer_output_scale = false;  // blk.N.layer_output_scale.weight [1]
  // Proportional RoPE of the global layers: rope_freqs.weight [head_dim() / 2] turns the pairs
  // of the first rope_freqs_rotated dimensions (factor 1) and stops the rest (factor 1e30), as
  // the converter writes it; rope.dimension_count stays the whole head. 0: no rope_freqs.
  int32_t rope_freqs_rotated = 0;

  int32_t head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  // <arch>.block_count: the decoder's layers and the multi-token-prediction blocks.
  int32_t n_blocks() const { return n_layer + n_nextn; }
  int32_t expert_ff() const { return n_ff_exp > 0 ? n_ff_exp : n_ff; }
  int32_t rotated_dim() const { return rope_dim > 0 ? rope_dim : head_dim(); }
  bool hybrid() const { return full_attention_interval > 0; }
  bool latent_attention() const { return kv_lora_rank > 0; }
  // Whether layer i routes to experts (else its FFN is dense, n_ff wide); a multi-token-prediction
  // block (i >= n_layer) has the last decoder layer's FFN.
  bool moe_layer(int32_t i) const {
    return n_expert > 0 && std::min(i, n_layer - 1) >= n_dense_lead;
  }
  // The shared expert's width (0: none).
  int64_t shared_expert_ff() const {
    return n_ff_shexp > 0 ? n_ff_shexp : int64_t(n_shared_experts) * expert_ff();
  }
  // Whether layer i is a Gated DeltaNet mixer (else it attends): the decoder's layers follow
  // full_attention_interval; a multi-token-prediction block always attends.
  bool delta_net_layer(int32_t i) const {
    return hybrid() && i < n_layer && (i + 1) % full_attention_interval != 0;
  }
  // DeltaNet channels: [q | k | v] through the convolution, and the value width.
  int64_t ssm_value_dim() const { return int64_t(ssm_v_heads) * ssm_head_dim; }
  int64_t ssm_conv_channels() const {
    return 2 * int64_t(ssm_k_heads) * ssm_head_dim + ssm_value_dim();
  }
  // Whether layer i is windowed by the period sliding_window_pattern (the last layer of each
  // period is global). Without a pattern the family's default decides, which only the loader
  // knows; the per-layer fields above need a pattern (shape_problem).
  bool windowed_layer(int32_t i) const {
    return sliding_window > 0 && sliding_window_pattern > 0 &&
           i % sliding_window_pattern < sliding_window_pattern - 1;
  }
  // Whether layer i reads an earlier layer's K/V instead of keeping its own.
  bool kv_shared_layer(int32_t i) const { return n_kv_shared > 0 && i >= n_layer - n_kv_shared; }
  // Layer i's head size, KV heads and FFN width.
  int32_t layer_head_dim(int32_t i) const {
    return head_size_swa > 0 && windowed_layer(i) ? head_size_swa : head_dim();
  }
  int32_t layer_head_kv(int32_t i) const {
    return n_head_kv_global > 0 && !windowed_layer(i) ? n_head_kv_global : n_head_kv;
  }
  int32_t layer_ff(int32_t i) const {
    return n_ff_kv_shared > 0 && kv_shared_layer(i) ? n_ff_kv_shared : n_ff;
  }
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
enum class TensorKind {
  kTokenEmbd,
  kOutputNorm,
  kOutput,
  kNorm,
  kMatrix,
  kBias,
  kConv,       // depthwise convolution taps [kernel, channels] (ssm_conv1d)
  kDecay,      // a DeltaNet's decay scale per value head, -exp(A_log) (ssm_a)
  kScale,      // a learned multiplier of the residual stream (layer_output_scale), 1 as a norm
  kRopeFreqs,  // RoPE frequency factors (rope_freqs), set by the shape's rope_freqs_rotated
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length (expert tensors are 3-D)
  TensorKind kind = TensorKind::kMatrix;
  int32_t layer = -1;  // block index (n_layer and up: an MTP block), -1 outside the blocks

  int64_t n_rows() const;  // product of ne[1..]
  int64_t n_elements() const { return ne[0] * n_rows(); }
};

// Every tensor of a model of this shape with n_vocab tokens, in the order the common GGUF
// converters write them (token_embd, output_norm, output, then block by block, each
// multi-token-prediction block's nextn.* tensors after its layer's).
std::vector<TensorSpec> model_tensors(const ModelShape& shape, int32_t n_vocab);

}  // namespace vela

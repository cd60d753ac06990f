#pragma once
// Hyper-parameters of a decoder, read from GGUF metadata (`<arch>.*` keys) and completed by the
// architecture's description (architecture.h) where the file leaves something implicit.
// A plain value type; no thread-safety concerns.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "kv/kv_cache.h"
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

// What mixes information across positions in a layer (the part before its FFN).
enum class MixerKind {
  kAttention,      // softmax attention over the K/V cache (global, or a sliding window)
  kGatedDeltaNet,  // linear attention with a fixed-size recurrent state (gated_deltanet.h)
  // Multi-head latent attention over a compressed cache row per token (latent_attention.h)
  kLatentAttention,
};

struct LayerConfig {
  MixerKind mixer = MixerKind::kAttention;
  int32_t sliding_window = 0;  // 0 = global attention; else the last `window` positions
  bool local_rope = false;     // windowed with ModelConfig::separate_local_rope: rope_local
  // Where the layer's cache lives: its K/V among the cache's attention layers, its recurrent
  // state among the cache's state layers (-1: the layer has none of that kind).
  int32_t kv_index = -1;
  int32_t state_index = -1;
  // The FFN is a mixture of experts (else dense ffn_gate/up/down, n_ff wide): every layer of an
  // MoE model but its leading_dense_block_count first ones.
  bool moe = false;
  // The layer's own attention geometry and dense FFN width: the model's n_head_kv, head_dim,
  // n_rot (n_rot_local for local_rope layers) and n_ff, unless the file gives per-layer values
  // (gemma4: head_count_kv and feed_forward_length arrays, key_length_swa for windowed layers).
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_rot = 0;
  int32_t n_ff = 0;
  // The layer whose cached K/V this layer attends over: itself when it has K/V (kv_index >= 0);
  // for a layer that shares another's cache (gemma4's last shared_kv_layers layers, kv_index -1)
  // the last earlier layer of its kind that has K/V; -1 for layers without attention.
  int32_t kv_source = -1;
};

// Where the attention layers' K/V live in a cache whose layers are grouped by sliding window.
// Every block is as large as the largest group, so the groups are made even in the K/V values
// per position they hold, not in layer count: the layers of one window fill groups in layer
// order up to the values of the window with the fewest (or of the widest layer), so that
// gemma4's twelve sliding layers of 256-value rows make two groups of six beside its three full
// layers of 512. The last group of a window may hold less. Without grouping: one group of every
// attention layer.
struct KvLayerGroups {
  std::vector<int32_t> windows;  // [n_groups] sliding window of each group's layers (0: global)
  std::vector<int32_t> group;    // [n_layer] each layer's group (-1: no K/V)
};

// Multi-head latent attention geometry (<arch>.attention.* keys of deepseek2). A head's query
// and key are [nope | rope] (key_length_mla values); every head's key and value come from one
// compressed row per token, [c_kv (kv_lora_rank) | k_pe (rope_dim, shared by the heads)], which
// is all the cache holds. Attention runs on that row: each head's nope query is taken into the
// kv_lora space (attn_k_b) and its output out of it (attn_v_b).
struct LatentAttentionConfig {
  int32_t q_lora_rank = 0;   // attention.q_lora_rank; 0 = one attn_q matrix (the Lite form)
  int32_t kv_lora_rank = 0;  // attention.kv_lora_rank
  int32_t nope_dim = 0;      // key_length_mla - rope_dim: the part of a head without RoPE
  int32_t rope_dim = 0;      // rope.dimension_count
  int32_t v_head_dim = 0;    // attention.value_length_mla
  // Scale of the scores: mscale^2 / sqrt(key_length_mla), YaRN's magnitude factor (1 + 0.1 ln s)
  // times DeepSeek's (1 + rope.scaling.yarn_log_multiplier ln s) as mscale.
  float scale = 0.0f;

  int32_t key_dim() const { return nope_dim + rope_dim; }        // key_length_mla
  int32_t cache_dim() const { return kv_lora_rank + rope_dim; }  // one token's cache row
};

// Gated DeltaNet geometry (<arch>.ssm.* keys). The mixer's input projection attn_qkv yields
// [q | k | v] = [n_k_heads * head_k_dim | n_k_heads * head_k_dim | n_v_heads * head_v_dim]
// channels, which pass through a causal convolution of conv_kernel taps.
struct DeltaNetConfig {
  int32_t n_k_heads = 0;    // ssm.group_count
  int32_t n_v_heads = 0;    // ssm.time_step_rank
  int32_t head_k_dim = 0;   // ssm.state_size
  int32_t head_v_dim = 0;   // ssm.inner_size / n_v_heads
  int32_t conv_kernel = 0;  // ssm.conv_kernel
  // Value head h reads key head h / (n_v_heads / n_k_heads) (qwen3next's order) instead of
  // h % n_k_heads (qwen35's, whose converter reorders the value heads).
  bool grouped_value_heads = false;

  int64_t key_dim() const { return int64_t(n_k_heads) * head_k_dim; }
  // The key head value head h reads.
  int32_t key_head_of(int32_t h) const {
    return grouped_value_heads ? h / (n_v_heads / n_k_heads) : h % n_k_heads;
  }
  int64_t value_dim() const { return int64_t(n_v_heads) * head_v_dim; }
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  // One sequence's state of one layer: the convolution's last conv_kernel - 1 inputs
  // [conv_kernel - 1, conv_channels], then the delta rule's [n_v_heads, head_v_dim, head_k_dim].
  int64_t conv_state_floats() const { return int64_t(conv_kernel - 1) * conv_channels(); }
  int64_t state_floats() const {
    return conv_state_floats() + int64_t(n_v_heads) * head_v_dim * head_k_dim;
  }
};

// An EAGLE-3 draft head's link to its target (eagle3.* keys, the d2t tensor). Its one layer's
// attention reads a = [rms_norm(embedding) * attn_norm | rms_norm(g) * hidden_norm] (2 * n_embd
// wide), where g = fc [target's residual stream entering extract_layers[0], [1], [2]] after a
// target pass, else the head's own previous output; the residual is g (norm_before_residual: the
// normed g) plus the attention output.
struct Eagle3Config {
  std::array<int32_t, 3> extract_layers = {};  // target layers whose inputs the fc fuses, in order
  int32_t target_n_embd = 0;                   // eagle3.target_hidden_size: the target's n_embd
  bool norm_before_residual = false;
  // Rows of the head's output matrix; draft token i is target token d2t[i] (without d2t the
  // target's vocabulary: n_draft_vocab = n_vocab).
  int32_t n_draft_vocab = 0;
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
  // Scale of the attention scores: attention.scale where the file states it, else the family's
  // rule (1/sqrt(n_embd / n_head) for Gemma 2/3 27B), else 1/sqrt(head_dim).
  float attn_scale = 0.0f;
  int32_t n_ff = 0;  // dense FFN width
  float rms_eps = 1e-5f;

  RopeStyle rope_style = RopeStyle::kNormal;
  int32_t n_rot = 0;                 // dimensions of each head that are rotated
  RopeConfig rope;                   // every layer's, or the global layers'
  bool separate_local_rope = false;  // windowed layers use rope_local (their own base: gemma3)
  RopeConfig rope_local;             // meaningful when separate_local_rope
  int32_t n_rot_local = 0;           // rotated dimensions of the rope_local layers

  int32_t sliding_window = 0;       // as declared; which layers use it: layers[i].sliding_window
  int32_t window_pattern = 0;       // 0 = every layer windowed; n = layer i when i % n < n - 1
  std::vector<LayerConfig> layers;  // [n_layer]
  int32_t n_kv_layers = 0;          // layers with K/V in the cache (attention mixers)
  int32_t n_state_layers = 0;       // layers with a recurrent state per sequence
  // Multi-token-prediction blocks stored after the decoder's layers (block_count includes them):
  // the decoder does not run them; Model::mtp_block loads the one such block as a model of its
  // own.
  int32_t n_nextn_layers = 0;
  // The file block of layers[0]: layer i's tensors are blk.<first_file_layer + i>.* (an MTP
  // block's one layer is the block after the decoder's).
  int32_t first_file_layer = 0;
  // A multi-token-prediction block (mtp_block_config): its one layer's input is
  // eh_proj [enorm(embedding) | hnorm(hidden state)], its head norm nextn.shared_head_norm.
  bool mtp_block = false;
  // An EAGLE-3 draft head (eagle3_head_config): n_vocab is its target's (the logits' width).
  std::optional<Eagle3Config> eagle3;
  DeltaNetConfig delta_net;  // meaningful when n_state_layers > 0
  // Latent-attention models: head_dim is its cache_dim() and n_head_kv 1, the absorbed form's
  // query and key per head; meaningful when kv_lora_rank > 0.
  LatentAttentionConfig mla;

  // The last n_shared_kv_layers layers keep no K/V and attend over an earlier layer's
  // (LayerConfig::kv_source; attention.shared_kv_layers, gemma4).
  int32_t n_shared_kv_layers = 0;
  // Per-layer embeddings (embedding_length_per_layer_input, gemma4 E2B/E4B): each token's
  // n_embd_per_layer values per layer, from per_layer_token_embd and a projection of its
  // embedding, gate a per-layer addition to the residual stream. 0 = none.
  int32_t n_embd_per_layer = 0;

  float attn_softcap = 0.0f;   // scores -> cap * tanh(scores / cap); 0 = none
  float final_softcap = 0.0f;  // the same on the output logits
  float embed_scale = 1.0f;    // input embeddings times this (sqrt(n_embd) for gemma)

  // Mixture of experts (n_expert > 0): every FFN routes each token to n_expert_used experts.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;  // expert FFN width
  bool renormalize_experts = true;
  ExpertGating expert_gating = ExpertGating::kSoftmax;  // expert_gating_func
  float expert_weights_scale = 1.0f;                    // the routed weights times this
  // Experts in n_expert_groups equal groups, of which a token chooses from the
  // n_expert_groups_used best (expert_group_count / expert_group_used_count); 1 = no groups.
  int32_t n_expert_groups = 1;
  int32_t n_expert_groups_used = 1;
  int32_t n_ff_shared_expert = 0;    // the shared expert's FFN width (0: none)
  bool shared_expert_gated = false;  // its output scaled by sigmoid(ffn_gate_inp_shexp . x)

  bool moe() const { return n_expert > 0; }
  // Some layer keeps a recurrent state per sequence: the state of a sequence covers exactly the
  // tokens it has computed, so it cannot be rolled back or taken from another sequence's cache.
  bool recurrent() const { return n_state_layers > 0; }
  // The attention layers keep one compressed row per token and no V (multi-head latent
  // attention): a K-only cache of head_dim values.
  bool latent_attention() const { return mla.kv_lora_rank > 0; }

  static Result<ModelConfig> from_gguf(const GgufFile& gguf);
};

// The config of `decoder`'s multi-token-prediction block (its nextn_predict_layers block after
// the decoder's layers) run as a model of one layer: an attention layer of the family's kind
// (latent attention for deepseek2, full attention for the DeltaNet hybrids whatever their
// interval), with K/V of its own, no window, and a mixture of experts when the decoder's last
// layer has one. An error when the model has no such block, or more than one.
Result<ModelConfig> mtp_block_config(const ModelConfig& decoder);

// The config of the EAGLE-3 head in `head` (general.architecture eagle3, one layer) checked
// against its target's whole config: extract_layers are 3 of the target's layers,
// target_hidden_size is the target's n_embd, n_vocab is the target's and n_draft_vocab d2t's
// length (the target's without d2t). Errors name the key or tensor.
Result<ModelConfig> eagle3_head_config(const GgufFile& head, const ModelConfig& target);

// The layout of `config`'s K/V: grouped by window (group_windows), or one group.
KvLayerGroups kv_layer_groups(const ModelConfig& config, bool group_windows);

// The cache's base row geometry: the first layer with K/V's (the model's n_head_kv x head_dim for
// every family whose layers are alike).
KvRowShape kv_base_shape(const ModelConfig& config);

// The cache a forward pass of `config` reads and writes: K/V for its attention layers in n_blocks
// blocks of block_size slots (K only, one row of mla.cache_dim() per token, for latent
// attention), and n_state_slots recurrent-state slots for its DeltaNet layers.
// group_windows: windowed layers in groups of their own, whose blocks leave the window (a model
// whose layers all share one window, or none, has one group either way).
KvCacheConfig model_cache_config(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
                                 KvType type, int32_t n_state_slots = 0,
                                 bool group_windows = false);

}  // namespace vela

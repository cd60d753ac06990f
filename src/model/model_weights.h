#pragma once
// Views of a Llama-family model's weights inside the memory-mapped GGUF file. Matrices stay in
// the mapping, except those the int8 kernels want interleaved (packed_layout.h): those are
// repacked once at load into memory the weights own, and their pages of the mapping are
// released, so resident memory stays about the file size. The small 1-D tensors (norms, biases)
// are converted to f32 at load.
// Thread-safety: immutable after load(); concurrent reads are safe.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "io/gguf.h"
#include "kernels/packed/packed_layout.h"
#include "model/model_config.h"
#include "model/tensor_shard.h"
#include "quant/ggml_type.h"
#include "util/result.h"

namespace vela {

// A 2-D weight matrix [n_rows, n_cols] stored row-major in its GGUF type (GGUF ne = {n_cols,
// n_rows}).
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  int64_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kRowMajor;
};

// Rows [row_begin, row_begin + n_rows) of m as a matrix of its own (for an interleaved m, both
// multiples of 16).
WeightMatrix weight_rows(const WeightMatrix& m, int64_t row_begin, int64_t n_rows);

// Row `row` of m (an embedding) as floats in out [m.n_cols]; an interleaved m's row is unpacked
// into scratch [m.row_bytes] first.
void embedding_row(const WeightMatrix& m, int64_t row, uint8_t* scratch, float* out);

// One expert's matrices: views into its layer's stacked tensors, or its own per-expert tensors
// (expert_loading.h).
struct ExpertWeights {
  WeightMatrix gate;  // [n_ff_expert, n_embd]
  WeightMatrix up;    // [n_ff_expert, n_embd]
  WeightMatrix down;  // [n_embd, n_ff_expert]
};

// A Gated DeltaNet mixer's tensors (shapes with the DeltaNetConfig's names).
struct DeltaNetWeights {
  WeightMatrix qkv;            // attn_qkv [conv_channels, n_embd]: rows q, k, v
  WeightMatrix gate;           // attn_gate [value_dim, n_embd]: z of the gated norm
  WeightMatrix beta;           // ssm_beta [n_v_heads, n_embd]: write strength before sigmoid
  WeightMatrix alpha;          // ssm_alpha [n_v_heads, n_embd]: decay rate before softplus
  WeightMatrix out;            // ssm_out [n_embd, value_dim]
  std::vector<float> conv;     // ssm_conv1d transposed: [conv_kernel, conv_channels], tap j of
                               // every channel in row j (oldest input first)
  std::vector<float> dt_bias;  // ssm_dt.bias [n_v_heads]
  std::vector<float> a;        // ssm_a [n_v_heads]: -exp(A_log), the decay's scale
  std::vector<float> norm;     // ssm_norm [head_v_dim]
};

// A latent-attention mixer's tensors (shapes with LatentAttentionConfig's names, H = n_head). A
// tensor-parallel rank holds its heads' rows of q_b (or q), k_b and v_b, and q_a, kv_a and their
// norms whole: every head reads the same latent rows.
struct LatentAttentionWeights {
  WeightMatrix q_a;              // attn_q_a [q_lora_rank, n_embd] (q_lora_rank > 0)
  std::vector<float> q_a_norm;   // attn_q_a_norm [q_lora_rank] (q_lora_rank > 0)
  WeightMatrix q_b;              // attn_q_b [H * key_dim, q_lora_rank]: per head nope, then rope
  WeightMatrix q;                // attn_q [H * key_dim, n_embd] (q_lora_rank 0, instead of q_a/q_b)
  WeightMatrix kv_a;             // attn_kv_a_mqa [kv_lora_rank + rope_dim, n_embd]: c_kv, then k_pe
  std::vector<float> kv_a_norm;  // attn_kv_a_norm [kv_lora_rank]
  // Per head, stacked: head h's matrix is rows [h * rows, (h + 1) * rows) (weight_rows).
  WeightMatrix k_b;  // attn_k_b [H * kv_lora_rank, nope_dim]: a nope query into the kv_lora space
  WeightMatrix v_b;  // attn_v_b [H * v_head_dim, kv_lora_rank]: a kv_lora output out of it
  // attn_k_b with each head's matrix transposed, [H * nope_dim, kv_lora_rank]: a latent row into
  // each head's nope key (the expanded form, latent_attention.h). Made at load, in k_b's type
  // when that is F32, F16 or BF16, else in F32: the same values as k_b either way.
  WeightMatrix k_b_t;
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  // Attention mixers. Separate or, for a fused attn_qkv, row views of it (rows Q, K, V). With an
  // output gate, wq has 2 * n_head * head_dim rows: each head's query rows, then its gate rows.
  WeightMatrix wq;        // [n_head * head_dim, n_embd]
  WeightMatrix wk;        // [n_head_kv * head_dim, n_embd]
  WeightMatrix wv;        // [n_head_kv * head_dim, n_embd]
  WeightMatrix wo;        // [n_embd, n_head * head_dim] (latent attention: n_head * v_head_dim)
  std::vector<float> bq;  // [n_head * head_dim] or empty (qwen2 has Q/K/V biases)
  std::vector<float> bk;  // [n_head_kv * head_dim] or empty
  std::vector<float> bv;  // [n_head_kv * head_dim] or empty
  std::vector<float> bo;  // attn_output.bias [n_embd] or empty
  std::vector<float> attn_sinks;  // [n_head] sink logit per head, or empty (a TP rank: its heads)
  std::vector<float> q_norm;      // [head_dim] (per head) or [n_head * head_dim] (whole), or empty
  std::vector<float> k_norm;      // [head_dim] or [n_head_kv * head_dim], or empty
  std::vector<float> post_attn_norm;  // [n_embd] or empty
  std::vector<float> ffn_norm;        // [n_embd]
  std::vector<float> post_ffn_norm;   // [n_embd] or empty
  // Dense FFN; for a fused gate+up ffn_up, row views of it (gate rows first).
  WeightMatrix w_gate;  // [n_ff, n_embd]
  WeightMatrix w_up;    // [n_ff, n_embd]
  WeightMatrix w_down;  // [n_embd, n_ff]
  // Mixture of experts (empty router: dense). Experts stay in the file mapping, so the pages of
  // experts no token chooses are never read.
  WeightMatrix router;                 // [n_expert, n_embd]
  std::vector<ExpertWeights> experts;  // [n_expert]; a TP rank's others' experts empty
  std::vector<float> expert_bias;  // exp_probs_b [n_expert]: added to scores to choose, or empty
  std::vector<float> router_bias;  // ffn_gate_inp.bias [n_expert]: added to the logits, or empty
  // Per-expert biases added to each expert's products, or empty (indexed by global expert id).
  std::vector<float> expert_gate_bias;  // ffn_gate_exps.bias [n_expert, n_ff_expert]
  std::vector<float> expert_up_bias;    // ffn_up_exps.bias [n_expert, n_ff_expert]
  std::vector<float> expert_down_bias;  // ffn_down_exps.bias [n_expert, n_embd]
  // The shared expert beside the routed ones (n_ff_shared_expert wide), or empty; gated models
  // scale its output by sigmoid(shared_expert_gate . x).
  ExpertWeights shared_expert;
  std::vector<float> shared_expert_gate;  // ffn_gate_inp_shexp [n_embd], or empty (ungated)
  DeltaNetWeights delta_net;              // Gated DeltaNet mixers only
  LatentAttentionWeights mla;             // latent-attention mixers only
  std::vector<float>
      output_scale;  // layer_output_scale [1]: the stream's scale at the end, or empty
  // Per-layer embeddings (n_embd_per_layer > 0): x += post_norm(proj(gelu(inp_gate x) * the
  // layer's per-layer input)) after the FFN.
  WeightMatrix ple_gate;             // inp_gate [n_embd_per_layer, n_embd]
  WeightMatrix ple_proj;             // proj [n_embd, n_embd_per_layer]
  std::vector<float> ple_post_norm;  // post_norm [n_embd]
  // Experts beside a dense FFN (ArchDescription::moe_beside_dense), or empty.
  std::vector<float> router_input_scale;  // ffn_gate_inp.scale [n_embd]
  std::vector<float> expert_down_scale;   // ffn_down_exps.scale [n_expert]
  std::vector<float> pre_moe_norm;        // pre_ffw_norm_2 [n_embd]: the experts' input norm
  std::vector<float> post_dense_norm;     // post_ffw_norm_1 [n_embd]: the dense FFN's output norm
  std::vector<float> post_moe_norm;       // post_ffw_norm_2 [n_embd]: the experts' output norm

  bool moe() const { return router.data != nullptr; }
  // The matrices a pass multiplies as a whole (not the routed experts, nor the per-head stacks
  // of latent attention): a null data pointer for those the layer does not have.
  std::array<WeightMatrix*, 21> matrices() {
    DeltaNetWeights& d = delta_net;
    ExpertWeights& s = shared_expert;
    LatentAttentionWeights& m = mla;
    return {&wq,     &wk,     &wv,     &wo,      &w_gate, &w_up,     &w_down,
            &d.qkv,  &d.gate, &d.beta, &d.alpha, &d.out,  &s.gate,   &s.up,
            &s.down, &m.q_a,  &m.q_b,  &m.q,     &m.kv_a, &ple_gate, &ple_proj};
  }
  std::array<const WeightMatrix*, 21> matrices() const {
    std::array<const WeightMatrix*, 21> out;
    const auto all = const_cast<LayerWeights*>(this)->matrices();
    for (size_t i = 0; i < all.size(); ++i) out[i] = all[i];
    return out;
  }
};

// A multi-token-prediction block's input (ModelConfig::mtp_block): for a token's embedding e and
// a hidden state h, x = eh_proj [rms_norm(e) * enorm | rms_norm(h) * hnorm].
struct MtpInputWeights {
  WeightMatrix eh_proj;      // nextn.eh_proj [n_embd, 2 * n_embd]: embedding columns first
  std::vector<float> enorm;  // nextn.enorm [n_embd]
  std::vector<float> hnorm;  // nextn.hnorm [n_embd]
};

// An EAGLE-3 head's own tensors beyond its layer's (ModelConfig::eagle3): g = fc features, the
// hidden norm of g in its attention input, and the draft vocabulary's target ids.
struct Eagle3Weights {
  WeightMatrix fc;                 // fc [n_embd, 3 * target_n_embd]: features in extract order
  std::vector<float> hidden_norm;  // blk.0.hidden_norm (or attn_norm_2) [n_embd]
  // d2t [n_draft_vocab]: draft token i's target token id; empty when the draft vocabulary is the
  // target's (no d2t, or d2t the identity).
  std::vector<int32_t> d2t;
};

struct ModelWeights {
  // An MTP block's: nextn.embed_tokens where the file has it, else the model's. An EAGLE-3
  // head's: its token_embd where it has one, else the target's ([target n_vocab, n_embd]).
  // Interleaved when it is a tied head that was repacked (read rows with embedding_row).
  WeightMatrix token_embd;  // [n_vocab, n_embd]
  // An MTP block's: nextn.shared_head_norm.
  std::vector<float> output_norm;  // [n_embd]
  // token_embd when the embeddings are tied; an MTP block's: nextn.shared_head_head where the
  // file has it, else the model's output head (output.weight, or token_embd.weight when tied).
  // An EAGLE-3 head's: its output.weight, [n_draft_vocab, n_embd], else the target's head.
  WeightMatrix output;  // [n_vocab, n_embd]
  bool tied_embeddings = false;
  std::vector<float> rope_freq_factors;  // [n_rot / 2] (Llama 3.1+ `rope_freqs.weight`) or empty
  std::vector<float>
      rope_factors_short;  // [n_rot / 2] LongRoPE within the original context, or empty
  std::vector<float> rope_factors_long;  // [n_rot / 2] LongRoPE beyond it, or empty
  // Per-layer embeddings (n_embd_per_layer > 0; P = n_embd_per_layer, L = n_layer), or empty.
  WeightMatrix per_layer_token_embd;       // [n_vocab, L * P]
  WeightMatrix per_layer_model_proj;       // [L * P, n_embd]
  std::vector<float> per_layer_proj_norm;  // [P]
  std::vector<LayerWeights> layers;        // [n_layer] (a pipeline stage: its layers only)
  MtpInputWeights mtp;                     // an MTP block's input (empty otherwise)
  Eagle3Weights eagle3;                    // an EAGLE-3 head's (empty otherwise)

  // Owns the repacked matrices (empty when none was repacked).
  std::shared_ptr<uint8_t[]> repacked;
  int64_t repacked_bytes = 0;
  // A tensor-parallel rank's slice: which heads, FFN columns, vocabulary rows and layers it
  // holds, and the slices it copied out of the mapping (column slices; the row runs of a DeltaNet
  // slice), those not repacked.
  ShardRanges shard;
  std::vector<std::shared_ptr<uint8_t[]>> column_slices;

  // Checks every tensor's presence, type and shape against the config. With repack, matrices the
  // selected kernels prefer interleaved are repacked (the embedding table, read by row, never).
  // repack_experts: the experts' stacked matrices too (otherwise they stay in the mapping).
  // A sharded `shard` keeps only that rank's slices of its stage's layers (tensor_shard.h; the
  // output head is repacked on the last stage only); the rest of the mapping is never read.
  // An MTP block's (config.mtp_block) also reads its nextn.* tensors; it takes token_embd and the
  // output head from `target` (the whole decoder's weights, which must outlive these) where the
  // file has no nextn copies of them, else from the file.
  // An EAGLE-3 head's (config.eagle3) reads fc, d2t and its layer (attention input 2 * n_embd
  // wide) from `gguf`, and token_embd and the output head where it has none from `target`, else
  // whole from `target_file` (the target's file, for a sharded target).
  static Result<ModelWeights> load(const GgufFile& gguf, const ModelConfig& config,
                                   bool repack = true, bool repack_experts = true,
                                   const TensorShard& shard = {},
                                   const ModelWeights* target = nullptr,
                                   const GgufFile* target_file = nullptr);
};

}  // namespace vela

#pragma once
// The multi-head latent attention mixer (DeepSeek-V2/V3) in its absorbed form, over a batch:
//   q     = attn_q_b(rms_norm(attn_q_a x) * attn_q_a_norm)      (or attn_q x without a q_lora)
//           per head [q_nope (nope_dim) | q_pe (rope_dim)]
//   row   = attn_kv_a_mqa x = [c_kv (kv_lora_rank) | k_pe (rope_dim)]
//   c_kv  = rms_norm(c_kv) * attn_kv_a_norm;  q_pe, k_pe rotated (RoPE)
// The cache keeps `row` and nothing else per token: one K-only head of kv_lora_rank + rope_dim
// values that every query head shares. Each head's nope query is taken into the kv_lora space,
// q_h = [attn_k_b[h] q_nope | q_pe], so that q_h . row equals the expanded form's
// q_nope . k_nope + q_pe . k_pe; the probabilities then weigh the rows' c_kv (the leading
// kv_lora_rank values: the attention's V), and attn_v_b[h] takes that latent sum to the head's
// v_head_dim output. Scores are scaled by LatentAttentionConfig::scale.
// Decode and prefill run the same absorbed arithmetic, so a token's output does not depend on
// how its sequence was split into passes, nor on the other sequences of the batch.
// Thread-safety: one run at a time (it owns the work buffers); owned by one DecoderForward.
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/projector.h"
#include "util/thread_pool.h"

namespace vela {

class LatentAttentionMixer {
 public:
  // Attention of the batch's absorbed queries over the layer's cache rows (written before the
  // call): q [n_tokens, n_head, cache_dim] in, latent [n_tokens, n_head, kv_lora_rank] out.
  using Attend = std::function<void(const AttentionParams& p, const float* q, float* latent)>;

  // Buffers sized once for max_tokens tokens.
  LatentAttentionMixer(const ModelConfig& config, int32_t max_tokens);

  // Room for the per-head products of w's attn_k_b and attn_v_b over max_tokens tokens.
  void reserve(const LatentAttentionWeights& w);

  // out[t] = the heads' outputs of token t before attn_output; each token's cache row goes to
  // slot slots[t] of cache layer kv_layer.
  // xn: [n_tokens, n_embd]; rope_cs: [n_tokens, rope_dim / 2, 2] (rope.h); slots: [n_tokens];
  // out: [n_tokens, n_head * v_head_dim]. Element-wise loops below min_work and products below
  // min_parallel_work (< 0: MatmulSplit's default) stay on the calling thread.
  void run(const LatentAttentionWeights& w, const float* xn, int64_t n_tokens, const float* rope_cs,
           const int64_t* slots, KvCache& cache, int32_t kv_layer, Projector& projector,
           ThreadPool& pool, int64_t min_work, int64_t min_parallel_work, const Attend& attend,
           float* out);

 private:
  // y_h = stack[h] x_h for every head h: x [n_head, n_tokens, stack.n_cols] head-major in,
  // y [n_head, n_tokens, rows] out, one parallel loop for all heads.
  void per_head(const WeightMatrix& stack, int64_t rows, const float* x, int64_t n_tokens, float* y,
                ThreadPool& pool, int64_t min_work, int64_t min_parallel_work);

  const ModelConfig& config_;
  LatentAttentionConfig m_;
  int32_t max_tokens_;
  std::vector<float> q_lora_;      // [T, q_lora_rank] attn_q_a's output, normalised
  std::vector<float> q_;           // [T, n_head, key_dim] per head nope, then rope (rotated)
  std::vector<float> row_;         // [T, cache_dim] attn_kv_a_mqa's output: the cache rows
  std::vector<float> q_absorbed_;  // [T, n_head, cache_dim] attention's queries
  std::vector<float> latent_;      // [T, n_head, kv_lora_rank] attention's outputs
  std::vector<float> head_in_;     // [n_head, T, max(nope_dim, kv_lora_rank)] per-head inputs
  std::vector<float> head_out_;    // [n_head, T, max(kv_lora_rank, v_head_dim)] per-head outputs
  MatmulScratch act_;              // per-head converted activations, side by side
  std::vector<QuantizedActivations> acts_;  // [n_head]
  MatmulSplit split_;                       // one part per head
};

}  // namespace vela

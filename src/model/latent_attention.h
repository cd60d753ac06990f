#pragma once
// The multi-head latent attention mixer (DeepSeek-V2/V3) over a batch:
//   q     = attn_q_b(rms_norm(attn_q_a x) * attn_q_a_norm)      (or attn_q x without a q_lora)
//           per head [q_nope (nope_dim) | q_pe (rope_dim)]
//   row   = attn_kv_a_mqa x = [c_kv (kv_lora_rank) | k_pe (rope_dim)]
//   c_kv  = rms_norm(c_kv) * attn_kv_a_norm;  q_pe, k_pe rotated (RoPE)
// The cache keeps `row` and nothing else per token: one K-only head of kv_lora_rank + rope_dim
// values that every query head shares. In the absorbed form each head's nope query is taken into
// the kv_lora space, q_h = [attn_k_b[h] q_nope | q_pe], so that q_h . row equals the expanded
// form's q_nope . k_nope + q_pe . k_pe; the probabilities then weigh the rows' c_kv (the leading
// kv_lora_rank values: the attention's V), and attn_v_b[h] takes that latent sum to the head's
// v_head_dim output. Scores are scaled by LatentAttentionConfig::scale. Decode steps and short
// runs take this form.
// A sequence's long run of tokens in a pass takes the expanded form instead (vLLM and SGLang do
// the same for prefill): each visible row's nope key attn_k_b[h]^T c_kv and value attn_v_b[h]
// c_kv are made per key block by two products (k_b_t, v_b), and attention runs per head on
// nope_dim + rope_dim keys and v_head_dim values, about 3.4x fewer operations per (query, key)
// pair than the absorbed form's kv_lora_rank + cache_dim, for the expansion's cost per key.
// Which form a run takes depends only on its own length and position (takes_expanded_form), so
// a token's output does not depend on the other sequences of the batch; the two forms agree
// within f32 rounding (over an f16 cache the absorbed form rounds queries and probabilities to
// f16, attention.h), so how a sequence is split into passes can change its rounding (as a
// DeltaNet's chunked and recurrent forms do), not its values. Within the expanded form a token's
// output does not depend on the split either: key blocks start at fixed positions and each
// (token, head) takes them in order (an online softmax).
// Thread-safety: one run at a time (it owns the work buffers); owned by one DecoderForward.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/projector.h"
#include "util/thread_pool.h"

namespace vela {

// A sequence's tokens in a pass: consecutive batch rows at consecutive positions.
struct LatentSpan {
  int64_t first = 0;           // batch index of its first token
  int32_t n_tokens = 0;        //
  int32_t first_position = 0;  // position of its first token
  // The block of position p: block_table[p / block_size * table_stride] (ForwardBatch's rows).
  const int32_t* block_table = nullptr;
  int32_t table_stride = 1;
  bool expanded = false;  // takes the expanded form (takes_expanded_form of its whole run)
};

class LatentAttentionMixer {
 public:
  // Keys the expanded form expands per product: its buffers' rows.
  static constexpr int32_t kKeyBlock = 128;
  // Tokens of one head whose scores one expanded-form task computes together.
  static constexpr int32_t kExpandedTile = 64;
  // Floats from one token's block scores to the next: an odd number of cache lines (attention.cpp's
  // score rows: a power of two put every row in one or two L1 sets).
  static constexpr int32_t kScoreStride = kKeyBlock + 16;
  // Attention of the batch's absorbed queries over the layer's cache rows (written before the
  // call): q [n_tokens, n_head, cache_dim] in, latent [n_tokens, n_head, kv_lora_rank] out.
  using Attend = std::function<void(const AttentionParams& p, const float* q, float* latent)>;

  // Buffers sized once for max_tokens tokens and n_threads threads. expanded_min_tokens: the
  // break-even run length of the expanded form (takes_expanded_form); 0 = absorbed form only.
  LatentAttentionMixer(const ModelConfig& config, int32_t max_tokens, int32_t n_threads,
                       int32_t expanded_min_tokens);

  // Whether a run of n_tokens tokens from first_position takes the expanded form: when its
  // attention's work saved, ~ n_tokens * (first_position + n_tokens / 2) pairs, outweighs the
  // expansion of its first_position + n_tokens keys, that is (first_position + n_tokens / 2) *
  // n_tokens >= expanded_min_tokens * (first_position + n_tokens): runs of expanded_min_tokens
  // tokens deep in a context, of twice that from position 0.
  bool takes_expanded_form(int32_t n_tokens, int32_t first_position) const;

  // Room for the per-head products of w's attn_k_b and attn_v_b over max_tokens tokens.
  void reserve(const LatentAttentionWeights& w);

  // out[t] = the heads' outputs of token t before attn_output; each token's cache row goes to
  // slot slots[t] of cache layer kv_layer. The spans cover the batch's tokens; `attend` runs the
  // absorbed form for the tokens of the spans not `expanded` (writing only their rows), the
  // expanded ones run here. The caller marks no span expanded when the projector has an
  // activation observer (an importance-matrix run, which is to see the absorbed form's products).
  // xn: [n_tokens, n_embd]; rope_cs: [n_tokens, rope_dim / 2, 2] (rope.h); slots: [n_tokens];
  // spans: [n_spans]; out: [n_tokens, n_head * v_head_dim]. Element-wise loops below min_work and
  // products below min_parallel_work (< 0: MatmulSplit's default) stay on the calling thread.
  void run(const LatentAttentionWeights& w, const float* xn, int64_t n_tokens, const float* rope_cs,
           const int64_t* slots, std::span<const LatentSpan> spans, KvCache& cache,
           int32_t kv_layer, Projector& projector, ThreadPool& pool, int64_t min_work,
           int64_t min_parallel_work, const Attend& attend, float* out);

 private:
  // y_h = stack[h] x_h for every head h: x [n_head, n_tokens, stack.n_cols] head-major in,
  // y [n_head, n_tokens, rows] out, one parallel loop for all heads.
  void per_head(const WeightMatrix& stack, int64_t rows, const float* x, int64_t n_tokens, float* y,
                ThreadPool& pool, int64_t min_work, int64_t min_parallel_work);
  // The expanded form of one span (latent_attention_expanded.cpp): out rows of its tokens from
  // q_ (rotated) and the cache rows of its positions and every earlier one.
  void run_expanded(const LatentAttentionWeights& w, const LatentSpan& span, const KvCache& cache,
                    int32_t kv_layer, Projector& projector, ThreadPool& pool, int64_t min_work,
                    float* out);

  const ModelConfig& config_;
  LatentAttentionConfig m_;
  int32_t max_tokens_;
  std::vector<float> q_lora_;      // [T, q_lora_rank] attn_q_a's output, normalised
  std::vector<float> q_;           // [T, n_head, key_dim] per head nope, then rope (rotated)
  std::vector<float> row_;         // [T, cache_dim] attn_kv_a_mqa's output: the cache rows
  std::vector<float> q_absorbed_;  // [T, n_head, cache_dim] attention's queries
  std::vector<float> latent_;      // [T, n_head, kv_lora_rank] attention's outputs
  std::vector<float> head_in_;     // [n_head, T, max(nope_dim, kv_lora_rank)] per-head inputs
  // [n_head, T, max(kv_lora_rank, v_head_dim)] per-head outputs; before them, the expanded
  // form's head-major queries and accumulators ([n_head, T, key_dim + v_head_dim] at most)
  std::vector<float> head_out_;
  MatmulScratch act_;                       // per-head converted activations, side by side
  std::vector<QuantizedActivations> acts_;  // [n_head]
  MatmulSplit split_;                       // one part per head
  int32_t expanded_min_tokens_;
  std::vector<int32_t> absorbed_row_;  // [T] token t's row among the absorbed tokens, or -1
  // The expanded form's, per key block of kKeyBlock positions:
  std::vector<float> cache_rows_;    // [kKeyBlock, cache_dim] cache rows as f32
  std::vector<float> latents_;       // [kKeyBlock, kv_lora_rank] their c_kv
  std::vector<float> k_nope_;        // [kKeyBlock, n_head * nope_dim] k_b_t's product
  std::vector<float> keys_;          // [kKeyBlock, n_head, key_dim] each head's [k_nope | k_pe]
  std::vector<float> values_;        // [kKeyBlock, n_head * v_head_dim] v_b's product
  std::vector<float> row_max_;       // [n_head, T] running maximum of each (head, token)'s scores
  std::vector<double> row_sum_;      // [n_head, T] its softmax denominator at that maximum
  std::vector<float> block_scores_;  // [n_threads, kExpandedTile, kScoreStride]
};

}  // namespace vela

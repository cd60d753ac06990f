#pragma once
// Causal multi-head attention over the paged KV cache, with grouped-query heads, an optional
// sliding window and an optional soft-cap of the scores (gemma2). One call handles the query heads
// that share one KV head, for one to kAttentionMaxTokens tokens of one sequence (a decode token or
// a piece of a prefill chunk), so each K and V row is read from memory once for all of them (the
// SIMD row kernels of kernels/attention_kernels.h convert up to kAttnMaxPositions rows at a time
// once for every query row). Two passes per call: scores of every visible position and a softmax
// per (token, head), then the probability-weighted sum of V.
//
// Precision follows the cache type:
// - f16: the query is rounded to f16 for the Q·K dot products and the normalised probabilities
//   to f16 for the P·V sum — the arithmetic of an f16×f16 dot kernel and of the reference engine
//   the tests compare against.
// - f32, bf16, q8_0: only the storage is lossy; query, scores and probabilities stay f32 (the
//   more accurate choice where no reference arithmetic is to be matched).
// Every (token, head) result is computed in the same order whatever else shares the call, so
// the output does not depend on how a batch is split into calls or over threads.
//
// Multi-head latent attention runs here too, in its absorbed form: one KV head whose K row is a
// token's compressed row [c_kv | k_pe] in a K-only cache, and whose V is the leading value_dim
// (kv_lora_rank) values of that same row.
#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"

namespace vela {

struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t sliding_window = 0;  // 0 = attend to every earlier position
  float scale = 1.0f;          // usually 1/sqrt(head_dim)
  float softcap = 0.0f;        // scaled scores -> softcap * tanh(score / softcap); 0 = none
  // Values per head, 0 = head_dim. Fewer than head_dim: V is the first value_dim values of the
  // V row (of a K-only cache, its K row); q8_0 rows then need value_dim a multiple of 32.
  int32_t value_dim = 0;
  // [n_head] one learned logit per head that joins its softmax (the max and the denominator)
  // with no value row, so the probabilities of the positions sum below 1; null = none.
  const float* sinks = nullptr;

  int32_t group() const { return n_head / n_head_kv; }  // query heads per KV head
  int32_t v_dim() const { return value_dim > 0 ? value_dim : head_dim; }
};

// Most tokens one attention_kv_group call takes.
constexpr int32_t kAttentionMaxTokens = 4;

// Work space of one thread's attention calls, sized once for the longest context. Rows are the
// (token, head) pairs of a call: row r = token * n_heads + head in the call.
struct AttentionScratch {
  std::vector<float> scores;  // [max rows, score row stride] scores, then probabilities
  std::vector<float> query;   // [max rows, head_dim] queries as the dots see them (f16-rounded)
  std::vector<float> acc;     // [max rows, v_dim]
  AttentionScratch(int32_t max_context, const AttentionParams& p);
};

// For tokens t < n_tokens of one sequence, at positions first_position + t, and the query heads
// h in [first_head, first_head + n_heads), which must share one KV head (a whole group, or part
// of one when a decode step is spread over more threads than there are KV heads):
// out[t, h, :] = softmax(q[t, h] · K^T * scale) · V over the positions token t sees (with sinks,
// the softmax over those scores and sinks[h], whose probability multiplies nothing), reading
// layer `layer`'s K/V through the block table. The cache must already hold K/V for every
// position up to first_position + n_tokens - 1.
// q: [n_tokens, q_stride] with head h of token t at t * q_stride + h * head_dim; out:
// [n_tokens, out_stride] with head h at t * out_stride + h * v_dim(); only those heads of out
// are written. block_table: [>= last position / block_size + 1] entries table_stride apart (the
// block of position p is block_table[p / block_size * table_stride]).
// 1 <= n_tokens <= kAttentionMaxTokens.
void attention_kv_group(const KvCache& cache, int32_t layer, const AttentionParams& p,
                        int32_t first_head, int32_t n_heads, const float* q, int64_t q_stride,
                        int32_t n_tokens, int32_t first_position, const int32_t* block_table,
                        float* out, int64_t out_stride, AttentionScratch& scratch,
                        int32_t table_stride = 1);

// Every query head of ONE token at `position`.
// q: [n_head, head_dim]; block_table: [>= position / block_size + 1]; out: [n_head, v_dim]
void attention_one_token(const KvCache& cache, int32_t layer, const AttentionParams& p,
                         const float* q, int32_t position, const int32_t* block_table, float* out,
                         AttentionScratch& scratch);

}  // namespace vela

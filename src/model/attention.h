#pragma once
// Causal multi-head attention over the paged KV cache, with grouped-query heads and an optional
// sliding window. Scalar reference: per query head, scores over the visible positions, softmax,
// then the probability-weighted sum of V.
//
// Precision follows the cache type: with an f16 cache the query is rounded to f16 for the Q·K
// dot products and the normalised probabilities to f16 for the P·V sum — the arithmetic of an
// f16×f16 dot kernel and of the reference engine the tests compare against. An f32 cache keeps
// everything in f32.
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
};

// Work space of attention_one_token, sized once for the longest context.
struct AttentionScratch {
  std::vector<float> scores;  // [max_context]
  std::vector<float> query;   // [head_dim] query as the dot products see it
  std::vector<float> acc;     // [head_dim]
  AttentionScratch(int32_t max_context, int32_t head_dim)
      : scores(size_t(max_context)), query(size_t(head_dim)), acc(size_t(head_dim)) {}
};

// out[h, :] = softmax(q[h] · K[first..pos]^T * scale) · V[first..pos] for every query head h of
// ONE token at `position`, reading layer `layer`'s K/V through the sequence's block table.
// q: [n_head, head_dim]; block_table: [>= position / block_size + 1]; out: [n_head, head_dim]
void attention_one_token(const KvCache& cache, int32_t layer, const AttentionParams& p,
                         const float* q, int32_t position, const int32_t* block_table, float* out,
                         AttentionScratch& scratch);

}  // namespace vela

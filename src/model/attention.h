#pragma once
// Causal multi-head attention over the paged KV cache, with grouped-query heads and an optional
// sliding window. Scalar reference; online softmax (one pass over the keys per query head).
#include <cstdint>

#include "kv/kv_cache.h"

namespace vela {

struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t sliding_window = 0;  // 0 = attend to every earlier position
  float scale = 1.0f;          // usually 1/sqrt(head_dim)
};

// out[h, :] = softmax(q[h] · K[0..pos]^T * scale) · V[0..pos] for every query head h of ONE token
// at `position`, reading K/V of layer `layer` through the sequence's block table.
// q: [n_head, head_dim]; block_table: [>= position / block_size + 1]; out: [n_head, head_dim]
// scratch: [head_dim] f32
void attention_one_token(const KvCache& cache, int32_t layer, const AttentionParams& p,
                         const float* q, int32_t position, const int32_t* block_table, float* out,
                         float* scratch);

}  // namespace vela

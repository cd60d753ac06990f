#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/half.h"

namespace vela {
namespace {

template <class Elem>
inline float load(const Elem* p, int64_t i) {
  if constexpr (std::is_same_v<Elem, float>) return p[i];
  else return fp16_to_fp32(p[i]);
}

template <class Elem>
void attend(const KvCache& cache, int32_t layer, const AttentionParams& p, const float* q,
            int32_t position, const int32_t* block_table, float* out, float* acc) {
  const int32_t bs = cache.config().block_size;
  const int32_t group = p.n_head / p.n_head_kv;
  const int32_t first = p.sliding_window > 0 ? std::max(0, position - p.sliding_window + 1) : 0;
  for (int32_t h = 0; h < p.n_head; ++h) {
    const float* qh = q + int64_t(h) * p.head_dim;
    const int64_t kv_off = int64_t(h / group) * p.head_dim;
    float running_max = -std::numeric_limits<float>::infinity();
    float denom = 0.0f;
    std::fill(acc, acc + p.head_dim, 0.0f);
    for (int32_t j = first; j <= position; ++j) {
      const int64_t slot = int64_t(block_table[j / bs]) * bs + j % bs;
      const Elem* k = static_cast<const Elem*>(cache.k_row(layer, slot)) + kv_off;
      float s = 0.0f;
      for (int32_t d = 0; d < p.head_dim; ++d) s += qh[d] * load(k, d);
      s *= p.scale;
      // Online softmax: rescale what was accumulated when a new maximum appears.
      if (s > running_max) {
        const float correction = std::exp(running_max - s);
        denom *= correction;
        for (int32_t d = 0; d < p.head_dim; ++d) acc[d] *= correction;
        running_max = s;
      }
      const float w = std::exp(s - running_max);
      denom += w;
      const Elem* v = static_cast<const Elem*>(cache.v_row(layer, slot)) + kv_off;
      for (int32_t d = 0; d < p.head_dim; ++d) acc[d] += w * load(v, d);
    }
    float* oh = out + int64_t(h) * p.head_dim;
    const float inv = 1.0f / denom;
    for (int32_t d = 0; d < p.head_dim; ++d) oh[d] = acc[d] * inv;
  }
}

}  // namespace

void attention_one_token(const KvCache& cache, int32_t layer, const AttentionParams& p,
                         const float* q, int32_t position, const int32_t* block_table, float* out,
                         float* scratch) {
  if (cache.config().type == KvType::kF32)
    attend<float>(cache, layer, p, q, position, block_table, out, scratch);
  else
    attend<uint16_t>(cache, layer, p, q, position, block_table, out, scratch);
}

}  // namespace vela

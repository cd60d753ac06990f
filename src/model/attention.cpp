#include "model/attention.h"

#include <algorithm>
#include <cmath>

#include "util/half.h"

namespace vela {
namespace {

inline float round_to(float x, KvType type) {
  return type == KvType::kF16 ? fp16_to_fp32(fp32_to_fp16(x)) : x;
}

template <class Elem>
inline float load(const Elem* p, int64_t i) {
  if constexpr (std::is_same_v<Elem, float>) return p[i];
  else return fp16_to_fp32(p[i]);
}

template <class Elem>
void attend(const KvCache& cache, int32_t layer, const AttentionParams& p, const float* q,
            int32_t position, const int32_t* block_table, float* out, AttentionScratch& s) {
  const KvType type = cache.config().type;
  const int32_t bs = cache.config().block_size;
  const int32_t group = p.n_head / p.n_head_kv;
  const int32_t first = p.sliding_window > 0 ? std::max(0, position - p.sliding_window + 1) : 0;
  const auto slot_of = [&](int32_t j) { return int64_t(block_table[j / bs]) * bs + j % bs; };
  for (int32_t h = 0; h < p.n_head; ++h) {
    const int64_t kv_off = int64_t(h / group) * p.head_dim;
    for (int32_t d = 0; d < p.head_dim; ++d) s.query[size_t(d)] = round_to(q[int64_t(h) * p.head_dim + d], type);

    float max_score = -INFINITY;
    for (int32_t j = first; j <= position; ++j) {
      const Elem* k = static_cast<const Elem*>(cache.k_row(layer, slot_of(j))) + kv_off;
      float dot = 0.0f;
      for (int32_t d = 0; d < p.head_dim; ++d) dot += s.query[size_t(d)] * load(k, d);
      s.scores[size_t(j)] = dot * p.scale;
      max_score = std::max(max_score, s.scores[size_t(j)]);
    }
    double sum = 0.0;
    for (int32_t j = first; j <= position; ++j) {
      s.scores[size_t(j)] = std::exp(s.scores[size_t(j)] - max_score);
      sum += s.scores[size_t(j)];
    }
    const float inv_sum = float(1.0 / sum);

    std::fill(s.acc.begin(), s.acc.end(), 0.0f);
    for (int32_t j = first; j <= position; ++j) {
      const float w = round_to(s.scores[size_t(j)] * inv_sum, type);
      const Elem* v = static_cast<const Elem*>(cache.v_row(layer, slot_of(j))) + kv_off;
      for (int32_t d = 0; d < p.head_dim; ++d) s.acc[size_t(d)] += w * load(v, d);
    }
    std::copy(s.acc.begin(), s.acc.end(), out + int64_t(h) * p.head_dim);
  }
}

}  // namespace

void attention_one_token(const KvCache& cache, int32_t layer, const AttentionParams& p,
                         const float* q, int32_t position, const int32_t* block_table, float* out,
                         AttentionScratch& scratch) {
  if (cache.config().type == KvType::kF32)
    attend<float>(cache, layer, p, q, position, block_table, out, scratch);
  else
    attend<uint16_t>(cache, layer, p, q, position, block_table, out, scratch);
}

}  // namespace vela

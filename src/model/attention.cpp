#include "model/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/attention_kernels.h"
#include "model/layer_ops.h"

namespace vela {
namespace {

kernels::AttnRowType row_type(KvType type) {
  switch (type) {
    case KvType::kF32:
      return kernels::AttnRowType::kF32;
    case KvType::kF16:
      return kernels::AttnRowType::kF16;
    case KvType::kBF16:
      return kernels::AttnRowType::kBF16;
    case KvType::kQ8_0:
      return kernels::AttnRowType::kQ8_0;
  }
  return kernels::AttnRowType::kF32;
}

// Floats from one score row to the next for rows of `span` positions: an odd number of cache
// lines, so that one position's scores of consecutive rows (written together by the dot kernels)
// fall in different L1 sets. A power-of-two stride put every row in one or two sets (measured: 32
// rows x 512 positions of f16 K, the score pass 1.56x faster with the odd stride).
int64_t score_row_stride(int64_t span) {
  constexpr int64_t kLineFloats = 64 / sizeof(float);
  const int64_t lines = (span + kLineFloats - 1) / kLineFloats;
  return (lines | 1) * kLineFloats;
}

}  // namespace

AttentionScratch::AttentionScratch(int32_t max_context, const AttentionParams& p) {
  const size_t rows = size_t(kAttentionMaxTokens) * size_t(p.group());
  // One more column than positions: a row's sink logit joins its softmax after its last position.
  scores.resize(size_t(score_row_stride(int64_t(max_context) + 1)) * rows);
  query.resize(rows * size_t(p.head_dim));
  acc.resize(rows * size_t(p.v_dim()));
}

void attention_kv_group(const KvCache& cache, int32_t layer, const AttentionParams& p,
                        int32_t first_head, int32_t n_heads, const float* q, int64_t q_stride,
                        int32_t n_tokens, int32_t first_position, const int32_t* block_table,
                        float* out, int64_t out_stride, AttentionScratch& s, int32_t table_stride) {
  assert(n_tokens >= 1 && n_tokens <= kAttentionMaxTokens);
  assert(n_heads >= 1 && first_head / p.group() == (first_head + n_heads - 1) / p.group());
  const KvType type = cache.config().type;
  const bool f16_math = type == KvType::kF16;
  const kernels::AttentionRowKernels& kern = kernels::attention_row_kernels();
  const kernels::AttnDotRowsFn dot_rows = kern.dot_rows_for(row_type(type));
  const kernels::AttnAxpyRowsFn axpy_rows = kern.axpy_rows_for(row_type(type));
  const int32_t bs = cache.config().block_size;
  const int32_t hd = p.head_dim;
  const int32_t vd = p.v_dim();
  const int32_t kv_head = first_head / p.group();
  // The layer's own head geometry: a cache with rows of several geometries (KvRowShape) holds
  // this layer's heads at the start of each row.
  const size_t head_bytes = kv_head_row_bytes(type, hd);
  const auto k_head = [&](int64_t slot) {
    return static_cast<const uint8_t*>(cache.k_row(layer, slot)) + size_t(kv_head) * head_bytes;
  };
  const auto v_head = [&](int64_t slot) {
    return static_cast<const uint8_t*>(cache.v_row(layer, slot)) + size_t(kv_head) * head_bytes;
  };
  const int32_t n_rows = n_tokens * n_heads;  // row r = token * n_heads + head in the call
  const int32_t window = p.sliding_window;
  const int32_t last_position = first_position + n_tokens - 1;
  // Positions token t sees: [first_visible(t), first_position + t].
  const auto first_visible = [&](int32_t t) {
    return window > 0 ? std::max(0, first_position + t - window + 1) : 0;
  };
  const int32_t lo = first_visible(0);
  // Tokens that see position j form the range [t_lo, t_hi] (positions rise with t).
  const auto tokens_seeing = [&](int32_t j, int32_t& t_lo, int32_t& t_hi) {
    t_lo = std::max(0, j - first_position);
    t_hi = window > 0 ? std::min(n_tokens - 1, j - first_position + window - 1) : n_tokens - 1;
  };
  const auto slot_of = [&](int32_t j) {
    return int64_t(block_table[j / bs * table_stride]) * bs + j % bs;
  };
  // Scores [n_rows, span] (rows stride apart): row r's positions are contiguous for its softmax;
  // with sinks the column after a row's last position holds its sink for the softmax (a
  // position that row does not see, whose score pass 2 never reads for it).
  const int64_t span = last_position - lo + 1;
  const int64_t stride = score_row_stride(span + (p.sinks != nullptr ? 1 : 0));
  const auto score = [&](int32_t j, int32_t r) -> float& {
    return s.scores[size_t(r) * size_t(stride) + size_t(j - lo)];
  };

  // Queries as the dots see them, [n_rows, head_dim].
  for (int32_t t = 0; t < n_tokens; ++t)
    for (int32_t g = 0; g < n_heads; ++g) {
      const float* qh = q + t * q_stride + int64_t(first_head + g) * hd;
      float* qr = s.query.data() + size_t(t * n_heads + g) * size_t(hd);
      if (f16_math)
        kern.round_f16(qh, qr, hd);
      else
        std::copy(qh, qh + hd, qr);
    }

  // Pass 1: scores, kAttnMaxPositions positions at a time for the rows of every token that
  // sees one of them (a row's scores of positions it does not see are computed but never read).
  // Each K row is read once per call; a score does not depend on what else shares the call.
  for (int32_t j0 = lo; j0 <= last_position; j0 += kernels::kAttnMaxPositions) {
    const int32_t n_pos = std::min(kernels::kAttnMaxPositions, last_position - j0 + 1);
    int32_t t_lo, t_hi, unused;
    tokens_seeing(j0, t_lo, unused);
    tokens_seeing(j0 + n_pos - 1, unused, t_hi);
    if (t_lo > t_hi) continue;
    const void* k[kernels::kAttnMaxPositions];
    for (int32_t i = 0; i < n_pos; ++i) k[i] = k_head(slot_of(j0 + i));
    const int32_t r0 = t_lo * n_heads;
    dot_rows(s.query.data() + size_t(r0) * size_t(hd), hd, (t_hi + 1) * n_heads - r0, k, n_pos, hd,
             p.scale, &score(j0, r0), stride);
  }

  // Softmax of each row over the positions its token sees.
  for (int32_t r = 0; r < n_rows; ++r) {
    const int32_t t = r / n_heads;
    const int32_t first = first_visible(t), last = first_position + t;
    if (p.softcap > 0.0f) soft_cap(&score(first, r), last - first + 1, p.softcap);
    if (p.sinks != nullptr) {
      score(last + 1, r) = p.sinks[first_head + r % n_heads];
      kern.softmax(&score(first, r), last - first + 2, f16_math);
    } else {
      kern.softmax(&score(first, r), last - first + 1, f16_math);
    }
  }

  // Pass 2: probability-weighted sum of V, each V row read once; consecutive positions seen by
  // the same rows go to the kernel together (up to kAttnMaxPositions).
  std::fill(s.acc.begin(), s.acc.begin() + size_t(n_rows) * size_t(vd), 0.0f);
  for (int32_t j = lo; j <= last_position;) {
    int32_t t_lo, t_hi;
    tokens_seeing(j, t_lo, t_hi);
    if (t_lo > t_hi) {
      ++j;
      continue;
    }
    const void* v[kernels::kAttnMaxPositions];
    int n_pos = 0;
    v[n_pos++] = v_head(slot_of(j));
    for (int32_t next_lo, next_hi; n_pos < kernels::kAttnMaxPositions && j + n_pos <= last_position;
         ++n_pos) {
      tokens_seeing(j + n_pos, next_lo, next_hi);
      if (next_lo != t_lo || next_hi != t_hi) break;
      v[n_pos] = v_head(slot_of(j + n_pos));
    }
    const int32_t r0 = t_lo * n_heads;
    axpy_rows(&score(j, r0), stride, (t_hi + 1) * n_heads - r0, v, n_pos,
              s.acc.data() + size_t(r0) * size_t(vd), vd, vd);
    j += n_pos;
  }
  for (int32_t t = 0; t < n_tokens; ++t)
    for (int32_t g = 0; g < n_heads; ++g) {
      const float* acc = s.acc.data() + size_t(t * n_heads + g) * size_t(vd);
      std::copy(acc, acc + vd, out + t * out_stride + int64_t(first_head + g) * vd);
    }
}

void attention_one_token(const KvCache& cache, int32_t layer, const AttentionParams& p,
                         const float* q, int32_t position, const int32_t* block_table, float* out,
                         AttentionScratch& scratch) {
  const int64_t q_stride = int64_t(p.n_head) * p.head_dim;
  const int64_t out_stride = int64_t(p.n_head) * p.v_dim();
  for (int32_t kv_head = 0; kv_head < p.n_head_kv; ++kv_head)
    attention_kv_group(cache, layer, p, kv_head * p.group(), p.group(), q, q_stride, 1, position,
                       block_table, out, out_stride, scratch);
}

}  // namespace vela

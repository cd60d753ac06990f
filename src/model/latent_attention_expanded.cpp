// Latent attention's expanded form (latent_attention.h): one span's tokens against the cache rows
// of every position up to its last, a key block of kKeyBlock positions at a time.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/attention_kernels.h"
#include "model/latent_attention.h"
#include "model/pass_parallel.h"

namespace vela {

void LatentAttentionMixer::run_expanded(const LatentAttentionWeights& w, const LatentSpan& span,
                                        const KvCache& cache, int32_t kv_layer,
                                        Projector& projector, ThreadPool& pool, int64_t min_work,
                                        float* out) {
  const int32_t H = config_.n_head;
  const int64_t nope = m_.nope_dim, rope = m_.rope_dim, kd = m_.key_dim();
  const int64_t lora = m_.kv_lora_rank, cd = m_.cache_dim(), vd = m_.v_head_dim;
  const int32_t bs = cache.config().block_size;
  const int32_t n = span.n_tokens, pos0 = span.first_position;
  const int32_t n_keys = pos0 + n;
  const kernels::AttentionRowKernels& kern = kernels::attention_row_kernels();
  const kernels::AttnDotRowsFn dot_rows = kern.dot_rows_for(kernels::AttnRowType::kF32);
  const kernels::AttnAxpyRowsFn axpy_rows = kern.axpy_rows_for(kernels::AttnRowType::kF32);
  constexpr int32_t kMaxPos = kernels::kAttnMaxPositions;
  const int64_t q_stride = int64_t(H) * kd, out_stride = int64_t(H) * vd;
  // Head-major copies, so that a task's rows are next to each other: its queries and its
  // accumulators, in head_out_ (whose per-head products come after this).
  float* q_heads = head_out_.data();           // [H, n, kd] rotated queries
  float* acc = q_heads + int64_t(H) * n * kd;  // [H, n, vd] the accumulators
  assert(size_t(H) * size_t(n) * size_t(kd + vd) <= head_out_.size());
  float* row_max = row_max_.data();   // [H, n]
  double* row_sum = row_sum_.data();  // [H, n]
  parallel_ranges(pool, n, H * kd, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int32_t h = 0; h < H; ++h)
        std::copy_n(q_.data() + (span.first + t) * q_stride + h * kd, kd,
                    q_heads + (h * n + t) * kd);
  });
  std::fill(acc, acc + int64_t(H) * n * vd, 0.0f);
  std::fill(row_max, row_max + int64_t(n) * H, -INFINITY);
  std::fill(row_sum, row_sum + int64_t(n) * H, 0.0);
  const int32_t n_tiles = (n + kExpandedTile - 1) / kExpandedTile;

  for (int32_t j0 = 0; j0 < n_keys; j0 += kKeyBlock) {
    const int32_t nb = std::min(kKeyBlock, n_keys - j0);
    // The block's cache rows as f32, their c_kv side by side for the products.
    parallel_ranges(pool, nb, cd, min_work, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t j = j0 + int32_t(i);
        const int64_t slot = int64_t(span.block_table[j / bs * span.table_stride]) * bs + j % bs;
        float* row = cache_rows_.data() + i * cd;
        cache.read(kv_layer, slot, row, nullptr);
        std::copy_n(row, lora, latents_.data() + i * lora);
      }
    });
    // Each head's nope key and value of every row of the block.
    projector.project(latents_.data(), nb, {{&w.k_b_t, k_nope_.data()}, {&w.v_b, values_.data()}});
    parallel_ranges(pool, nb, H * kd, min_work, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int32_t h = 0; h < H; ++h) {
          float* key = keys_.data() + (i * H + h) * kd;
          std::copy_n(k_nope_.data() + (i * H + h) * nope, nope, key);
          std::copy_n(cache_rows_.data() + i * cd + lora, rope, key + nope);
        }
    });

    // Tasks: (head, tile of kExpandedTile tokens). A token at position pos0 + t sees the block's
    // first min(nb, pos0 + t - j0 + 1) keys; a tile none of whose tokens sees the block is skipped.
    const auto task = [&](int64_t i, int32_t thread) {
      const int32_t h = int32_t(i % H);
      const int32_t t0 = int32_t(i / H) * kExpandedTile;
      const int32_t rows = std::min(kExpandedTile, n - t0);
      if (pos0 + t0 + rows - 1 < j0) return;
      float* scores = block_scores_.data() + size_t(thread) * kExpandedTile * kScoreStride;
      const float* qh = q_heads + (int64_t(h) * n + t0) * kd;
      const void* rows_of[kMaxPos];
      for (int32_t p0 = 0; p0 < nb; p0 += kMaxPos) {
        const int32_t n_pos = std::min(kMaxPos, nb - p0);
        for (int32_t p = 0; p < n_pos; ++p)
          rows_of[p] = keys_.data() + (int64_t(p0 + p) * H + h) * kd;
        dot_rows(qh, kd, rows, rows_of, n_pos, int32_t(kd), m_.scale, scores + p0, kScoreStride);
      }
      // Each row's online-softmax step: the new maximum, the accumulator and sum rescaled to
      // it, the block's weights exp(score - max) (0 past the row's last visible key).
      for (int32_t r = 0; r < rows; ++r) {
        const int32_t t = t0 + r;
        float* s = scores + r * kScoreStride;
        const int32_t visible = std::clamp(pos0 + t - j0 + 1, 0, nb);
        std::fill(s + visible, s + nb, 0.0f);
        if (visible == 0) continue;
        const int64_t row = int64_t(h) * n + t;
        const float old_max = row_max[row];
        const double block_sum = kern.softmax_step(s, visible, &row_max[row]);
        if (row_max[row] > old_max && row_sum[row] > 0.0) {
          const float factor = std::exp(old_max - row_max[row]);
          row_sum[row] *= double(factor);
          float* a = acc + row * vd;
          for (int64_t c = 0; c < vd; ++c) a[c] *= factor;
        }
        row_sum[row] += block_sum;
      }
      for (int32_t p0 = 0; p0 < nb; p0 += kMaxPos) {
        const int32_t n_pos = std::min(kMaxPos, nb - p0);
        for (int32_t p = 0; p < n_pos; ++p)
          rows_of[p] = values_.data() + int64_t(p0 + p) * out_stride + int64_t(h) * vd;
        axpy_rows(scores + p0, kScoreStride, rows, rows_of, n_pos, acc + (int64_t(h) * n + t0) * vd,
                  vd, int32_t(vd));
      }
    };
    const int64_t n_tasks = int64_t(H) * n_tiles;
    if (pool.n_threads() > 1 && int64_t(n) * nb * H * (kd + vd) >= min_work) {
      pool.parallel_for(n_tasks, task);
    } else {
      for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
    }
  }
  // out[t, h] = acc[h, t] / its softmax denominator
  parallel_ranges(pool, n, H * vd, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int32_t h = 0; h < H; ++h) {
        const int64_t row = int64_t(h) * n + t;
        const float inv = float(1.0 / row_sum[row]);
        const float* a = acc + row * vd;
        float* o = out + (span.first + t) * out_stride + h * vd;
        for (int64_t c = 0; c < vd; ++c) o[c] = a[c] * inv;
      }
  });
}

}  // namespace vela

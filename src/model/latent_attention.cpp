#include "model/latent_attention.h"

#include <algorithm>
#include <cassert>

#include "model/layer_ops.h"
#include "model/pass_parallel.h"
#include "model/rope.h"

namespace vela {

namespace {

size_t align64(size_t bytes) {
  return (bytes + 63) / 64 * 64;
}

}  // namespace

LatentAttentionMixer::LatentAttentionMixer(const ModelConfig& config, int32_t max_tokens,
                                           int32_t n_threads, int32_t expanded_min_tokens)
    : config_(config),
      m_(config.mla),
      max_tokens_(max_tokens),
      split_(config.n_head),
      expanded_min_tokens_(expanded_min_tokens) {
  const size_t T = size_t(max_tokens), H = size_t(config.n_head);
  q_lora_.resize(T * size_t(m_.q_lora_rank));
  q_.resize(T * H * size_t(m_.key_dim()));
  row_.resize(T * size_t(m_.cache_dim()));
  q_absorbed_.resize(T * H * size_t(m_.cache_dim()));
  latent_.resize(T * H * size_t(m_.kv_lora_rank));
  head_in_.resize(H * T * size_t(std::max(m_.nope_dim, m_.kv_lora_rank)));
  // The per-head products' outputs; the expanded form's head-major queries and accumulators.
  const int32_t expanded_floats = expanded_min_tokens > 0 ? m_.key_dim() + m_.v_head_dim : 0;
  head_out_.resize(H * T * size_t(std::max({m_.kv_lora_rank, m_.v_head_dim, expanded_floats})));
  acts_.resize(H);
  absorbed_row_.resize(T);
  if (expanded_min_tokens_ > 0) {
    const size_t B = size_t(kKeyBlock);
    cache_rows_.resize(B * size_t(m_.cache_dim()));
    latents_.resize(B * size_t(m_.kv_lora_rank));
    k_nope_.resize(B * H * size_t(m_.nope_dim));
    keys_.resize(B * H * size_t(m_.key_dim()));
    values_.resize(B * H * size_t(m_.v_head_dim));
    row_max_.resize(T * H);
    row_sum_.resize(T * H);
    block_scores_.resize(size_t(n_threads) * size_t(kExpandedTile) * size_t(kScoreStride));
  }
}

bool LatentAttentionMixer::takes_expanded_form(int32_t n_tokens, int32_t first_position) const {
  if (expanded_min_tokens_ <= 0) return false;
  const int64_t n = n_tokens, p = first_position;
  return (2 * p + n) * n >= 2 * int64_t(expanded_min_tokens_) * (p + n);
}

void LatentAttentionMixer::reserve(const LatentAttentionWeights& w) {
  size_t bytes = 0;
  for (const WeightMatrix* m : {&w.k_b, &w.v_b})
    bytes = std::max(bytes,
                     size_t(config_.n_head) *
                         align64(matmul_scratch_bytes(m->type, m->n_cols, max_tokens_, m->layout)));
  act_.reserve(bytes);
}

void LatentAttentionMixer::per_head(const WeightMatrix& stack, int64_t rows, const float* x,
                                    int64_t T, float* y, ThreadPool& pool, int64_t min_work,
                                    int64_t min_parallel_work) {
  const int32_t H = config_.n_head;
  const int64_t cols = stack.n_cols;
  const size_t head_bytes = align64(matmul_scratch_bytes(stack.type, cols, T, stack.layout));
  assert(size_t(H) * head_bytes <= act_.capacity());  // reserve() sized it for max_tokens
  for (int32_t h = 0; h < H; ++h)
    acts_[size_t(h)] = prepare_activations_in(stack.type, x + h * T * cols, cols, T,
                                              act_.data() + size_t(h) * head_bytes, stack.layout);
  parallel_ranges(pool, int64_t(H) * T, cols * 4, min_work, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {  // rows of one head at a time
      const int64_t h = r / T, end = std::min(r1, (h + 1) * T);
      convert_activations_in(acts_[size_t(h)], x + h * T * cols, cols, r - h * T, end - h * T,
                             act_.data() + size_t(h) * head_bytes);
      r = end;
    }
  });
  split_.clear();
  for (int32_t h = 0; h < H; ++h) {
    const WeightMatrix wh = weight_rows(stack, h * rows, rows);
    split_.add(wh.type, wh.data, rows, cols, acts_[size_t(h)], T, y + h * T * rows, wh.layout);
  }
  run_matmul_split(split_, pool, min_parallel_work);
}

void LatentAttentionMixer::run(const LatentAttentionWeights& w, const float* xn, int64_t T,
                               const float* rope_cs, const int64_t* slots,
                               std::span<const LatentSpan> spans, KvCache& cache, int32_t kv_layer,
                               Projector& projector, ThreadPool& pool, int64_t min_work,
                               int64_t min_parallel_work, const Attend& attend, float* out) {
  const int32_t H = config_.n_head;
  const int64_t nope = m_.nope_dim, rope = m_.rope_dim, kd = m_.key_dim();
  const int64_t lora = m_.kv_lora_rank, cd = m_.cache_dim(), vd = m_.v_head_dim;
  const float eps = config_.rms_eps;

  if (m_.q_lora_rank > 0) {
    const int64_t ql = m_.q_lora_rank;
    projector.project(xn, T, {{&w.q_a, q_lora_.data()}, {&w.kv_a, row_.data()}});
    parallel_ranges(pool, T, ql, min_work, [&](int64_t t0, int64_t t1) {
      rms_norm(q_lora_.data() + t0 * ql, w.q_a_norm.data(), t1 - t0, ql, eps,
               q_lora_.data() + t0 * ql);
    });
    projector.project(q_lora_.data(), T, {{&w.q_b, q_.data()}});
  } else {
    projector.project(xn, T, {{&w.q, q_.data()}, {&w.kv_a, row_.data()}});
  }

  // The absorbed form's tokens, in batch order: n_absorbed rows of the per-head products.
  int64_t n_absorbed = 0;
  for (const LatentSpan& span : spans) {
    // The expanded form's products are not the ones an observer is to see.
    assert(!span.expanded || (projector.observer() == nullptr && w.k_b_t.data != nullptr &&
                              expanded_min_tokens_ > 0));
    for (int64_t t = span.first; t < span.first + span.n_tokens; ++t)
      absorbed_row_[size_t(t)] = span.expanded ? -1 : int32_t(n_absorbed++);
  }
  const int64_t A = n_absorbed;

  // Per token: the cache row (c_kv normalised, k_pe rotated) into its slot; the rope part of each
  // head's query rotated (into the absorbed query, for an absorbed token), the nope part of an
  // absorbed token's gathered head-major.
  parallel_ranges(pool, T, H * kd + cd, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* cs = rope_cs + t * rope;  // [rope / 2, 2]
      float* row = row_.data() + t * cd;
      rms_norm(row, w.kv_a_norm.data(), 1, lora, eps, row);
      rope_apply(row + lora, 1, 1, int32_t(rope), int32_t(rope), config_.rope_style, cs);
      // All of the batch's rows go in before any attention, so a token can attend to earlier
      // tokens of its own chunk; each token writes only its own slot.
      cache.write(kv_layer, slots[t], row, nullptr);
      float* q = q_.data() + t * H * kd;
      rope_apply(q + nope, 1, H, int32_t(kd), int32_t(rope), config_.rope_style, cs);
      const int64_t a = absorbed_row_[size_t(t)];
      if (a < 0) continue;
      for (int32_t h = 0; h < H; ++h) {
        std::copy_n(q + h * kd, nope, head_in_.data() + (h * A + a) * nope);
        std::copy_n(q + h * kd + nope, rope, q_absorbed_.data() + (t * H + h) * cd + lora);
      }
    }
  });
  for (const LatentSpan& span : spans)
    if (span.expanded) run_expanded(w, span, cache, kv_layer, projector, pool, min_work, out);
  if (A == 0) return;

  // The pass's observer sees each head's matrix with its input rows x_h: [A, stack.n_cols].
  const auto observe_heads = [&](const WeightMatrix& stack, int64_t rows, const float* x) {
    if (ActivationObserver* observer = projector.observer())
      for (int32_t h = 0; h < H; ++h)
        observer->observe(weight_rows(stack, h * rows, rows), x + h * A * stack.n_cols, A);
  };
  // q_absorbed[t, h, :lora] = attn_k_b[h] q_nope[t, h]
  observe_heads(w.k_b, lora, head_in_.data());
  per_head(w.k_b, lora, head_in_.data(), A, head_out_.data(), pool, min_work, min_parallel_work);
  parallel_ranges(pool, T, H * lora, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      if (const int64_t a = absorbed_row_[size_t(t)]; a >= 0)
        for (int32_t h = 0; h < H; ++h)
          std::copy_n(head_out_.data() + (h * A + a) * lora, lora,
                      q_absorbed_.data() + (t * H + h) * cd);
  });

  AttentionParams p;
  p.n_head = H;
  p.n_head_kv = 1;
  p.head_dim = int32_t(cd);
  p.scale = m_.scale;
  p.value_dim = int32_t(lora);
  attend(p, q_absorbed_.data(), latent_.data());

  // out[t, h] = attn_v_b[h] latent[t, h]
  parallel_ranges(pool, T, H * lora, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      if (const int64_t a = absorbed_row_[size_t(t)]; a >= 0)
        for (int32_t h = 0; h < H; ++h)
          std::copy_n(latent_.data() + (t * H + h) * lora, lora,
                      head_in_.data() + (h * A + a) * lora);
  });
  observe_heads(w.v_b, vd, head_in_.data());
  per_head(w.v_b, vd, head_in_.data(), A, head_out_.data(), pool, min_work, min_parallel_work);
  parallel_ranges(pool, T, H * vd, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      if (const int64_t a = absorbed_row_[size_t(t)]; a >= 0)
        for (int32_t h = 0; h < H; ++h)
          std::copy_n(head_out_.data() + (h * A + a) * vd, vd, out + (t * H + h) * vd);
  });
}

}  // namespace vela

#include "model/gated_deltanet.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/delta_rule_kernels.h"
#include "model/layer_ops.h"
#include "model/pass_parallel.h"

namespace vela {

namespace {

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// x / max(|x|, eps).  x: [n]
void l2_normalize(float* x, int32_t n, float eps) {
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  const float scale = 1.0f / std::max(std::sqrt(float(sum)), eps);
  for (int32_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

GatedDeltaNetMixer::GatedDeltaNetMixer(const ModelConfig& config, int32_t max_tokens,
                                       int32_t n_threads)
    : config_(config), d_(config.delta_net) {
  const size_t T = size_t(max_tokens);
  qkv_.resize(T * size_t(d_.conv_channels()));
  conv_.resize(T * size_t(d_.conv_channels()));
  z_.resize(T * size_t(d_.value_dim()));
  beta_.resize(T * size_t(d_.n_v_heads));
  g_.resize(T * size_t(d_.n_v_heads));
  o_.resize(T * size_t(d_.value_dim()));
  scratch_.reserve(size_t(n_threads));
  for (int32_t i = 0; i < n_threads; ++i) scratch_.emplace_back(d_.head_k_dim, d_.head_v_dim);
}

const float* GatedDeltaNetMixer::run(std::span<const SequenceSpan> spans,
                                     std::span<const StateCheckpointWrite> checkpoints,
                                     KvCache& cache, const DeltaNetWeights& w, int32_t state_layer,
                                     const float* xn, int64_t T, Projector& projector,
                                     ThreadPool& pool, int64_t min_work) {
  const int64_t C = d_.conv_channels();
  const int32_t K = d_.conv_kernel;
  const int32_t n_v = d_.n_v_heads, n_k = d_.n_k_heads;
  const int32_t dk = d_.head_k_dim, dv = d_.head_v_dim;
  const int64_t key_dim = d_.key_dim(), value_dim = d_.value_dim();
  const float eps = config_.rms_eps;

  projector.project(xn, T,
                    {{&w.qkv, qkv_.data()},
                     {&w.gate, z_.data()},
                     {&w.beta, beta_.data()},
                     {&w.alpha, g_.data()}});

  // A sequence that starts here starts from a zero state.
  for (const SequenceSpan& s : spans)
    if (s.position == 0)
      std::fill_n(cache.state(state_layer, s.state_slot), d_.state_floats(), 0.0f);

  // Causal convolution per (span, block of channels), over the span's rows of the input
  // extended by the K - 1 carried ones: output row t = sum over taps j of tap row j times input
  // row t + j, channel by channel (contiguous, so the loops vectorize), then SiLU.
  constexpr int64_t kChannelBlock = 256;
  static const std::array<float, kChannelBlock> kOnes = [] {
    std::array<float, kChannelBlock> ones;
    ones.fill(1.0f);
    return ones;
  }();
  const int64_t n_blocks = (C + kChannelBlock - 1) / kChannelBlock;
  const int64_t n_conv = int64_t(spans.size()) * n_blocks;
  parallel_ranges(pool, n_conv, 4 * K * kChannelBlock, min_work, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const SequenceSpan& s = spans[size_t(i / n_blocks)];
      const int64_t c0 = i % n_blocks * kChannelBlock;
      const int64_t n_c = std::min(kChannelBlock, C - c0);
      float* carried = cache.state(state_layer, s.state_slot) + c0;  // [K - 1, C]
      const auto input = [&](int64_t r) -> const float* {            // row r of the extended input
        return r < K - 1 ? carried + r * C : qkv_.data() + (s.first + r - (K - 1)) * C + c0;
      };
      for (int64_t t = 0; t < s.n_tokens; ++t) {
        float* y = conv_.data() + (s.first + t) * C + c0;
        std::fill_n(y, n_c, 0.0f);
        for (int32_t j = 0; j < K; ++j) {
          const float* tap = w.conv.data() + int64_t(j) * C + c0;  // [n_c]
          const float* x = input(t + j);
          for (int64_t c = 0; c < n_c; ++c) y[c] += tap[c] * x[c];
        }
        silu_mul(y, kOnes.data(), n_c);  // silu(y) * 1: the vectorized SiLU
      }
      for (int32_t k = s.first_checkpoint; k < s.first_checkpoint + s.n_checkpoints; ++k) {
        const StateCheckpointWrite& cp = checkpoints[size_t(k)];
        float* saved = cache.state(state_layer, cp.slot) + c0;
        const int64_t end = cp.position - s.position;  // the inputs before this one
        for (int32_t j = 0; j < K - 1; ++j) std::copy_n(input(end + j), n_c, saved + j * C);
      }
      // The last K - 1 inputs carried on; row j moves up from row n_tokens + j >= j, so rows
      // read from the old carried ones are read before they are overwritten.
      for (int32_t j = 0; j < K - 1; ++j) {
        const float* src = input(s.n_tokens + j);
        if (src != carried + int64_t(j) * C) std::copy_n(src, n_c, carried + int64_t(j) * C);
      }
    }
  });

  // Per token: q and k normalised per key head, the decay and the write strength.
  parallel_ranges(pool, T, C, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = conv_.data() + t * C;
      for (int32_t h = 0; h < 2 * n_k; ++h) l2_normalize(row + int64_t(h) * dk, dk, eps);
      for (int32_t h = 0; h < n_v; ++h) {
        float& g = g_[size_t(t * n_v + h)];
        g = softplus(g + w.dt_bias[size_t(h)]) * w.a[size_t(h)];
        float& beta = beta_[size_t(t * n_v + h)];
        beta = sigmoid(beta);
      }
    }
  });

  // The delta rule per (span, value head).
  const int64_t n_tasks = int64_t(spans.size()) * n_v;
  const auto task = [&](int64_t i, int32_t thread) {
    const SequenceSpan& s = spans[size_t(i / n_v)];
    const int32_t h = int32_t(i % n_v);
    const int32_t kh = d_.key_head_of(h);
    const int64_t first = s.first;
    float* state = cache.state(state_layer, s.state_slot) + d_.conv_state_floats() +
                   int64_t(h) * dv * dk;  // [dv, dk]
    DeltaRuleHead head;
    head.q = conv_.data() + first * C + int64_t(kh) * dk;
    head.k = conv_.data() + first * C + key_dim + int64_t(kh) * dk;
    head.v = conv_.data() + first * C + 2 * key_dim + int64_t(h) * dv;
    head.q_stride = head.k_stride = head.v_stride = C;
    head.g = g_.data() + first * n_v + h;
    head.beta = beta_.data() + first * n_v + h;
    head.gb_stride = n_v;
    head.out = o_.data() + first * value_dim + int64_t(h) * dv;
    head.out_stride = value_dim;
    head.state = state;
    const int64_t head_offset = d_.conv_state_floats() + int64_t(h) * dv * dk;
    // A short span (a decode, a verification) in one recurrent run that saves each checkpoint
    // on the way (a level may keep the state's rows in registers across it), unless two
    // checkpoints follow the same token or one precedes the first.
    if (s.n_tokens < kDeltaChunkMinTokens) {
      float* saves[kDeltaChunkMinTokens] = {};  // after token t: where its state goes, or null
      bool one_each = true;
      for (int32_t c = s.first_checkpoint; c < s.first_checkpoint + s.n_checkpoints; ++c) {
        const int32_t after = checkpoints[size_t(c)].position - s.position - 1;
        if (after < 0 || after >= s.n_tokens || saves[after] != nullptr) {
          one_each = false;
          break;
        }
        saves[after] = cache.state(state_layer, checkpoints[size_t(c)].slot) + head_offset;
      }
      if (one_each) {
        delta_rule_recurrent(head, s.n_tokens, dk, dv, saves);
        return;
      }
    }
    int32_t next_checkpoint = s.first_checkpoint;
    for (int32_t t = 0; t < s.n_tokens;) {
      // Up to the next multiple of kDeltaChunk positions, or the next checkpoint.
      const int32_t pos = s.position + t;
      int32_t end = std::min(s.n_tokens, (pos / kDeltaChunk + 1) * kDeltaChunk - s.position);
      const bool at_checkpoint = next_checkpoint < s.first_checkpoint + s.n_checkpoints &&
                                 checkpoints[size_t(next_checkpoint)].position - s.position <= end;
      if (at_checkpoint) end = checkpoints[size_t(next_checkpoint)].position - s.position;
      DeltaRuleHead piece = head;
      piece.q += t * C;
      piece.k += t * C;
      piece.v += t * C;
      piece.g += t * n_v;
      piece.beta += t * n_v;
      piece.out += t * value_dim;
      if (end - t >= kDeltaChunkMinTokens)
        delta_rule_chunked(piece, end - t, dk, dv, scratch_[size_t(thread)]);
      else
        delta_rule_recurrent(piece, end - t, dk, dv);
      // Every checkpoint at this position (a prefix checkpoint and a speculative one may meet).
      while (at_checkpoint && next_checkpoint < s.first_checkpoint + s.n_checkpoints &&
             checkpoints[size_t(next_checkpoint)].position - s.position == end) {
        const StateCheckpointWrite& cp = checkpoints[size_t(next_checkpoint++)];
        kernels::delta_rule_kernels().save_state(cache.state(state_layer, cp.slot) + head_offset,
                                                 state, int64_t(dv) * dk);
      }
      t = end;
    }
  };
  const int64_t rule_work = T * n_v * int64_t(dk) * dv * 4;
  if (pool.n_threads() > 1 && n_tasks > 1 && rule_work >= min_work) {
    pool.parallel_for(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
  }

  // The gated norm: rms_norm(o) * ssm_norm * silu(z), per value head, into z_.
  parallel_ranges(pool, T, value_dim * 4, min_work, [&](int64_t t0, int64_t t1) {
    const int64_t n = t1 - t0;
    float* o = o_.data() + t0 * value_dim;
    rms_norm(o, w.norm.data(), n * n_v, dv, eps, o);
    silu_mul(z_.data() + t0 * value_dim, o, n * value_dim);
  });
  return z_.data();
}

}  // namespace vela

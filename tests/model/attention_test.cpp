// Attention over the paged KV cache against a plain scalar formula in double: with and without
// per-head sink logits (gpt-oss), global and windowed, one to four tokens per call, for every
// cache type; and a call's result does not depend on how the tokens and heads are split.
#include "model/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 64, kPositions = 40, kBlockSize = 16;

struct CacheFixture {
  KvCache cache;
  std::vector<int32_t> block_table;  // [kPositions / kBlockSize + 1], blocks in reverse order
  std::vector<float> q;              // [kPositions, kHeads * kHeadDim]
  std::vector<float> sinks;          // [kHeads]

  explicit CacheFixture(KvType type)
      : cache(KvCacheConfig{1, kKvHeads, kHeadDim, kBlockSize, 4, type}),
        block_table{3, 1, 2},
        q(size_t(kPositions) * kHeads * kHeadDim),
        sinks{0.5f, -1.0f, 3.0f, 1.5f} {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> k(size_t(kKvHeads) * kHeadDim), v(k.size());
    for (int32_t p = 0; p < kPositions; ++p) {
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      cache.write(0, slot(p), k.data(), v.data());
    }
    for (float& x : q) x = normal(rng) * 0.5f;
  }
  int64_t slot(int32_t p) const {
    return int64_t(block_table[size_t(p / kBlockSize)]) * kBlockSize + p % kBlockSize;
  }
};

// out[h, :] of the token at `position` in double from the cache's decoded rows: the query (and
// the probabilities) rounded to f16 for an f16 cache, as the attention contract says.
std::vector<double> reference_token(const CacheFixture& s, KvType type, const AttentionParams& p,
                                    int32_t position) {
  std::vector<double> out(size_t(kHeads) * kHeadDim, 0.0);
  std::vector<float> k(size_t(kKvHeads) * kHeadDim), v(k.size());
  const int32_t first = p.sliding_window > 0 ? std::max(0, position - p.sliding_window + 1) : 0;
  for (int32_t h = 0; h < kHeads; ++h) {
    const int32_t kv = h / p.group();
    const float* qh = s.q.data() + (size_t(position) * kHeads + size_t(h)) * kHeadDim;
    std::vector<double> score;
    for (int32_t j = first; j <= position; ++j) {
      s.cache.read(0, s.slot(j), k.data(), v.data());
      double dot = 0;
      for (int32_t i = 0; i < kHeadDim; ++i) {
        const float qi = type == KvType::kF16 ? fp16_to_fp32(fp32_to_fp16(qh[i])) : qh[i];
        dot += double(qi) * double(k[size_t(kv * kHeadDim + i)]);
      }
      score.push_back(dot * p.scale);
    }
    double max = *std::max_element(score.begin(), score.end());
    if (p.sinks != nullptr) max = std::max(max, double(p.sinks[h]));
    double sum = p.sinks != nullptr ? std::exp(double(p.sinks[h]) - max) : 0.0;
    for (double x : score) sum += std::exp(x - max);
    for (int32_t j = first; j <= position; ++j) {
      s.cache.read(0, s.slot(j), k.data(), v.data());
      const double w = std::exp(score[size_t(j - first)] - max) / sum;
      for (int32_t i = 0; i < kHeadDim; ++i)
        out[size_t(h * kHeadDim + i)] += w * double(v[size_t(kv * kHeadDim + i)]);
    }
  }
  return out;
}

// Every head of tokens [first_position, first_position + n_tokens) in calls of n_tokens tokens
// and heads_per_call query heads. out: [kPositions, kHeads * kHeadDim]
void run_calls(const CacheFixture& s, const AttentionParams& p, int32_t n_tokens,
               int32_t heads_per_call, std::vector<float>& out) {
  AttentionScratch scratch(kPositions, p);
  const int64_t stride = int64_t(kHeads) * kHeadDim;
  for (int32_t pos = 0; pos < kPositions; pos += n_tokens) {
    const int32_t n = std::min(n_tokens, kPositions - pos);
    for (int32_t h = 0; h < kHeads; h += heads_per_call)
      attention_kv_group(s.cache, 0, p, h, heads_per_call, s.q.data() + pos * stride, stride, n,
                         pos, s.block_table.data(), out.data() + pos * stride, stride, scratch);
  }
}

class AttentionFormula : public ::testing::TestWithParam<KvType> {};

TEST_P(AttentionFormula, SinksAndWindowsMatchTheScalarFormula) {
  const KvType type = GetParam();
  const CacheFixture s(type);
  // f32 and q8_0 (rows decoded exactly, f32 arithmetic): float rounding of sums of 64 and 40
  // terms, ~1e-6. f16: each probability rounded to f16 (2^-11 relative) over up to 40 values of
  // |v| ~ 1: a few 1e-4; 2e-3 leaves room without hiding a missing sink (whose share here is
  // 0.5% to 50% of a head's weight).
  const double tolerance = type == KvType::kF16 ? 2e-3 : 1e-5;
  for (bool with_sinks : {false, true})
    for (int32_t window : {0, 7}) {
      AttentionParams p{kHeads, kKvHeads, kHeadDim, window, 1.0f / std::sqrt(float(kHeadDim))};
      if (with_sinks) p.sinks = s.sinks.data();
      for (int32_t n_tokens : {1, 3, kAttentionMaxTokens}) {
        std::vector<float> out(s.q.size(), -9.0f);
        run_calls(s, p, n_tokens, p.group(), out);
        double worst = 0;
        for (int32_t pos = 0; pos < kPositions; ++pos) {
          const std::vector<double> want = reference_token(s, type, p, pos);
          for (size_t i = 0; i < want.size(); ++i)
            worst =
                std::max(worst, std::fabs(double(out[size_t(pos) * want.size() + i]) - want[i]));
        }
        EXPECT_LE(worst, tolerance)
            << "sinks " << with_sinks << " window " << window << " tokens per call " << n_tokens;
      }
    }
}

// The sinks take weight away from the values: with a sink far above every score, a head's output
// nearly vanishes; with one far below, it is the plain softmax's (up to the SIMD softmax's
// grouping of one more element: a few ulp, which an f16 cache's rounded probabilities may turn
// into one f16 step of a probability).
TEST_P(AttentionFormula, SinkExtremes) {
  const KvType type = GetParam();
  const CacheFixture s(type);
  AttentionParams plain{kHeads, kKvHeads, kHeadDim, 0, 1.0f / std::sqrt(float(kHeadDim))};
  std::vector<float> base(s.q.size()), out(s.q.size());
  run_calls(s, plain, 2, plain.group(), base);
  const std::vector<float> low(kHeads, -1e4f), high(kHeads, 50.0f);
  AttentionParams p = plain;
  p.sinks = low.data();
  run_calls(s, p, 2, p.group(), out);
  const double tolerance = type == KvType::kF16 ? 2e-3 : 2e-6;
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], base[i], tolerance * (1.0 + std::fabs(base[i]))) << i;
  p.sinks = high.data();
  run_calls(s, p, 2, p.group(), out);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(std::fabs(out[i]), 1e-6) << i;
}

// The same (token, head) result whatever shares its call: tokens per call and heads per call.
TEST_P(AttentionFormula, SplitsDoNotChangeResults) {
  const CacheFixture s(GetParam());
  for (int32_t window : {0, 5}) {
    AttentionParams p{kHeads, kKvHeads, kHeadDim, window, 0.125f};
    p.sinks = s.sinks.data();
    std::vector<float> one(s.q.size()), many(s.q.size()), single_heads(s.q.size());
    run_calls(s, p, 1, p.group(), one);
    run_calls(s, p, kAttentionMaxTokens, p.group(), many);
    run_calls(s, p, 3, 1, single_heads);
    EXPECT_EQ(one, many) << "window " << window;
    EXPECT_EQ(one, single_heads) << "window " << window;
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionFormula,
                         ::testing::Values(KvType::kF32, KvType::kF16, KvType::kBF16,
                                           KvType::kQ8_0),
                         [](const auto& info) { return std::string(kv_type_name(info.param)); });

}  // namespace
}  // namespace vela

// The gated delta rule: the recurrence against the header's formula evaluated directly, and the
// chunked form against the recurrence across chunk boundaries, partial chunks and split calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/gated_delta_rule.h"

namespace vela {
namespace {

// Bounds on the difference of the chunked form from the recurrence, both in f32 (unit roundoff
// u = 6e-8). Outputs: max|chunked - recurrent| over a token's row / max|recurrent| of that row.
// Each output sums ~d_k + 64 rounded products whose magnitudes can exceed the row's by some
// cancellation, and both forms carry the state's own rounding from token to token: measured
// over ~1000 random heads of these shapes (n up to 512) the worst row reached 1.1e-5, typical
// 1e-6 to 3e-6, and each form is as far from a double evaluation as from the other (the chunked
// form is not biased). State: max|difference| / max|state|, measured at most 7e-7. The bounds
// keep ~3x and ~7x margin over those and stay far below what a perturbed token gives (the
// negative controls below: 2.7e-3 to 1e-2, i.e. 90x the output bound and more).
constexpr double kOutBound = 3e-5;
constexpr double kStateBound = 5e-6;

// One head's inputs; rows are padded past the head dims so that the strides are exercised.
struct HeadData {
  int32_t n = 0, d_k = 0, d_v = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, gb_stride = 2, out_stride = 0;
  std::vector<float> q, k, v, g, beta, state;  // state [d_v, d_k] as the header stores it
};

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// q and k L2-normalised; g = -A softplus(x) as Qwen3.5 computes it (A = exp(A_log)), clamped to
// [-3, 0), with one token in five near 0 (slow decay); beta = sigmoid(x); a nonzero state.
HeadData make_head(int32_t n, int32_t d_k, int32_t d_v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  HeadData d;
  d.n = n;
  d.d_k = d_k;
  d.d_v = d_v;
  d.q_stride = d_k + 3;
  d.k_stride = d_k + 5;
  d.v_stride = d_v + 1;
  d.out_stride = d_v + 7;
  d.q.assign(size_t(n * d.q_stride), 0.0f);
  d.k.assign(size_t(n * d.k_stride), 0.0f);
  d.v.assign(size_t(n * d.v_stride), 0.0f);
  d.g.assign(size_t(n * d.gb_stride), 0.0f);
  d.beta.assign(size_t(n * d.gb_stride), 0.0f);
  auto unit = [&](float* x) {
    double ss = 0.0;
    for (int32_t i = 0; i < d_k; ++i) {
      x[i] = normal(rng);
      ss += double(x[i]) * x[i];
    }
    const float inv = float(1.0 / std::sqrt(ss));
    for (int32_t i = 0; i < d_k; ++i) x[i] *= inv;
  };
  for (int32_t t = 0; t < n; ++t) {
    unit(&d.q[size_t(t * d.q_stride)]);
    unit(&d.k[size_t(t * d.k_stride)]);
    for (int32_t j = 0; j < d_v; ++j) d.v[size_t(t * d.v_stride + j)] = normal(rng);
    const float a = std::exp(-4.0f + 4.5f * uni(rng));  // A in [0.018, 1.65]
    float g = -std::min(3.0f, a * softplus(1.5f * normal(rng)));
    if (uni(rng) < 0.2f) g = -1e-3f * uni(rng);
    d.g[size_t(t * d.gb_stride)] = g;
    d.beta[size_t(t * d.gb_stride)] = 1.0f / (1.0f + std::exp(-1.5f * normal(rng)));
  }
  d.state.resize(size_t(d_k * d_v));
  for (float& x : d.state) x = 0.5f * normal(rng);
  return d;
}

// Outputs [n, out_stride] (padding left at a sentinel) and the final state.
struct Result {
  std::vector<float> out, state;
};
constexpr float kSentinel = 1234.5f;

DeltaRuleHead bind(const HeadData& d, int32_t t0, Result& r) {
  DeltaRuleHead h;
  h.q = d.q.data() + t0 * d.q_stride;
  h.k = d.k.data() + t0 * d.k_stride;
  h.v = d.v.data() + t0 * d.v_stride;
  h.g = d.g.data() + t0 * d.gb_stride;
  h.beta = d.beta.data() + t0 * d.gb_stride;
  h.q_stride = d.q_stride;
  h.k_stride = d.k_stride;
  h.v_stride = d.v_stride;
  h.gb_stride = d.gb_stride;
  h.out = r.out.data() + t0 * d.out_stride;
  h.out_stride = d.out_stride;
  h.state = r.state.data();
  return h;
}

Result fresh(const HeadData& d) {
  return Result{std::vector<float>(size_t(d.n * d.out_stride), kSentinel), d.state};
}

Result run_recurrent(const HeadData& d) {
  Result r = fresh(d);
  delta_rule_recurrent(bind(d, 0, r), d.n, d.d_k, d.d_v);
  return r;
}

// The chunked form over consecutive calls of the given lengths (summing to n), state carried.
Result run_chunked(const HeadData& d, const std::vector<int32_t>& calls) {
  Result r = fresh(d);
  DeltaChunkScratch scratch(d.d_k, d.d_v);
  int32_t t0 = 0;
  for (int32_t len : calls) {
    delta_rule_chunked(bind(d, t0, r), len, d.d_k, d.d_v, scratch);
    t0 += len;
  }
  EXPECT_EQ(t0, d.n);
  return r;
}

// max|a - ref| / max|ref| over n rows of width w at the given stride.
double rel_diff(const float* a, const float* ref, int32_t n, int32_t w, int64_t stride) {
  double diff = 0.0, mag = 0.0;
  for (int32_t t = 0; t < n; ++t)
    for (int32_t j = 0; j < w; ++j) {
      diff = std::max(diff, std::fabs(double(a[t * stride + j]) - ref[t * stride + j]));
      mag = std::max(mag, std::fabs(double(ref[t * stride + j])));
    }
  return diff / std::max(mag, 1e-30);
}

// The largest per-token output difference (each token's row against its own magnitude) and the
// final state's, of a against ref.
struct Diffs {
  double out = 0.0, state = 0.0;
};
Diffs diffs(const HeadData& d, const Result& a, const Result& ref) {
  Diffs r;
  for (int32_t t = 0; t < d.n; ++t)
    r.out = std::max(r.out, rel_diff(&a.out[size_t(t * d.out_stride)],
                                     &ref.out[size_t(t * d.out_stride)], 1, d.d_v, 0));
  r.state = rel_diff(a.state.data(), ref.state.data(), 1, d.d_k * d.d_v, 0);
  return r;
}

void expect_padding_untouched(const HeadData& d, const Result& r) {
  for (int32_t t = 0; t < d.n; ++t)
    for (int64_t j = d.d_v; j < d.out_stride; ++j)
      ASSERT_EQ(r.out[size_t(t * d.out_stride + j)], kSentinel) << "token " << t << " col " << j;
}

const int32_t kTokenCounts[] = {1, 5, 63, 64, 65, 130, 200};

void expect_chunked_equals_recurrence(int32_t d_k, int32_t d_v) {
  for (int32_t n : kTokenCounts) {
    SCOPED_TRACE(testing::Message() << "n " << n << " d_k " << d_k << " d_v " << d_v);
    const HeadData d = make_head(n, d_k, d_v, uint32_t(1000 * n + d_k + 7 * d_v));
    const Result ref = run_recurrent(d);
    const Result got = run_chunked(d, {n});
    expect_padding_untouched(d, got);
    const Diffs e = diffs(d, got, ref);
    EXPECT_LE(e.out, kOutBound);
    EXPECT_LE(e.state, kStateBound);
  }
}

TEST(GatedDeltaRule, ChunkedEqualsRecurrenceDk32) {
  expect_chunked_equals_recurrence(32, 32);
}
TEST(GatedDeltaRule, ChunkedEqualsRecurrenceDk64) {
  expect_chunked_equals_recurrence(64, 64);
}
TEST(GatedDeltaRule, ChunkedEqualsRecurrenceDk128) {
  expect_chunked_equals_recurrence(128, 128);
}
// d_k != d_v, and dims that are not multiples of 8 (the scalar column tails).
TEST(GatedDeltaRule, ChunkedEqualsRecurrenceUnequalAndOddDims) {
  expect_chunked_equals_recurrence(64, 128);
  expect_chunked_equals_recurrence(20, 44);
}

// Calls of any lengths with the state carried give what one call gives: chunks restart at each
// call's first token, so the split changes only the rounding.
TEST(GatedDeltaRule, ChunkedSplitCallsEqualOneCall) {
  const HeadData d = make_head(100, 128, 128, 42);
  const Result one = run_chunked(d, {100});
  const Result ref = run_recurrent(d);
  for (const std::vector<int32_t>& calls :
       std::vector<std::vector<int32_t>>{{37, 63}, {64, 36}, {1, 99}, {50, 1, 49}}) {
    SCOPED_TRACE(testing::Message() << "first call " << calls[0] << " of " << calls.size());
    const Result split = run_chunked(d, calls);
    const Diffs vs_one = diffs(d, split, one);
    EXPECT_LE(vs_one.out, kOutBound);
    EXPECT_LE(vs_one.state, kStateBound);
    const Diffs vs_ref = diffs(d, split, ref);
    EXPECT_LE(vs_ref.out, kOutBound);
    EXPECT_LE(vs_ref.state, kStateBound);
  }
}

// The comparison has teeth: the chunked form on inputs with one token's beta lowered by 1e-2
// differs from the recurrence on the originals by far more than the bounds, in the outputs from
// that token on and (the token being late enough for its trace to outlast the decay) in the final
// state, while the outputs before it stay within the bound. Token 70 sits inside the second
// chunk, 127 is the last token of a full chunk.
TEST(GatedDeltaRule, PerturbedBetaExceedsTheBound) {
  const HeadData d = make_head(130, 128, 128, 7);
  const Result ref = run_recurrent(d);
  const int64_t os = d.out_stride;
  for (int32_t t_bad : {70, 127}) {
    SCOPED_TRACE(testing::Message() << "perturbed token " << t_bad);
    HeadData p = d;
    p.beta[size_t(t_bad * p.gb_stride)] -= 1e-2f;
    const Result got = run_chunked(p, {130});
    EXPECT_LE(rel_diff(got.out.data(), ref.out.data(), t_bad, d.d_v, os), kOutBound);
    EXPECT_GT(rel_diff(&got.out[size_t(t_bad * os)], &ref.out[size_t(t_bad * os)], d.n - t_bad,
                       d.d_v, os),
              20 * kOutBound);
    if (t_bad == 127) {
      EXPECT_GT(diffs(d, got, ref).state, 20 * kStateBound);
    }
  }
}

// A decay applied wrongly at a chunk start (g of token 128, the first of the partial chunk,
// lowered by 0.01) is caught in the outputs and the final state.
TEST(GatedDeltaRule, PerturbedDecayAtChunkStartExceedsTheBound) {
  const HeadData d = make_head(130, 64, 64, 8);
  const Result ref = run_recurrent(d);
  HeadData p = d;
  p.g[size_t(128 * p.gb_stride)] -= 0.01f;
  const Diffs e = diffs(d, run_chunked(p, {130}), ref);
  EXPECT_GT(e.out, 20 * kOutBound);
  EXPECT_GT(e.state, 20 * kStateBound);
}

// The recurrence against the header's formula in double with S a plain [d_k][d_v] matrix:
//   S <- exp(g) S;  S <- S + k (beta (v - S^T k))^T;  o = S^T q / sqrt(d_k).
// The f32 recurrence rounds dot products of length d_k = 32 over a few state updates: its error
// against the double evaluation measured at most 5e-7 (8 u) relative to the magnitudes; the
// bound 2e-6 keeps 4x margin.
TEST(GatedDeltaRule, RecurrenceMatchesTheFormula) {
  const int32_t n = 6, d_k = 32, d_v = 24;
  const HeadData d = make_head(n, d_k, d_v, 3);
  const Result got = run_recurrent(d);
  const size_t nk = size_t(d_k), nv = size_t(d_v);
  std::vector<std::vector<double>> S(nk, std::vector<double>(nv));
  for (int32_t i = 0; i < d_k; ++i)
    for (int32_t j = 0; j < d_v; ++j) S[size_t(i)][size_t(j)] = d.state[size_t(j * d_k + i)];
  for (int32_t t = 0; t < n; ++t) {
    const float* q = &d.q[size_t(t * d.q_stride)];
    const float* k = &d.k[size_t(t * d.k_stride)];
    const float* v = &d.v[size_t(t * d.v_stride)];
    const double decay = std::exp(double(d.g[size_t(t * d.gb_stride)]));
    const double beta = d.beta[size_t(t * d.gb_stride)];
    for (auto& row : S)
      for (double& x : row) x *= decay;
    std::vector<double> delta(nv);
    for (int32_t j = 0; j < d_v; ++j) {
      double stk = 0.0;
      for (int32_t i = 0; i < d_k; ++i) stk += S[size_t(i)][size_t(j)] * k[i];
      delta[size_t(j)] = beta * (v[j] - stk);
    }
    for (int32_t i = 0; i < d_k; ++i)
      for (int32_t j = 0; j < d_v; ++j) S[size_t(i)][size_t(j)] += k[i] * delta[size_t(j)];
    std::vector<float> o(nv);
    for (int32_t j = 0; j < d_v; ++j) {
      double stq = 0.0;
      for (int32_t i = 0; i < d_k; ++i) stq += S[size_t(i)][size_t(j)] * q[i];
      o[size_t(j)] = float(stq / std::sqrt(double(d_k)));
    }
    EXPECT_LE(rel_diff(&got.out[size_t(t * d.out_stride)], o.data(), 1, d_v, 0), 2e-6)
        << "token " << t;
  }
  std::vector<float> s_ref(nk * nv);
  for (int32_t i = 0; i < d_k; ++i)
    for (int32_t j = 0; j < d_v; ++j) s_ref[size_t(j * d_k + i)] = float(S[size_t(i)][size_t(j)]);
  EXPECT_LE(rel_diff(got.state.data(), s_ref.data(), 1, d_k * d_v, 0), 2e-6);
}

}  // namespace
}  // namespace vela

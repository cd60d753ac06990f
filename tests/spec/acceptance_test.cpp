// Acceptance keeps the target distribution. For proposals drawn from a draft distribution q,
// the emitted token's histogram over many fixed-seed trials must match the target p (after
// temperature, top-p, min-p and penalties) by a chi-square test at significance 0.001; the
// same test rejects the histogram of "accept every proposal" (q itself) and that of a rejection
// drawn from p instead of the residual, so it has the power to catch wrong acceptance.
// Deterministic proposals: P(accept) = p(x) and the run stops at the first rejection, a sink that
// ends the sequence ends the run, a row processor sees every row before it is verified.
#include "spec/acceptance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace vela {
namespace {

constexpr int32_t kVocab = 24;
constexpr int kTrials = 40000;

// Upper 0.001 quantile of chi-square with `df` degrees of freedom (Wilson–Hilferty; z = 3.0902).
double chi_square_critical(int df) {
  const double z = 3.0902, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Pearson chi-square of `counts` against probabilities `p`; bins expecting fewer than 5 are
// pooled. Sets `df`. A count where p is 0 makes the statistic infinite.
double chi_square(const std::vector<int>& counts, const std::vector<float>& p, int n, int& df) {
  double stat = 0, pooled_expected = 0, pooled_count = 0;
  int bins = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = double(p[i]) * n;
    if (expected == 0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    if (expected < 5) {
      pooled_expected += expected;
      pooled_count += counts[i];
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++bins;
  }
  if (pooled_expected > 0) {
    stat += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  df = bins - 1;
  return stat;
}

std::vector<float> random_logits(uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> l(kVocab);
  for (float& x : l) x = normal(rng);
  return l;
}

std::vector<float> softmax(const std::vector<float>& l) {
  std::vector<float> p(l.size());
  double z = 0;
  for (float x : l) z += std::exp(double(x));
  for (size_t i = 0; i < l.size(); ++i) p[i] = float(std::exp(double(l[i])) / z);
  return p;
}

struct Setting {
  const char* name;
  SamplingParams params;
};

std::vector<Setting> settings() {
  std::vector<Setting> s(4);
  s[0].name = "temperature 0.8";
  s[0].params.temperature = 0.8f;
  s[1].name = "top_p 0.7";
  s[1].params.temperature = 1.0f;
  s[1].params.top_p = 0.7f;
  s[2].name = "min_p 0.1";
  s[2].params.temperature = 1.2f;
  s[2].params.min_p = 0.1f;
  s[3].name = "top_k 8 with repetition penalty";
  s[3].params.temperature = 1.0f;
  s[3].params.top_k = 8;
  s[3].params.repetition_penalty = 1.5f;
  for (auto& x : s) x.params.seed = 1234;
  return s;
}

TEST(Acceptance, DraftProposalsKeepTheTargetDistribution) {
  const std::vector<float> target_logits = random_logits(7, 1.5f);
  const std::vector<float> q = softmax(random_logits(99, 1.5f));  // the draft's distribution
  std::discrete_distribution<int32_t> draft(q.begin(), q.end());
  for (const Setting& s : settings()) {
    Sampler sampler(s.params, kVocab);
    sampler.set_prompt(std::vector<int32_t>{0, 1, 2, 3});  // penalised tokens
    std::vector<float> p(kVocab), work(kVocab);
    sampler.target_probabilities(target_logits, p);
    std::mt19937_64 proposer(42);
    std::vector<int> emitted(kVocab), proposed(kVocab);
    int accepted = 0;
    for (int t = 0; t < kTrials; ++t) {
      const int32_t x = draft(proposer);
      const RowVerdict v = verify_sampled_proposal(sampler, target_logits, x, q, work);
      ++emitted[size_t(v.token.token)];
      ++proposed[size_t(x)];
      accepted += v.accepted;
      EXPECT_EQ(v.accepted, v.token.token == x);
    }
    int df = 0;
    const double stat = chi_square(emitted, p, kTrials, df);
    ASSERT_GT(df, 0) << s.name;
    EXPECT_LT(stat, chi_square_critical(df)) << s.name << ": emitted tokens do not follow p";
    // Accepting every proposal would emit q: the test must see that as wrong.
    int df_q = 0;
    const double stat_q = chi_square(proposed, p, kTrials, df_q);
    EXPECT_GT(stat_q, chi_square_critical(std::max(df_q, 1))) << s.name;
    // Expected acceptance: sum min(p, q).
    double overlap = 0;
    for (int i = 0; i < kVocab; ++i) overlap += std::min(p[size_t(i)], q[size_t(i)]);
    // A rejection that draws from p instead of the residual max(0, p - q) emits
    // min(p, q) + (1 - overlap) p: as many draws from that must fail the test too.
    std::vector<float> wrong_residual(kVocab);
    for (size_t i = 0; i < size_t(kVocab); ++i)
      wrong_residual[i] = std::min(p[i], q[i]) + float(1 - overlap) * p[i];
    std::discrete_distribution<int32_t> mutated(wrong_residual.begin(), wrong_residual.end());
    std::mt19937_64 mutated_rng(43);
    std::vector<int> mutated_counts(kVocab);
    for (int t = 0; t < kTrials; ++t) ++mutated_counts[size_t(mutated(mutated_rng))];
    int df_m = 0;
    const double stat_m = chi_square(mutated_counts, p, kTrials, df_m);
    EXPECT_GT(stat_m, chi_square_critical(std::max(df_m, 1))) << s.name;
    EXPECT_NEAR(double(accepted) / kTrials, overlap, 0.02) << s.name;
  }
}

// A grammar that rules out some of the draft's proposals: the run is cut before a refused
// proposal, and that row is verified against it (p of it is 0 under the mask, so the row draws
// from the residual max(0, p - q)). The first emitted token then follows p under the mask.
// Drawing the cut row from p instead (the defect this guards against) favours the tokens q
// makes likely: the same test must reject it.
TEST(Acceptance, GrammarRefusedProposalsKeepTheTargetDistribution) {
  const std::vector<float> logits = random_logits(21, 1.5f);
  const std::vector<float> q = softmax(random_logits(77, 1.5f));
  std::discrete_distribution<int32_t> draft(q.begin(), q.end());
  std::vector<uint64_t> allowed((kVocab + 63) / 64, 0);
  for (int32_t t = 0; t < kVocab; ++t)
    if (t % 3 != 0) allowed[size_t(t / 64)] |= uint64_t(1) << (t % 64);  // a third refused
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 8;
  for (const bool fixed : {true, false}) {
    Sampler sampler(params, kVocab);
    sampler.restrict_to(allowed);
    std::vector<float> p(kVocab), work(kVocab), rows(size_t(2) * kVocab);
    sampler.target_probabilities(logits, p);
    std::mt19937_64 proposer(42);
    std::vector<int> first(kVocab);
    const RowProcessor mask = [&](std::span<float>) { sampler.restrict_to(allowed); };
    for (int t = 0; t < kTrials; ++t) {
      const int32_t x = draft(proposer);
      std::copy(logits.begin(), logits.end(), rows.begin());
      std::copy(logits.begin(), logits.end(), rows.begin() + kVocab);
      int32_t emitted = -1;
      const TokenSink sink = [&](const SampledToken& s) {
        if (emitted < 0) emitted = s.token;
        return false;  // the first token is all this test looks at
      };
      if (x % 3 != 0) {
        verify_run(sampler, rows, {&x, 1}, q, work, mask, sink);
      } else if (fixed) {
        verify_run(sampler, std::span<float>(rows).first(kVocab), {}, q, work, mask, sink, x);
      } else {
        verify_run(sampler, std::span<float>(rows).first(kVocab), {}, {}, work, mask, sink);
      }
      ++first[size_t(emitted)];
    }
    int df = 0;
    const double stat = chi_square(first, p, kTrials, df);
    ASSERT_GT(df, 0);
    if (fixed)
      EXPECT_LT(stat, chi_square_critical(df)) << "refused proposals drawn from the residual";
    else
      EXPECT_GT(stat, chi_square_critical(df)) << "a cut row drawn from p must fail the test";
  }
}

TEST(Acceptance, TargetProbabilitiesFollowTheTransforms) {
  const std::vector<float> logits = random_logits(3, 2.0f);
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler g(greedy, kVocab);
  std::vector<float> p(kVocab);
  g.target_probabilities(logits, p);
  int32_t best = 0;
  for (int32_t i = 1; i < kVocab; ++i)
    if (logits[size_t(i)] > logits[size_t(best)]) best = i;
  for (int32_t i = 0; i < kVocab; ++i) EXPECT_EQ(p[size_t(i)], i == best ? 1.0f : 0.0f);

  SamplingParams top_k;
  top_k.temperature = 1.0f;
  top_k.top_k = 3;
  Sampler k3(top_k, kVocab);
  k3.target_probabilities(logits, p);
  int nonzero = 0;
  double sum = 0;
  for (float x : p) {
    nonzero += x > 0;
    sum += x;
  }
  EXPECT_EQ(nonzero, 3);
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(Acceptance, PointProposalsAcceptWithTheTargetProbability) {
  const std::vector<float> logits = random_logits(11, 1.0f);
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 5;
  Sampler sampler(params, kVocab);
  std::vector<float> p(kVocab);
  sampler.target_probabilities(logits, p);
  const int32_t proposal = 4;
  int accepted = 0;
  std::vector<int> emitted(kVocab);
  for (int t = 0; t < kTrials; ++t) {
    const RowVerdict v = verify_point_proposal(sampler, logits, proposal);
    accepted += v.accepted;
    ++emitted[size_t(v.token.token)];
  }
  EXPECT_NEAR(double(accepted) / kTrials, p[proposal], 0.015);
  int df = 0;
  const double stat = chi_square(emitted, p, kTrials, df);
  EXPECT_LT(stat, chi_square_critical(df));
}

TEST(Acceptance, RunStopsAtTheFirstRejectionOrWhenTheSequenceEnds) {
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy, kVocab);
  // Three rows whose argmaxes are 5, 6, 7.
  std::vector<float> rows(size_t(3) * kVocab, 0.0f);
  for (int j = 0; j < 3; ++j) rows[size_t(j) * kVocab + size_t(5 + j)] = 10.0f;
  const std::vector<float> original = rows;
  std::vector<int32_t> got;
  const TokenSink keep = [&](const SampledToken& t) {
    got.push_back(t.token);
    return true;
  };
  // Both proposals right: both accepted, plus the bonus token of the last row.
  RunResult r = verify_run(sampler, rows, std::vector<int32_t>{5, 6}, {}, {}, {}, keep);
  EXPECT_EQ(got, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.n_accepted, 2);
  EXPECT_EQ(r.n_emitted, 3);
  // Second proposal wrong: the target's token replaces it, nothing after.
  got.clear();
  r = verify_run(sampler, rows, std::vector<int32_t>{5, 9}, {}, {}, {}, keep);
  EXPECT_EQ(got, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r.n_accepted, 1);
  // The sink ends the sequence at the first token (a stop): nothing more is emitted.
  got.clear();
  r = verify_run(sampler, rows, std::vector<int32_t>{5, 6}, {}, {}, {}, [&](const SampledToken& t) {
    got.push_back(t.token);
    return false;
  });
  EXPECT_EQ(got, (std::vector<int32_t>{5}));
  EXPECT_TRUE(r.ended);
  // A row processor (a mask) applies before each row is verified: banning token 6 on row 1
  // turns the accepted proposal into a rejection.
  got.clear();
  int calls = 0;
  r = verify_run(
      sampler, rows, std::vector<int32_t>{5, 6}, {}, {},
      [&](std::span<float> row) {
        if (calls++ == 1) row[6] = -INFINITY;
      },
      keep);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r.n_accepted, 1);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[1], 6);
  (void)original;
}

}  // namespace
}  // namespace vela

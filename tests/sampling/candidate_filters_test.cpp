// Top-k / top-p / min-p filters checked exactly, on small hand-made arrays and against a
// full-sort reference on a 150k vocabulary.
#include "sampling/candidate_filters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

namespace vela::sampling {
namespace {

std::vector<Candidate> candidates_from_probs(const std::vector<double>& probs) {
  std::vector<Candidate> out;
  for (size_t i = 0; i < probs.size(); ++i) {
    out.push_back({static_cast<float>(std::log(probs[i])), static_cast<int32_t>(i)});
  }
  return out;
}

std::set<int32_t> tokens_of(std::span<const Candidate> candidates) {
  std::set<int32_t> out;
  for (const Candidate& c : candidates) out.insert(c.token);
  return out;
}

float max_logit_of(std::span<const Candidate> candidates) {
  float m = -INFINITY;
  for (const Candidate& c : candidates) m = std::max(m, c.logit);
  return m;
}

// Logits of a 150k vocabulary: N(0, sd) noise, the spread of real model logits.
std::vector<Candidate> large_vocab(uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, sd);
  std::vector<Candidate> out(150000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = {noise(rng), static_cast<int32_t>(i)};
  return out;
}

TEST(KeepTopK, KeepsTheKBest) {
  auto c = candidates_from_probs({0.1, 0.3, 0.05, 0.4, 0.15});
  const size_t kept = keep_top_k(c, 2);
  ASSERT_EQ(kept, 2u);
  EXPECT_EQ(tokens_of(std::span(c).first(kept)), (std::set<int32_t>{1, 3}));
}

TEST(KeepTopK, TiesGoToLowerIds) {
  std::vector<Candidate> c = {{1.0f, 0}, {2.0f, 1}, {1.0f, 2}, {1.0f, 3}};
  const size_t kept = keep_top_k(c, 3);
  EXPECT_EQ(tokens_of(std::span(c).first(kept)), (std::set<int32_t>{0, 1, 2}));
}

TEST(KeepTopK, DisabledOrLargeKeepsAll) {
  auto c = candidates_from_probs({0.2, 0.3, 0.5});
  EXPECT_EQ(keep_top_k(c, 0), 3u);
  EXPECT_EQ(keep_top_k(c, -1), 3u);
  EXPECT_EQ(keep_top_k(c, 3), 3u);
  EXPECT_EQ(keep_top_k(c, 100), 3u);
}

TEST(KeepTopP, KeepsMinimalNucleus) {
  // Sorted masses 0.4, 0.3, 0.15, 0.1, 0.05 -> cumulative 0.4, 0.7, 0.85, 0.95, 1.
  const std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
  struct Case {
    float top_p;
    std::set<int32_t> expected;
  };
  for (const Case& tc : {Case{0.3f, {1}}, Case{0.5f, {1, 3}}, Case{0.8f, {1, 3, 4}},
                         Case{0.9f, {1, 3, 4, 0}}, Case{0.99f, {1, 3, 4, 0, 2}}}) {
    auto c = candidates_from_probs(probs);
    const size_t kept = keep_top_p(c, tc.top_p, max_logit_of(c));
    ASSERT_EQ(kept, tc.expected.size()) << "top_p=" << tc.top_p;
    EXPECT_EQ(tokens_of(std::span(c).first(kept)), tc.expected) << "top_p=" << tc.top_p;
  }
}

TEST(KeepTopP, OneKeepsAllAndSortsNothing) {
  auto c = candidates_from_probs({0.1, 0.4, 0.5});
  EXPECT_EQ(keep_top_p(c, 1.0f, max_logit_of(c)), 3u);
  EXPECT_EQ(c[0].token, 0);  // untouched order
  EXPECT_EQ(keep_top_p(std::span(c).first(1), 0.1f, c[0].logit), 1u);
}

TEST(KeepTopP, RenormalisesOverGivenCandidates) {
  // After top-k=2 of {0.4, 0.3, ...} the masses are 0.4/0.7 = 0.571 and 0.429: top_p=0.5 keeps
  // one token, whereas with the unrenormalised 0.4 it would keep two.
  auto c = candidates_from_probs({0.4, 0.3, 0.15, 0.1, 0.05});
  const size_t after_k = keep_top_k(c, 2);
  std::span<Candidate> kept(c.data(), after_k);
  EXPECT_EQ(keep_top_p(kept, 0.5f, max_logit_of(kept)), 1u);
  EXPECT_EQ(kept[0].token, 0);
}

// Checks `kept` against a full-sort reference in double precision. The filter sums float
// exponentials (relative error ~1e-6 at 150k terms), so its cut may differ from the exact one
// only where the exact cumulative mass is within kMassTolerance of the target: the kept set must
// be the `kept` most likely candidates, the mass without the last one must fall short of top_p
// and the mass with it must reach it, both up to that tolerance.
constexpr double kMassTolerance = 5e-6;

void expect_nucleus(std::vector<Candidate> original, std::span<const Candidate> kept_candidates,
                    float top_p) {
  std::sort(original.begin(), original.end(), more_likely);
  const double max_logit = original[0].logit;
  std::vector<double> cumulative;
  double total = 0.0;
  for (const Candidate& c : original) cumulative.push_back(total += std::exp(c.logit - max_logit));
  const size_t kept = kept_candidates.size();
  ASSERT_GE(kept, 1u);
  EXPECT_EQ(tokens_of(kept_candidates), tokens_of(std::span(original).first(kept)));
  const double target = top_p * total;
  EXPECT_GE(cumulative[kept - 1], target * (1.0 - kMassTolerance)) << "nucleus too small";
  if (kept >= 2) {
    EXPECT_LT(cumulative[kept - 2], target * (1.0 + kMassTolerance)) << "nucleus not minimal";
  }
}

TEST(KeepTopP, LargeVocabMatchesFullSortReference) {
  // sd 3 and 1 give nuclei from a handful of tokens to over 100k, through both the heap fast
  // path (<= 256 kept) and the bucketed cut.
  for (const float sd : {3.0f, 1.0f}) {
    for (const float top_p : {0.01f, 0.05f, 0.5f, 0.9f, 0.999f}) {
      SCOPED_TRACE(testing::Message() << "sd=" << sd << " top_p=" << top_p);
      const auto original = large_vocab(7, sd);
      auto c = original;
      const size_t kept = keep_top_p(c, top_p, max_logit_of(c));
      expect_nucleus(original, std::span(c).first(kept), top_p);
    }
  }
}

TEST(KeepTopP, BucketBoundaryCases) {
  // Many exact ties straddling the cut: the tie-break by id must decide, inside one bucket.
  std::vector<Candidate> c;
  for (int32_t i = 0; i < 5000; ++i) c.push_back({i < 10 ? 1.0f : 0.0f, i});
  const auto original = c;
  const size_t kept = keep_top_p(c, 0.5f, 1.0f);
  expect_nucleus(original, std::span(c).first(kept), 0.5f);
  // Among the tied 0.0 logits the lowest ids are kept.
  std::set<int32_t> expected;
  for (int32_t i = 0; i < static_cast<int32_t>(kept); ++i) expected.insert(i);
  EXPECT_EQ(tokens_of(std::span(c).first(kept)), expected);

  // -inf logits (masked tokens) land in the catch-all bucket and are never kept unless needed.
  std::vector<Candidate> masked;
  for (int32_t i = 0; i < 3000; ++i) masked.push_back({i % 2 ? -INFINITY : -0.001f * i, i});
  const size_t masked_kept = keep_top_p(masked, 0.999f, 0.0f);
  for (size_t i = 0; i < masked_kept; ++i) EXPECT_EQ(masked[i].token % 2, 0);
}

TEST(KeepTopK, LargeVocabMatchesFullSortReference) {
  auto c = large_vocab(11, 2.0f);
  auto sorted = c;
  std::sort(sorted.begin(), sorted.end(), more_likely);
  const size_t kept = keep_top_k(c, 50);
  ASSERT_EQ(kept, 50u);
  EXPECT_EQ(tokens_of(std::span(c).first(kept)), tokens_of(std::span(sorted).first(50)));
}

TEST(KeepMinP, KeepsTokensAboveFractionOfMax) {
  // p_max = 0.5, min_p = 0.25 -> threshold 0.125: keeps 0.5, 0.2, 0.15.
  auto c = candidates_from_probs({0.1, 0.5, 0.05, 0.2, 0.15});
  const size_t kept = keep_min_p(c, 0.25f, max_logit_of(c));
  ASSERT_EQ(kept, 3u);
  // Stable: input order preserved among the kept.
  EXPECT_EQ(c[0].token, 1);
  EXPECT_EQ(c[1].token, 3);
  EXPECT_EQ(c[2].token, 4);
}

TEST(KeepMinP, ZeroKeepsAllOneKeepsOnlyTheMax) {
  auto c = candidates_from_probs({0.1, 0.5, 0.4});
  EXPECT_EQ(keep_min_p(c, 0.0f, max_logit_of(c)), 3u);
  const size_t kept = keep_min_p(c, 1.0f, max_logit_of(c));
  ASSERT_EQ(kept, 1u);
  EXPECT_EQ(c[0].token, 1);
}

}  // namespace
}  // namespace vela::sampling

// Top-k expert routing against a scalar reference written here: a stable sort of the expert ids
// by logit (so ties go to the lower id), and the softmax in double, over all experts or
// renormalised over the chosen ones. The general routing (sigmoid or softmax scores, a selection
// bias, expert groups, a weight scale) against a reference that sorts groups and experts the
// same way, in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/moe_ffn.h"

namespace vela {
namespace {

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routing route(const std::vector<float>& logits, int32_t k, bool renormalize) {
  Routing r;
  r.ids.assign(size_t(k), -7);
  r.weights.assign(size_t(k), -7.0f);
  route_top_k(logits.data(), int32_t(logits.size()), k, renormalize, r.ids.data(),
              r.weights.data());
  return r;
}

// Expert ids by descending logit, equal logits in ascending id order.
std::vector<int32_t> reference_order(const std::vector<float>& logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  return ids;
}

// softmax over the given experts' logits, in double.
std::vector<double> reference_softmax(const std::vector<float>& logits,
                                      const std::vector<int32_t>& over) {
  double max_logit = -INFINITY;
  for (int32_t e : over) max_logit = std::max(max_logit, double(logits[size_t(e)]));
  double sum = 0;
  for (int32_t e : over) sum += std::exp(double(logits[size_t(e)]) - max_logit);
  std::vector<double> p;
  for (int32_t e : over) p.push_back(std::exp(double(logits[size_t(e)]) - max_logit) / sum);
  return p;
}

// Checks one routing against the reference: the ids exactly, the weights to float rounding.
void expect_matches_reference(const std::vector<float>& logits, int32_t k, bool renormalize) {
  const Routing got = route(logits, k, renormalize);
  std::vector<int32_t> want_ids = reference_order(logits);
  want_ids.resize(size_t(k));
  ASSERT_EQ(got.ids, want_ids);
  std::vector<int32_t> all(logits.size());
  std::iota(all.begin(), all.end(), 0);
  const std::vector<double> p_all = reference_softmax(logits, all);
  const std::vector<double> p_chosen = reference_softmax(logits, want_ids);
  double sum = 0;
  for (int32_t r = 0; r < k; ++r) {
    const float w = got.weights[size_t(r)];
    sum += w;
    if (renormalize) {
      // Each weight is rounded to float (6e-8), their float total carries k - 1 roundings of
      // partial sums <= the total, and the quotient one more: (k + 1) * 6e-8 relative; the
      // bound (k + 2) * 1.2e-7 is over 2x that.
      EXPECT_NEAR(w, p_chosen[size_t(r)], (k + 2) * 1.2e-7 * p_chosen[size_t(r)]) << "rank " << r;
    } else {
      // The probability in double, rounded to float once: within 1.2e-7 relative (1 ulp).
      EXPECT_NEAR(w, p_all[size_t(want_ids[size_t(r)])],
                  1.2e-7 * p_all[size_t(want_ids[size_t(r)])])
          << "rank " << r;
    }
  }
  // Renormalised weights sum to 1 within the same bound (the weights' errors add up to it).
  if (renormalize) {
    EXPECT_NEAR(sum, 1.0, (k + 2) * 1.2e-7);
  }
}

TEST(RouteTopK, RandomLogitsMatchReference) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int32_t n_expert : {4, 8, 60, 128}) {
    for (int32_t k : {1, 2, 4}) {
      for (bool renormalize : {false, true}) {
        SCOPED_TRACE("n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
                     (renormalize ? " renormalized" : ""));
        for (int trial = 0; trial < 20; ++trial) {
          std::vector<float> logits(static_cast<size_t>(n_expert));
          for (float& l : logits) l = normal(rng);
          expect_matches_reference(logits, k, renormalize);
        }
      }
    }
  }
}

TEST(RouteTopK, AllEqualLogitsPickTheLowestIds) {
  const std::vector<float> logits(8, 0.75f);
  const Routing r = route(logits, 3, false);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2}));
  // 1/8 is exact in float and exp(0) = 1: the softmax is exactly 1/8.
  EXPECT_EQ(r.weights, (std::vector<float>{0.125f, 0.125f, 0.125f}));
  const Routing n = route(logits, 3, true);
  EXPECT_EQ(n.ids, (std::vector<int32_t>{0, 1, 2}));
  // Three equal weights renormalise to 1/3 within one rounding of the sum and one of the quotient.
  for (float w : n.weights) EXPECT_NEAR(w, 1.0 / 3.0, 1.2e-7);
}

TEST(RouteTopK, EqualPairsGoLowerIdFirst) {
  // Experts 4 and 5 tie for first, 1, 2 and 7 for third.
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 5.0f, 5.0f, 2.0f, 3.0f};
  EXPECT_EQ(route(logits, 8, false).ids, (std::vector<int32_t>{4, 5, 1, 2, 7, 6, 0, 3}));
  EXPECT_EQ(route(logits, 4, false).ids, (std::vector<int32_t>{4, 5, 1, 2}));
  const Routing r = route(logits, 2, false);
  EXPECT_EQ(r.weights[0], r.weights[1]);  // equal logits, equal weights
  for (bool renormalize : {false, true})
    for (int32_t k = 1; k <= 8; ++k) expect_matches_reference(logits, k, renormalize);
}

TEST(RouteTopK, ManyTiesMatchStableOrder) {
  // Logits drawn from 4 values among 32 experts: every rank boundary is a tie.
  std::mt19937 rng(22);
  std::uniform_int_distribution<int> level(0, 3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(32);
    for (float& l : logits) l = 0.5f * float(level(rng));
    for (int32_t k : {1, 6, 8, 32}) expect_matches_reference(logits, k, trial % 2 == 0);
  }
}

TEST(RouteTopK, KEqualsNExpert) {
  const std::vector<float> logits = {0.3f, -1.0f, 2.5f, 0.3f, 7.0f, -4.0f};
  for (bool renormalize : {false, true}) {
    const Routing r = route(logits, 6, renormalize);
    EXPECT_EQ(r.ids, (std::vector<int32_t>{4, 2, 0, 3, 1, 5}));
    expect_matches_reference(logits, 6, renormalize);
    // With every expert chosen the weights sum to 1 either way: off by the weights' float
    // rounding (6e-8 in all) and, renormalised, the float total's 5 roundings (<= 3e-7) and
    // the quotients' (6e-8): 4e-7.
    double sum = 0;
    for (float w : r.weights) sum += w;
    EXPECT_NEAR(sum, 1.0, 4e-7);
  }
}

TEST(RouteTopK, SameInputSameOutput) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(64);
  for (float& l : logits) l = normal(rng);
  logits[10] = logits[40] = logits[50] = 9.0f;  // a tie at the top as well
  const Routing first = route(logits, 6, true);
  for (int i = 0; i < 10; ++i) {
    const Routing again = route(logits, 6, true);
    EXPECT_EQ(again.ids, first.ids);
    EXPECT_EQ(again.weights, first.weights);  // bit-identical
  }
  EXPECT_EQ(std::vector<int32_t>(first.ids.begin(), first.ids.begin() + 3),
            (std::vector<int32_t>{10, 40, 50}));
}

TEST(RouteTopK, LargeLogitsDoNotOverflow) {
  // exp(1e4) overflows float and double alike; the softmax must subtract the maximum first.
  const std::vector<float> near = {1e4f, 9999.0f, -1e4f, 9995.0f, 1e4f};
  const std::vector<float> extreme = {1e4f, -3e38f, 3e38f, 0.0f};  // differences beyond float
  for (const std::vector<float>* logits : {&near, &extreme})
    for (bool renormalize : {false, true})
      for (int32_t k = 1; k <= int32_t(logits->size()); ++k) {
        const Routing r = route(*logits, k, renormalize);
        for (float w : r.weights) EXPECT_TRUE(std::isfinite(w)) << w;
        expect_matches_reference(*logits, k, renormalize);
      }
  const Routing m = route(near, 3, false);
  EXPECT_EQ(m.ids, (std::vector<int32_t>{0, 4, 1}));
  for (float w : m.weights) EXPECT_GT(w, 0.0f);  // e^-1 / (2 + e^-1 + e^-5): nothing underflows
  const std::vector<float> big(4, 1e4f);
  EXPECT_EQ(route(big, 2, false).weights, (std::vector<float>{0.25f, 0.25f}));  // exp(0) / 4
}

// The general routing in double: scores, biased selection scores, groups ranked by the sum of
// their two best selection scores (stable: ties to the lower group), the k best experts of the
// kept groups (ties to the lower id), weights from the unbiased scores.
Routing reference_routing(const std::vector<float>& logits, const std::vector<float>& bias,
                          int32_t k, const ExpertRouting& r) {
  const size_t n = logits.size();
  std::vector<double> score(n), choose(n);
  if (r.gating == ExpertGating::kSigmoid) {
    for (size_t e = 0; e < n; ++e) score[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  } else {
    std::vector<int32_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    score = reference_softmax(logits, all);
  }
  // The engine adds the bias in float; so does the reference, to compare choices exactly.
  for (size_t e = 0; e < n; ++e)
    choose[e] = double(float(score[e]) + (bias.empty() ? 0.0f : bias[e]));
  std::vector<int32_t> candidates;
  const size_t per_group = n / size_t(r.n_groups);
  std::vector<int32_t> groups(size_t(r.n_groups));
  std::iota(groups.begin(), groups.end(), 0);
  std::vector<double> group_score(size_t(r.n_groups));
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<double> members(choose.begin() + long(g * per_group),
                                choose.begin() + long((g + 1) * per_group));
    std::sort(members.rbegin(), members.rend());
    group_score[g] = r.n_groups > 1 ? members[0] + members[1] : 0.0;
  }
  std::stable_sort(groups.begin(), groups.end(), [&](int32_t a, int32_t b) {
    return group_score[size_t(a)] > group_score[size_t(b)];
  });
  for (int32_t i = 0; i < r.n_groups_used; ++i)
    for (size_t e = 0; e < per_group; ++e)
      candidates.push_back(int32_t(size_t(groups[size_t(i)]) * per_group + e));
  std::sort(candidates.begin(), candidates.end());
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int32_t a, int32_t b) { return choose[size_t(a)] > choose[size_t(b)]; });
  Routing out;
  out.ids.assign(candidates.begin(), candidates.begin() + k);
  double total = 0;
  for (int32_t id : out.ids) total += score[size_t(id)];
  for (int32_t id : out.ids)
    out.weights.push_back(float(score[size_t(id)] / (r.renormalize ? total : 1.0) * r.scale));
  return out;
}

Routing route_general(const std::vector<float>& logits, const std::vector<float>& bias, int32_t k,
                      const ExpertRouting& r) {
  Routing out;
  out.ids.assign(size_t(k), -7);
  out.weights.assign(size_t(k), -7.0f);
  route_experts(logits.data(), int32_t(logits.size()), k, r, bias.empty() ? nullptr : bias.data(),
                out.ids.data(), out.weights.data());
  return out;
}

TEST(RouteExperts, SigmoidBiasAndGroupsMatchReference) {
  std::mt19937 rng(24);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::normal_distribution<float> small(0.0f, 0.3f);
  struct Shape {
    int32_t n_expert, n_groups, n_groups_used, k;
  };
  for (const Shape sh : {Shape{8, 4, 2, 2}, Shape{8, 1, 1, 2}, Shape{64, 8, 4, 6},
                         Shape{256, 8, 4, 8}, Shape{16, 4, 1, 2}, Shape{16, 4, 4, 5}}) {
    for (ExpertGating gating : {ExpertGating::kSigmoid, ExpertGating::kSoftmax}) {
      for (bool renormalize : {false, true}) {
        for (bool with_bias : {false, true}) {
          const ExpertRouting r{gating, renormalize, 2.5f, sh.n_groups, sh.n_groups_used};
          SCOPED_TRACE("n_expert " + std::to_string(sh.n_expert) + " groups " +
                       std::to_string(sh.n_groups) + "/" + std::to_string(sh.n_groups_used) +
                       " k " + std::to_string(sh.k) +
                       (gating == ExpertGating::kSigmoid ? " sigmoid" : " softmax") +
                       (renormalize ? " renormalized" : "") + (with_bias ? " biased" : ""));
          for (int trial = 0; trial < 20; ++trial) {
            std::vector<float> logits(size_t(sh.n_expert)), bias;
            for (float& l : logits) l = normal(rng);
            if (with_bias)
              for (int32_t e = 0; e < sh.n_expert; ++e) bias.push_back(small(rng));
            const Routing got = route_general(logits, bias, sh.k, r);
            const Routing want = reference_routing(logits, bias, sh.k, r);
            ASSERT_EQ(got.ids, want.ids);
            // Scores within an ulp or two of double's; renormalised, the float total's k - 1
            // roundings and the quotient's; the scale's product one more.
            for (int32_t i = 0; i < sh.k; ++i)
              EXPECT_NEAR(got.weights[size_t(i)], want.weights[size_t(i)],
                          (sh.k + 4) * 1.2e-7 * want.weights[size_t(i)])
                  << "rank " << i;
          }
        }
      }
    }
  }
}

TEST(RouteExperts, BiasChoosesButDoesNotWeigh) {
  // Expert 3 has the lowest score, but a bias that puts it first; its weight is its own score.
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 5.0f};
  const ExpertRouting r{ExpertGating::kSigmoid, false, 1.0f, 1, 1};
  const Routing got = route_general(logits, bias, 2, r);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{3, 0}));
  EXPECT_FLOAT_EQ(got.weights[0], float(1.0 / (1.0 + std::exp(1.0))));
  EXPECT_FLOAT_EQ(got.weights[1], float(1.0 / (1.0 + std::exp(-2.0))));
  // Without the bias, the two highest scores.
  EXPECT_EQ(route_general(logits, {}, 2, r).ids, (std::vector<int32_t>{0, 1}));
}

TEST(RouteExperts, GroupsRankByTheirTwoBestScores) {
  // Group 0 holds the single best expert (sigmoid 0.95, 0.05: sum 1.0), group 1 two good ones
  // (0.73 each: sum 1.46). With one group kept, the best expert is not chosen.
  const std::vector<float> logits = {3.0f, -3.0f, 1.0f, 1.0f};
  const ExpertRouting one_group{ExpertGating::kSigmoid, true, 2.5f, 2, 1};
  const Routing got = route_general(logits, {}, 1, one_group);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{2}));  // a tie with expert 3: the lower id
  EXPECT_FLOAT_EQ(got.weights[0], 2.5f);          // renormalised to 1, times the scale
  const ExpertRouting both_groups{ExpertGating::kSigmoid, true, 2.5f, 2, 2};
  EXPECT_EQ(route_general(logits, {}, 3, both_groups).ids, (std::vector<int32_t>{0, 2, 3}));
  // A bias moves a group: expert 1's lifts group 0 above group 1.
  const std::vector<float> bias = {0.0f, 0.5f, 0.0f, 0.0f};
  EXPECT_EQ(route_general(logits, bias, 1, one_group).ids, (std::vector<int32_t>{0}));
}

TEST(RouteExperts, PlainSoftmaxIsRouteTopKBitForBit) {
  std::mt19937 rng(25);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (bool renormalize : {false, true}) {
    const ExpertRouting r{ExpertGating::kSoftmax, renormalize, 1.0f, 1, 1};
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> logits(60);
      for (float& l : logits) l = normal(rng);
      const Routing a = route(logits, 4, renormalize);
      const Routing b = route_general(logits, {}, 4, r);
      EXPECT_EQ(a.ids, b.ids);
      EXPECT_EQ(a.weights, b.weights);
    }
  }
}

// gpt-oss: the k highest logits (ties: the lower id), weighed by the softmax over those k alone,
// in double here.
TEST(RouteExperts, SoftmaxOfChosenMatchesReference) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const ExpertRouting r{ExpertGating::kSoftmaxOfChosen, false, 1.0f, 1, 1};
  for (int32_t k : {1, 2, 4}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> logits(32);
      for (float& l : logits) l = normal(rng);
      if (trial % 5 == 0) logits[7] = logits[3];  // a tie now and then
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
      order.resize(size_t(k));
      double sum = 0;
      for (int32_t id : order)
        sum += std::exp(double(logits[size_t(id)] - logits[size_t(order[0])]));
      const Routing got = route_general(logits, {}, k, r);
      ASSERT_EQ(got.ids, order) << "k " << k << " trial " << trial;
      for (int32_t i = 0; i < k; ++i) {
        const double want =
            std::exp(double(logits[size_t(order[size_t(i)])] - logits[size_t(order[0])])) / sum;
        EXPECT_NEAR(got.weights[size_t(i)], want, 1e-6) << "k " << k << " rank " << i;
      }
    }
  }
  // Two chosen logits 1 apart: weights e/(1+e) and 1/(1+e), whatever the unchosen logits are
  // (a softmax over all experts would give less).
  const Routing two = route_general({5.0f, 0.0f, 4.0f, 3.9f}, {}, 2, r);
  EXPECT_EQ(two.ids, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(two.weights[0], std::exp(1.0) / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(two.weights[1], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
  // Large logits do not overflow: the max is subtracted.
  const Routing big = route_general({1e4f, 1e4f, -1e4f}, {}, 2, r);
  EXPECT_EQ(big.weights, (std::vector<float>{0.5f, 0.5f}));
}

}  // namespace
}  // namespace vela

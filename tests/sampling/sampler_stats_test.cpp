// Statistical checks of the Sampler's output distribution, with fixed seeds.
//
// Bound used throughout: with N draws the count of token i is Binomial(N, p_i), so its
// frequency f_i has standard deviation sqrt(p_i (1 - p_i) / N). We require
// |f_i - p_i| <= 5 * that sd for every kept token (a correct sampler exceeds it with
// probability ~5.7e-7 per token, i.e. < 1e-5 for these <= 10-token vocabularies, whatever the
// seed), and f_i == 0 exactly for every filtered-out token. With N = 20000 and the p_i used
// here (>= ~0.003, so N p_i >= 50) 5 sd is at most 0.018, far below the gaps between the right
// distribution and the plausible wrong ones (e.g. not renormalising: 0.4 vs 0.47).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/sampler.h"

namespace vela {
namespace {

constexpr int kDraws = 20000;

std::vector<double> softmax(const std::vector<double>& logits) {
  double max = logits[0];
  for (const double x : logits) max = std::max(max, x);
  double sum = 0.0;
  for (const double x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  for (const double x : logits) out.push_back(std::exp(x - max) / sum);
  return out;
}

// Renormalises `probs` over `kept` tokens (the rest become 0).
std::vector<double> restricted(const std::vector<double>& probs, const std::vector<int>& kept) {
  std::vector<double> out(probs.size(), 0.0);
  double sum = 0.0;
  for (const int k : kept) sum += probs[k];
  for (const int k : kept) out[k] = probs[k] / sum;
  return out;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

std::vector<float> logits_of_probs(const std::vector<double>& probs) {
  std::vector<float> out;
  for (const double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::vector<double> frequencies(const SamplingParams& params, const std::vector<float>& logits) {
  Sampler sampler(params, static_cast<int32_t>(logits.size()));
  std::vector<double> counts(logits.size(), 0.0);
  for (int i = 0; i < kDraws; ++i) counts[sampler.sample(logits).token] += 1.0;
  for (double& c : counts) c /= kDraws;
  return counts;
}

void expect_matches(const std::vector<double>& observed, const std::vector<double>& expected) {
  ASSERT_EQ(observed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(observed[i], 0.0) << "token " << i << " must be filtered out";
      continue;
    }
    const double sd = std::sqrt(expected[i] * (1.0 - expected[i]) / kDraws);
    EXPECT_NEAR(observed[i], expected[i], 5.0 * sd) << "token " << i;
  }
}

SamplingParams seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

TEST(SamplerStats, TemperatureOneMatchesSoftmax) {
  const std::vector<double> logits = {1.0, 2.0, 0.5, -1.0, 0.0, 1.5};
  expect_matches(frequencies(seeded(1), to_float(logits)), softmax(logits));
}

double entropy(const std::vector<double>& p) {
  double h = 0.0;
  for (const double x : p) h -= x > 0.0 ? x * std::log(x) : 0.0;
  return h;
}

TEST(SamplerStats, TemperatureScalesDistributionAndEntropy) {
  const std::vector<double> logits = {1.0, 2.0, 0.5, -1.0, 0.0, 1.5};
  double previous_entropy = 0.0;
  for (const double temperature : {0.5, 1.0, 2.0}) {
    std::vector<double> scaled;
    for (const double x : logits) scaled.push_back(x / temperature);
    const std::vector<double> expected = softmax(scaled);
    SamplingParams p = seeded(2);
    p.temperature = static_cast<float>(temperature);
    const std::vector<double> observed = frequencies(p, to_float(logits));
    expect_matches(observed, expected);

    // Plug-in entropy: by the delta method its sd is sqrt(Var[ln p(X)] / N); its bias is at
    // most (m - 1) / (2N). Allow 5 sd plus the bias.
    const double h = entropy(expected);
    double second_moment = 0.0;
    for (const double x : expected) second_moment += x * std::log(x) * std::log(x);
    const double sd = std::sqrt((second_moment - h * h) / kDraws);
    const double bias = (expected.size() - 1) / (2.0 * kDraws);
    EXPECT_NEAR(entropy(observed), h, 5.0 * sd + bias) << "T=" << temperature;
    EXPECT_GT(h, previous_entropy + 0.1) << "hotter must be flatter, T=" << temperature;
    previous_entropy = h;
  }
}

TEST(SamplerStats, TopKSupportIsExactlyTheKBest) {
  const std::vector<double> logits = {0.3, 1.2, -0.4, 0.9, 1.0, 0.1, -2.0, 0.8};
  SamplingParams p = seeded(3);
  p.top_k = 3;
  // The three best are tokens 1 (1.2), 4 (1.0), 3 (0.9).
  expect_matches(frequencies(p, to_float(logits)), restricted(softmax(logits), {1, 4, 3}));
}

TEST(SamplerStats, TopPKeepsMinimalNucleus) {
  // Sorted 0.4, 0.3, 0.15, 0.1, 0.05: cumulative 0.7 < 0.8 <= 0.85, so the nucleus is the top
  // three; 0.1 and 0.05 never appear and the three are renormalised by 0.85.
  const std::vector<double> probs = {0.1, 0.3, 0.05, 0.4, 0.15};
  SamplingParams p = seeded(4);
  p.top_p = 0.8f;
  expect_matches(frequencies(p, logits_of_probs(probs)), restricted(probs, {3, 1, 4}));
}

TEST(SamplerStats, TopPAppliesToTheTopKRenormalisedDistribution) {
  // top_k = 2 leaves 0.4 and 0.3 -> renormalised 0.571 and 0.429; top_p = 0.5 then keeps only
  // the first. (On the original distribution 0.4 < 0.5 would have kept two.)
  const std::vector<double> probs = {0.4, 0.3, 0.15, 0.1, 0.05};
  SamplingParams p = seeded(5);
  p.top_k = 2;
  p.top_p = 0.5f;
  expect_matches(frequencies(p, logits_of_probs(probs)), restricted(probs, {0}));
  p.top_k = 0;
  expect_matches(frequencies(p, logits_of_probs(probs)), restricted(probs, {0, 1}));
}

TEST(SamplerStats, MinPThreshold) {
  // p_max = 0.5 and min_p = 0.25: tokens below 0.125 (0.1, 0.05) are dropped.
  const std::vector<double> probs = {0.15, 0.5, 0.05, 0.2, 0.1};
  SamplingParams p = seeded(6);
  p.min_p = 0.25f;
  expect_matches(frequencies(p, logits_of_probs(probs)), restricted(probs, {1, 3, 0}));
}

TEST(SamplerStats, MinPAfterTopP) {
  // top_p = 0.9 keeps 0.5, 0.2, 0.15, 0.1 (cumulative 0.95); min_p = 0.25 then drops 0.1.
  const std::vector<double> probs = {0.15, 0.5, 0.05, 0.2, 0.1};
  SamplingParams p = seeded(7);
  p.top_p = 0.9f;
  p.min_p = 0.25f;
  expect_matches(frequencies(p, logits_of_probs(probs)), restricted(probs, {1, 3, 0}));
}

TEST(SamplerStats, PenaltiesThenTemperatureMatchHandComputedDistribution) {
  SamplingParams p = seeded(8);
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = 0.2f;
  p.temperature = 0.5f;
  Sampler sampler(p, 4);
  const std::vector<int32_t> prompt = {1};
  sampler.set_prompt(prompt);
  for (const int32_t token : {0, 0, 3}) sampler.accept(token);

  const std::vector<float> logits = {1.0f, 0.5f, -0.5f, 0.0f};
  // Penalised by hand:
  //   0: output x2: 1.0 / 1.5 - 0.2 * 2 - 0.3 = -1/30
  //   1: prompt:    0.5 / 1.5               =  1/3
  //   2: unseen:                              -0.5
  //   3: output x1: 0.0 * 1.5 - 0.2 - 0.3   = -0.5
  // then divided by the temperature 0.5.
  const std::vector<double> penalised = {-1.0 / 30.0, 1.0 / 3.0, -0.5, -0.5};
  std::vector<double> scaled;
  for (const double x : penalised) scaled.push_back(x / 0.5);

  std::vector<double> observed(4, 0.0);
  for (int i = 0; i < kDraws; ++i) observed[sampler.sample(logits).token] += 1.0 / kDraws;
  expect_matches(observed, softmax(scaled));
}

}  // namespace
}  // namespace vela

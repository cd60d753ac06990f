// Deterministic Sampler behaviour: validation, greedy, seeds, logprobs, large vocabularies.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace vela {
namespace {

SamplingParams params_with(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

std::vector<float> random_logits(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, sd);
  std::vector<float> out(n);
  for (float& x : out) x = noise(rng);
  return out;
}

// log-softmax in double, the reference for reported logprobs.
std::vector<double> log_softmax(const std::vector<float>& logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  for (const float x : logits) out.push_back(x - max - std::log(sum));
  return out;
}

void expect_invalid(const SamplingParams& p, const std::string& parameter) {
  const Status status = Sampler::validate(p);
  ASSERT_FALSE(status.ok()) << parameter;
  EXPECT_NE(status.message().find(parameter), std::string::npos) << status.message();
}

TEST(SamplerValidate, DefaultsAreValid) {
  EXPECT_TRUE(Sampler::validate(SamplingParams{}).ok());
}

TEST(SamplerValidate, AcceptsBoundaryValues) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.top_k = -1;
  p.max_tokens = 0;
  p.logprobs = 20;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  EXPECT_TRUE(Sampler::validate(p).ok());
}

TEST(SamplerValidate, RejectsEachBadParameterByName) {
  auto with = [](auto&& edit) {
    SamplingParams p;
    edit(p);
    return p;
  };
  expect_invalid(with([](auto& p) { p.temperature = -0.1f; }), "temperature");
  expect_invalid(with([](auto& p) { p.temperature = NAN; }), "temperature");
  expect_invalid(with([](auto& p) { p.temperature = INFINITY; }), "temperature");
  expect_invalid(with([](auto& p) { p.top_p = 0.0f; }), "top_p");
  expect_invalid(with([](auto& p) { p.top_p = 1.5f; }), "top_p");
  expect_invalid(with([](auto& p) { p.top_p = NAN; }), "top_p");
  expect_invalid(with([](auto& p) { p.min_p = -0.1f; }), "min_p");
  expect_invalid(with([](auto& p) { p.min_p = 1.1f; }), "min_p");
  expect_invalid(with([](auto& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty");
  expect_invalid(with([](auto& p) { p.repetition_penalty = -1.0f; }), "repetition_penalty");
  expect_invalid(with([](auto& p) { p.presence_penalty = 2.5f; }), "presence_penalty");
  expect_invalid(with([](auto& p) { p.frequency_penalty = -3.0f; }), "frequency_penalty");
  expect_invalid(with([](auto& p) { p.max_tokens = -1; }), "max_tokens");
  expect_invalid(with([](auto& p) { p.logprobs = -1; }), "logprobs");
  expect_invalid(with([](auto& p) { p.logprobs = 21; }), "logprobs");
  expect_invalid(with([](auto& p) { p.stop = {"ok", ""}; }), "stop");
  expect_invalid(with([](auto& p) { p.stop_token_ids = {3, -2}; }), "stop_token_ids");
  expect_invalid(with([](auto& p) { p.n = 0; }), "n");
  expect_invalid(with([](auto& p) { p.min_tokens = -1; }), "min_tokens");
  expect_invalid(with([](auto& p) { p.min_tokens = p.max_tokens + 1; }), "min_tokens");
}

// vLLM's min_tokens: stop_token_ids cannot be drawn until min_tokens tokens were accepted.
TEST(SamplerMinTokens, MasksStopTokensUntilEnoughWereGenerated) {
  SamplingParams p = params_with(0.0f);
  p.max_tokens = 10;
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  Sampler sampler(p, 5);
  const std::vector<float> logits = {0.0f, 1.0f, 0.5f, 9.0f, 0.2f};  // token 3 is the argmax
  for (int i = 0; i < 2; ++i) {
    const SampledToken t = sampler.sample(logits);
    EXPECT_EQ(t.token, 1) << "step " << i;
    // Logprobs stay those of the raw logits.
    EXPECT_NEAR(t.logprob, log_softmax(logits)[1], 1e-5);
    sampler.accept(t.token);
  }
  EXPECT_EQ(sampler.sample(logits).token, 3);
}

// retract() undoes accept(): a draft model's sampler takes its proposals back, and the
// penalties and min_tokens count are again those of the verified tokens alone.
TEST(SamplerRetract, UndoesAcceptForPenaltiesAndMinTokens) {
  SamplingParams p = params_with(1.0f);
  p.max_tokens = 10;
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  p.repetition_penalty = 1.4f;
  p.presence_penalty = 0.7f;
  p.frequency_penalty = 0.3f;
  Sampler sampler(p, 5);
  const std::vector<int32_t> prompt = {1, 2};
  sampler.set_prompt(prompt);
  const std::vector<float> logits = {0.0f, 1.0f, 0.5f, 2.0f, 0.2f};
  std::vector<float> before(5), after(5), changed(5);
  sampler.accept(4);
  sampler.target_probabilities(logits, before);
  for (int32_t t : {1, 4, 4}) sampler.accept(t);
  sampler.target_probabilities(logits, changed);
  EXPECT_NE(changed, before);
  for (int32_t t : {4, 4, 1}) sampler.retract(t);
  sampler.target_probabilities(logits, after);
  EXPECT_EQ(after, before);
  EXPECT_EQ(before[3], 0.0f) << "one output of min_tokens 2: the stop token still masked";
}

// OpenAI's logit_bias: added after the penalties, so it steers the choice; the reported
// logprobs stay those of the raw logits.
TEST(SamplerLogitBias, SteersTheChoiceNotTheLogprobs) {
  SamplingParams p = params_with(0.0f);
  p.logit_bias = {{3, -100.0f}, {0, 2.0f}};  // ban the argmax, lift token 0 over token 1
  Sampler sampler(p, 5);
  const std::vector<float> logits = {0.0f, 1.0f, 0.5f, 9.0f, 0.2f};
  const SampledToken t = sampler.sample(logits);
  EXPECT_EQ(t.token, 0);
  EXPECT_NEAR(t.logprob, log_softmax(logits)[0], 1e-5);
  SamplingParams bad = params_with(0.0f);
  bad.logit_bias = {{1, 101.0f}};
  expect_invalid(bad, "logit_bias");
  bad.logit_bias = {{-1, 1.0f}};
  expect_invalid(bad, "logit_bias");
}

TEST(SamplerValidate, MessageShowsRequirementAndValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(Sampler::validate(p).message(),
            "invalid sampling parameter top_p: must be in (0, 1] (got 1.5)");
  p = SamplingParams{};
  p.logprobs = 21;
  EXPECT_EQ(Sampler::validate(p).message(),
            "invalid sampling parameter logprobs: must be in [0, 20] (got 21)");
}

TEST(SamplerGreedy, PicksArgmaxWithTiesToLowestId) {
  Sampler sampler(params_with(0.0f), 6);
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f, 2.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sampler.sample(logits).token, 1);
}

TEST(SamplerGreedy, IgnoresTruncationFilters) {
  SamplingParams p = params_with(0.0f);
  p.top_k = 1;
  p.top_p = 0.01f;
  p.min_p = 1.0f;
  Sampler sampler(p, 3);
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f};
  EXPECT_EQ(sampler.sample(logits).token, 1);
}

TEST(SamplerGreedy, TinyTemperatureIsGreedy) {
  // Below the 1e-5 epsilon: identical to temperature 0 on every step of a random sequence.
  Sampler exact(params_with(0.0f), 1000);
  Sampler tiny(params_with(1e-6f), 1000);
  EXPECT_TRUE(tiny.is_greedy());
  for (uint32_t step = 0; step < 50; ++step) {
    const auto logits = random_logits(1000, step, 2.0f);
    const int32_t argmax =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(exact.sample(logits).token, argmax);
    EXPECT_EQ(tiny.sample(logits).token, argmax);
  }
}

TEST(SamplerGreedy, SmallTemperatureConvergesToArgmax) {
  // T = 0.01 is sampled, not greedy. With the top logit 0.5 above the rest, every other
  // token has probability <= exp(-0.5 / 0.01) = exp(-50) ~ 2e-22: 1000 draws stay on argmax.
  SamplingParams p = params_with(0.01f);
  p.seed = 1;
  Sampler sampler(p, 5);
  EXPECT_FALSE(sampler.is_greedy());
  const std::vector<float> logits = {1.0f, 1.5f, 0.2f, 1.0f, -3.0f};
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sampler.sample(logits).token, 1);
}

TEST(SamplerGreedy, PenaltiesApplyBeforeArgmax) {
  SamplingParams p = params_with(0.0f);
  p.repetition_penalty = 2.0f;
  Sampler sampler(p, 3);
  const std::vector<float> logits = {3.0f, 2.0f, 0.0f};
  EXPECT_EQ(sampler.sample(logits).token, 0);
  sampler.accept(0);  // 3.0 -> 1.5 < 2.0
  EXPECT_EQ(sampler.sample(logits).token, 1);

  Sampler prompted(p, 3);
  const std::vector<int32_t> prompt = {0};
  prompted.set_prompt(prompt);
  EXPECT_EQ(prompted.sample(logits).token, 1);
}

std::vector<int32_t> draw_sequence(const SamplingParams& p, size_t n) {
  Sampler sampler(p, 50);
  const auto logits = random_logits(50, 3, 1.0f);
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    const int32_t token = sampler.sample(logits).token;
    sampler.accept(token);
    out.push_back(token);
  }
  return out;
}

TEST(SamplerSeed, SameSeedSameSequenceDifferentSeedsDiffer) {
  SamplingParams p;
  p.top_k = 20;
  p.top_p = 0.95f;
  p.presence_penalty = 0.1f;
  p.seed = 1234;
  const auto a = draw_sequence(p, 500);
  const auto b = draw_sequence(p, 500);
  EXPECT_EQ(a, b);
  p.seed = 1235;
  // 500 draws over >= 2 likely tokens: two seeds agreeing everywhere is astronomically unlikely.
  EXPECT_NE(a, draw_sequence(p, 500));
}

TEST(SamplerSeed, UnseededSamplersDiffer) {
  SamplingParams p;
  EXPECT_NE(draw_sequence(p, 200), draw_sequence(p, 200));
}

TEST(SamplerLogprobs, ChosenAndTopAreRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.7f;         // neither temperature...
  p.repetition_penalty = 1.3f;  // ...nor penalties change the reported values
  p.frequency_penalty = 0.5f;
  p.top_k = 10;
  p.logprobs = 5;
  p.seed = 9;
  Sampler sampler(p, 200);
  const std::vector<int32_t> prompt = {1, 2, 3};
  sampler.set_prompt(prompt);
  const auto logits = random_logits(200, 5, 2.0f);
  const auto reference = log_softmax(logits);
  std::vector<int32_t> order(200);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  for (int step = 0; step < 20; ++step) {
    const SampledToken s = sampler.sample(logits);
    sampler.accept(s.token);
    EXPECT_NEAR(s.logprob, reference[s.token], 1e-5);
    ASSERT_EQ(s.top.size(), 5u);
    for (size_t i = 0; i < s.top.size(); ++i) {
      EXPECT_EQ(s.top[i].token, order[i]);
      EXPECT_NEAR(s.top[i].logprob, reference[order[i]], 1e-5);
      if (i > 0) {
        EXPECT_GE(s.top[i - 1].logprob, s.top[i].logprob);
      }
    }
  }
}

TEST(SamplerLogprobs, TopTiesInIdOrderAndOnlyWhenRequested) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f};
  SamplingParams p = params_with(0.0f);
  p.logprobs = 2;
  Sampler with(p, 5);
  const SampledToken s = with.sample(logits);
  ASSERT_EQ(s.top.size(), 2u);
  EXPECT_EQ(s.top[0].token, 1);
  EXPECT_EQ(s.top[1].token, 2);

  p.logprobs = 0;
  Sampler zero(p, 5);
  EXPECT_TRUE(zero.sample(logits).top.empty());
  p.logprobs.reset();
  Sampler none(p, 5);
  const SampledToken plain = none.sample(logits);
  EXPECT_TRUE(plain.top.empty());
  EXPECT_NEAR(plain.logprob, log_softmax(logits)[1], 1e-6);  // still reported
}

TEST(SamplerLogits, NanAndNegativeInfinityAreNeverDrawn) {
  SamplingParams p;
  p.seed = 4;
  Sampler sampler(p, 4);
  const std::vector<float> logits = {NAN, 0.0f, -INFINITY, 0.0f};
  for (int i = 0; i < 2000; ++i) {
    const int32_t token = sampler.sample(logits).token;
    ASSERT_TRUE(token == 1 || token == 3) << token;
  }
}

TEST(SamplerLogits, AllMaskedButOne) {
  SamplingParams p;
  p.top_p = 0.5f;
  p.seed = 4;
  Sampler sampler(p, 1000);
  std::vector<float> logits(1000, -INFINITY);
  logits[777] = -50.0f;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sampler.sample(logits).token, 777);
}

// A superset of the tokens vLLM's pipeline could draw, by full sort in double precision. The
// sampler's float sums put its top-p cut within ~1e-6 of the mass and its min-p threshold within
// float rounding; the slack below (1e-5 of the mass, 1e-4 of a logit) covers both, so any drawn
// token outside this set is a real filtering bug.
std::set<int32_t> reference_support(const std::vector<float>& raw, const SamplingParams& p) {
  std::vector<std::pair<double, int32_t>> c;
  for (size_t i = 0; i < raw.size(); ++i) {
    c.push_back({static_cast<double>(raw[i]) / p.temperature, static_cast<int32_t>(i)});
  }
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(p.top_k);
  const double max = c[0].first;
  double total = 0.0;
  for (auto& x : c) total += std::exp(x.first - max);
  double mass = 0.0;
  for (size_t i = 0; i < c.size() && p.top_p < 1.0f; ++i) {
    mass += std::exp(c[i].first - max);
    if (mass >= p.top_p * total * (1.0 + 1e-5)) {
      c.resize(i + 1);
      break;
    }
  }
  std::set<int32_t> out;
  const double threshold = p.min_p > 0.0f ? max + std::log(p.min_p) - 1e-4 : -INFINITY;
  for (auto& x : c) {
    if (x.first >= threshold) out.insert(x.second);
  }
  return out;
}

TEST(SamplerLargeVocab, DrawsStayInsideReferenceSupport) {
  constexpr int32_t kVocab = 150000;
  const auto logits = random_logits(kVocab, 21, 2.5f);
  struct Config {
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
  };
  for (const Config& cfg :
       {Config{1.0f, 0, 0.9f, 0.0f}, Config{0.8f, 50, 0.95f, 0.0f}, Config{1.0f, 0, 1.0f, 0.3f},
        Config{1.2f, 0, 0.6f, 0.01f}, Config{1.0f, 40, 1.0f, 0.0f}}) {
    SamplingParams p;
    p.temperature = cfg.temperature;
    p.top_k = cfg.top_k;
    p.top_p = cfg.top_p;
    p.min_p = cfg.min_p;
    p.seed = 77;
    p.logprobs = 3;
    const auto support = reference_support(logits, p);
    ASSERT_FALSE(support.empty());
    Sampler sampler(p, kVocab);
    for (int i = 0; i < 30; ++i) {
      const SampledToken s = sampler.sample(logits);
      ASSERT_TRUE(support.count(s.token)) << "token " << s.token << " top_k " << cfg.top_k
                                          << " top_p " << cfg.top_p << " min_p " << cfg.min_p;
      ASSERT_EQ(s.top.size(), 3u);
    }
  }
}

TEST(SamplerLargeVocab, UnfilteredRuns) {
  SamplingParams p;
  p.seed = 5;
  Sampler sampler(p, 150000);
  const auto logits = random_logits(150000, 8, 1.0f);
  std::set<int32_t> seen;
  for (int i = 0; i < 50; ++i) seen.insert(sampler.sample(logits).token);
  // A near-flat 150k distribution: 50 draws are almost surely all distinct.
  EXPECT_GT(seen.size(), 45u);
}

}  // namespace
}  // namespace vela

// The LLM API end to end: greedy generation equals the reference engine's tokens and text,
// streaming, stop strings, max_tokens, seeds, logprobs, and request errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/shared_data.h"
#include "vela/llm.h"

namespace vela {
namespace {

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::unique_ptr<LLM> load(const std::string& model, const std::string& kv = "f16") {
  LLMConfig config;
  config.model_path = test::shared_path("models/" + model).string();
  config.kv_cache_type = kv;
  auto llm = LLM::load(config);
  EXPECT_TRUE(llm.ok()) << llm.message();
  return llm.ok() ? std::move(*llm) : nullptr;
}

SamplingParams greedy(int32_t n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

// Every prompt of the reference: same prompt tokens, same greedy tokens (while margins are
// clear), same text bytes.
TEST(LLM, GreedyGenerationMatchesReference) {
  VELA_REQUIRE_SHARED();
  for (const std::string model : {"aidreams260K", "tiny-llama-gqa", "tiny-qwen2-bpe-F16"}) {
    auto llm = load(model + ".gguf");
    ASSERT_TRUE(llm);
    std::ifstream in(test::shared_path("reference/" + model + ".jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      const auto ref = nlohmann::json::parse(line);
      const std::string prompt = ref["prompt"];
      std::vector<int32_t> ref_tokens;
      std::string ref_text;
      size_t clear_steps = 0;  // leading steps whose top-1/top-2 margin is comfortably large
      bool clear = true;
      for (const auto& s : ref["steps"]) {
        ref_tokens.push_back(s["token"]);
        clear &= s["top"][0][1].get<double>() - s["top"][1][1].get<double>() > 0.05;
        if (clear) ++clear_steps;
        ref_text += unhex(s["piece_hex"]);
      }
      auto out = llm->generate({prompt}, greedy(int32_t(ref_tokens.size())));
      ASSERT_TRUE(out.ok()) << out.message();
      const RequestOutput& r = out->front();
      EXPECT_EQ(r.prompt_token_ids, ref["prompt_tokens"].get<std::vector<int32_t>>()) << model << ": " << prompt;
      ASSERT_GE(r.output.token_ids.size(), clear_steps);
      for (size_t i = 0; i < clear_steps; ++i) EXPECT_EQ(r.output.token_ids[i], ref_tokens[i]) << model << " step " << i;
      if (r.output.token_ids == ref_tokens) {
        EXPECT_EQ(r.output.text, ref_text) << model << ": " << prompt;
      }
    }
  }
}

TEST(LLM, StreamingDeltasConcatenateToTheText) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  std::string streamed;
  int finished = 0;
  auto out = llm->generate({"Once upon a time"}, greedy(40), [&](const StreamDelta& d) {
    streamed += d.text;
    finished += d.finished;
    return true;
  });
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(streamed, out->front().output.text);
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(out->front().output.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out->front().output.token_ids.size(), 40u);
}

TEST(LLM, StopStringEndsGenerationAndIsNotEmitted) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  auto full = llm->generate({"Once upon a time"}, greedy(48));
  ASSERT_TRUE(full.ok());
  const std::string text = full->front().output.text;
  ASSERT_GT(text.size(), 20u);
  // A stop string from the middle of the greedy text (spanning a token boundary most likely).
  const std::string stop = text.substr(10, 5);
  SamplingParams p = greedy(48);
  p.stop = {stop};
  std::string streamed;
  auto out = llm->generate({"Once upon a time"}, p, [&](const StreamDelta& d) {
    streamed += d.text;
    return true;
  });
  ASSERT_TRUE(out.ok());
  const CompletionOutput& o = out->front().output;
  EXPECT_EQ(o.finish_reason, FinishReason::kStop);
  EXPECT_EQ(o.stop_reason, stop);
  EXPECT_EQ(o.text, text.substr(0, text.find(stop)));
  EXPECT_EQ(streamed, o.text);
}

TEST(LLM, SeedReproducibleAndLogprobsConsistent) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.max_tokens = 24;
  p.seed = 1234;
  p.logprobs = 3;
  auto a = llm->generate({"Once upon a time", "The quick brown fox"}, p);
  auto b = llm->generate({"Once upon a time", "The quick brown fox"}, p);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*a)[i].output.token_ids, (*b)[i].output.token_ids);
    const auto& lps = (*a)[i].output.logprobs;
    ASSERT_EQ(lps.size(), (*a)[i].output.token_ids.size());
    for (const TokenLogprobs& lp : lps) {
      EXPECT_LE(lp.logprob, 0.0f);
      ASSERT_EQ(lp.top.size(), 3u);
      EXPECT_GE(lp.top[0].logprob, lp.top[1].logprob);
      EXPECT_GE(lp.top[0].logprob, lp.logprob);  // the best alternative is at least as likely
    }
  }
  p.seed = 99;
  auto c = llm->generate({"Once upon a time"}, p);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->front().output.token_ids, a->front().output.token_ids);
}

TEST(LLM, ContextFullFinishesWithLength) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");  // trained context: 128 tokens
  ASSERT_TRUE(llm);
  SamplingParams p = greedy(1000);
  p.ignore_eos = true;
  auto out = llm->generate({"Once upon a time"}, p);
  ASSERT_TRUE(out.ok()) << out.message();
  const auto& r = out->front();
  EXPECT_EQ(r.output.finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.prompt_token_ids.size() + r.output.token_ids.size(), 128u);
}

TEST(LLM, BadRequestsAreErrors) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  SamplingParams p = greedy(4);
  p.top_p = 1.5f;
  auto bad = llm->generate({"hi"}, p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("top_p"), std::string::npos);
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += " once upon a time";
  auto too_long = llm->generate({long_prompt}, greedy(4));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("context"), std::string::npos);
  // The engine keeps working after errors.
  EXPECT_TRUE(llm->generate({"Once upon a time"}, greedy(4)).ok());

  LLMConfig missing;
  missing.model_path = "/nonexistent.gguf";
  EXPECT_FALSE(LLM::load(missing).ok());
  LLMConfig bad_kv;
  bad_kv.model_path = test::shared_path("models/aidreams260K.gguf").string();
  bad_kv.kv_cache_type = "q3";
  EXPECT_FALSE(LLM::load(bad_kv).ok());
}

}  // namespace
}  // namespace vela

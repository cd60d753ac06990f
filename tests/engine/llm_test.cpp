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
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
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
      EXPECT_EQ(r.prompt_token_ids, ref["prompt_tokens"].get<std::vector<int32_t>>())
          << model << ": " << prompt;
      ASSERT_GE(r.outputs[0].token_ids.size(), clear_steps);
      for (size_t i = 0; i < clear_steps; ++i)
        EXPECT_EQ(r.outputs[0].token_ids[i], ref_tokens[i]) << model << " step " << i;
      if (r.outputs[0].token_ids == ref_tokens) {
        EXPECT_EQ(r.outputs[0].text, ref_text) << model << ": " << prompt;
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
  EXPECT_EQ(streamed, out->front().outputs[0].text);
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(out->front().outputs[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(out->front().outputs[0].token_ids.size(), 40u);
}

TEST(LLM, StopStringEndsGenerationAndIsNotEmitted) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  auto full = llm->generate({"Once upon a time"}, greedy(48));
  ASSERT_TRUE(full.ok());
  const std::string text = full->front().outputs[0].text;
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
  const CompletionOutput& o = out->front().outputs[0];
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
    EXPECT_EQ((*a)[i].outputs[0].token_ids, (*b)[i].outputs[0].token_ids);
    const auto& lps = (*a)[i].outputs[0].logprobs;
    ASSERT_EQ(lps.size(), (*a)[i].outputs[0].token_ids.size());
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
  EXPECT_NE(c->front().outputs[0].token_ids, a->front().outputs[0].token_ids);
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
  EXPECT_EQ(r.outputs[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.prompt_token_ids.size() + r.outputs[0].token_ids.size(), 128u);
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

// The general generate(): per-prompt parameters, token-id prompts, n completions (seed + j),
// cumulative logprobs, in prompt order.
TEST(LLM, RequestsWithTheirOwnParameters) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  const std::vector<int32_t> ids = llm->tokenize("Once upon a time");
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  sampled.max_tokens = 12;
  sampled.seed = 5;
  sampled.n = 3;
  sampled.logprobs = 0;
  auto out = llm->generate({GenerateRequest{Prompt(ids), greedy(6)},
                            GenerateRequest{Prompt("The little robot"), sampled}});
  ASSERT_TRUE(out.ok()) << out.message();
  ASSERT_EQ(out->size(), 2u);
  auto text = llm->generate({"Once upon a time"}, greedy(6));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ((*out)[0].prompt, "");
  EXPECT_EQ((*out)[0].prompt_token_ids, ids);
  EXPECT_EQ((*out)[0].outputs[0].token_ids, text->front().outputs[0].token_ids);
  EXPECT_FALSE((*out)[0].outputs[0].cumulative_logprob.has_value());
  const auto& completions = (*out)[1].outputs;
  ASSERT_EQ(completions.size(), 3u);
  for (int32_t j = 0; j < 3; ++j) {
    const CompletionOutput& c = completions[size_t(j)];
    EXPECT_EQ(c.index, j);
    ASSERT_TRUE(c.cumulative_logprob.has_value());
    double sum = 0;
    for (const TokenLogprobs& lp : c.logprobs) sum += lp.logprob;
    EXPECT_NEAR(*c.cumulative_logprob, sum, 1e-9);
    SamplingParams alone = sampled;
    alone.n = 1;
    alone.seed = 5 + uint64_t(j);
    auto one = llm->generate({"The little robot"}, alone);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(one->front().outputs[0].token_ids, c.token_ids) << "completion " << j;
  }
}

TEST(LLM, StepCallbackCancelsEverything) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  SamplingParams p = greedy(100);
  p.ignore_eos = true;
  int steps = 0;
  GenerateHooks hooks;
  hooks.on_step = [&](size_t finished, size_t total) {
    EXPECT_EQ(total, 2u);
    EXPECT_EQ(finished, 0u);
    return ++steps < 5;
  };
  auto out = llm->generate(
      {GenerateRequest{Prompt("Once upon a time"), p}, GenerateRequest{Prompt("She said"), p}},
      hooks);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(steps, 5);
  for (const RequestOutput& r : *out) {
    EXPECT_EQ(r.outputs[0].finish_reason, FinishReason::kAbort);
    EXPECT_LT(r.outputs[0].token_ids.size(), 10u);
  }
  EXPECT_TRUE(llm->generate({"Once upon a time"}, greedy(4)).ok());  // usable afterwards
}

TEST(LLM, ChatTemplateAndParameterErrors) {
  VELA_REQUIRE_SHARED();
  auto llm = load("aidreams260K.gguf");
  ASSERT_TRUE(llm);
  const std::vector<ChatMessage> chat = {{"user", "Hello"}};
  auto none = llm->apply_chat_template(chat);
  ASSERT_FALSE(none.ok());  // the file has no template
  EXPECT_NE(none.message().find("no tokenizer.chat_template"), std::string::npos);
  auto text = llm->apply_chat_template(
      chat, true,
      std::string("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}"
                  "{% if add_generation_prompt %}>{% endif %}{{ bos_token }}"));
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(*text, "[user] Hello><s>");

  SamplingParams bad = greedy(4);
  bad.n = 0;
  EXPECT_EQ(validate_sampling_params(bad).message(),
            "invalid sampling parameter n: must be >= 1 (got 0)");
  bad = greedy(4);
  bad.min_tokens = 5;
  auto refused = llm->generate(
      {GenerateRequest{Prompt("hi"), greedy(4)}, GenerateRequest{Prompt("there"), bad}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.message(),
            "prompt 1: invalid sampling parameter min_tokens: must be in [0, max_tokens = 4] "
            "(got 5)");
}

}  // namespace
}  // namespace vela

// Request-body parsing for /v1/completions and /v1/chat/completions: every field lands in the
// right place, defaults follow OpenAI, and each kind of bad input names its parameter.
#include <gtest/gtest.h>

#include "server/generation_request.h"

namespace vela::server {
namespace {

GenerationRequest parse_ok(const std::string& body, Endpoint e = Endpoint::kCompletions) {
  GenerationRequest r;
  auto error = parse_generation_request(body, e, RequestLimits{}, r);
  EXPECT_FALSE(error.has_value()) << body << " -> " << (error ? error->message : "");
  return r;
}

ApiError parse_error(const std::string& body, Endpoint e = Endpoint::kCompletions) {
  GenerationRequest r;
  auto error = parse_generation_request(body, e, RequestLimits{}, r);
  EXPECT_TRUE(error.has_value()) << body;
  return error.value_or(ApiError{});
}

TEST(GenerationRequest, CompletionFieldsAndDefaults) {
  const GenerationRequest d = parse_ok(R"({"prompt":"hi"})");
  EXPECT_EQ(d.params.max_tokens, 16);  // OpenAI's completions default
  EXPECT_FALSE(d.max_tokens_given);
  EXPECT_EQ(d.n, 1);
  EXPECT_FALSE(d.stream);
  EXPECT_FALSE(d.params.logprobs.has_value());
  ASSERT_EQ(d.prompts.size(), 1u);
  EXPECT_EQ(d.prompts[0].text, "hi");

  const GenerationRequest r = parse_ok(R"({
      "model":"m","prompt":[[1,2,3],"text"],"max_tokens":7,"temperature":0.5,"top_p":0.9,
      "n":3,"stop":"###","seed":-1,"presence_penalty":0.5,"frequency_penalty":-0.5,
      "logprobs":2,"stream":true,"stream_options":{"include_usage":true},"user":"u1",
      "top_k":40,"min_p":0.1,"repetition_penalty":1.2,"priority":5,"ignore_eos":true,
      "stop_token_ids":[2,7],"best_of":3,"logit_bias":{}})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[0].pretokenized);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.prompts[1].pretokenized);
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"###"}));
  EXPECT_EQ(r.params.seed, uint64_t(-1));
  EXPECT_FLOAT_EQ(r.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.params.frequency_penalty, -0.5f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "u1");
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_FLOAT_EQ(r.params.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);
  EXPECT_EQ(r.priority, -5);  // API: lower first; engine: higher first
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{2, 7}));
}

TEST(GenerationRequest, LogitBiasEchoAndBestOf) {
  const GenerationRequest r =
      parse_ok(R"({"prompt":"x","n":2,"best_of":4,"echo":true,"logit_bias":{"5":1.5,"70":-100}})");
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.best_of, 4);
  EXPECT_TRUE(r.echo);
  ASSERT_EQ(r.params.logit_bias.size(), 2u);
  EXPECT_EQ(r.params.logit_bias[0], (std::pair<int32_t, float>{5, 1.5f}));
  EXPECT_EQ(r.params.logit_bias[1], (std::pair<int32_t, float>{70, -100.0f}));
  EXPECT_EQ(parse_ok(R"({"prompt":"x","n":3})").best_of, 3);  // best_of defaults to n
}

TEST(GenerationRequest, ChatFields) {
  const GenerationRequest d =
      parse_ok(R"({"messages":[{"role":"user","content":"hi"}]})", Endpoint::kChatCompletions);
  EXPECT_EQ(d.params.max_tokens, RequestLimits{}.default_chat_max_tokens);
  const GenerationRequest r = parse_ok(
      R"({"messages":[{"role":"system","content":"s"},
                      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                      {"role":"assistant","content":null}],
          "max_tokens":9,"max_completion_tokens":5,"logprobs":true,"top_logprobs":3,
          "stop":["x","y"],"tools":[],"response_format":{"type":"text"}})",
      Endpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.params.max_tokens, 5);  // max_completion_tokens wins
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.params.stop.size(), 2u);
}

TEST(GenerationRequest, ErrorsNameTheParameter) {
  const std::pair<const char*, const char*> completions[] = {
      {R"({"prompt":"x","temperature":"a"})", "temperature"},
      {R"({"prompt":"x","temperature":-0.1})", "temperature"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","min_p":2})", "min_p"},
      {R"({"prompt":"x","repetition_penalty":0})", "repetition_penalty"},
      {R"({"prompt":"x","frequency_penalty":-3})", "frequency_penalty"},
      {R"({"prompt":"x","max_tokens":"5"})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":3000000000})", "max_tokens"},
      {R"({"prompt":"x","n":17})", "n"},
      {R"({"prompt":"x","logprobs":true})", "logprobs"},
      {R"({"prompt":"x","logprobs":21})", "logprobs"},
      {R"({"prompt":"x","stop":["a",""]})", "stop"},
      {R"({"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})",
       "stop"},
      {R"({"prompt":"x","stop_token_ids":[-1]})", "stop_token_ids"},
      {R"({"prompt":"x","ignore_eos":1})", "ignore_eos"},
      {R"({"prompt":"x","priority":10000000})", "priority"},
      {R"({"prompt":"x","user":5})", "user"},
      {R"({"prompt":"x","suffix":"s"})", "suffix"},
      {R"({"prompt":"x","n":3,"best_of":2})", "best_of"},
      {R"({"prompt":"x","best_of":2,"stream":true})", "best_of"},
      {R"({"prompt":"x","best_of":17})", "best_of"},
      {R"({"prompt":"x","logit_bias":{"a":1}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"5":"1"}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":{"5":101}})", "logit_bias"},
      {R"({"prompt":"x","logit_bias":[5]})", "logit_bias"},
      {R"({"prompt":"x","echo":true,"logprobs":1})", "echo"},
      {R"({"prompt":"x","echo":"yes"})", "echo"},
      {R"({"prompt":"x","stream":true,"stream_options":{"include_usage":"y"}})",
       "stream_options.include_usage"},
      {R"({"prompt":[1,-2]})", "prompt"},
      {R"({"prompt":[1,"a"]})", "prompt"},
      {R"({"prompt":[]})", "prompt"},
      {R"({"model":5,"prompt":"x"})", "model"},
  };
  for (const auto& [body, param] : completions) {
    const ApiError e = parse_error(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
  const std::pair<const char*, const char*> chat[] = {
      {R"({"messages":[]})", "messages"},
      {R"({"messages":[{"content":"x"}]})", "messages"},
      {R"({"messages":[{"role":"user"}]})", "messages"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", "logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})",
       "response_format"},
  };
  for (const auto& [body, param] : chat) {
    const ApiError e = parse_error(body, Endpoint::kChatCompletions);
    EXPECT_EQ(e.param, param) << body << " -> " << e.message;
  }
  EXPECT_EQ(parse_error("not json").param, "");
  EXPECT_EQ(parse_error("[]").status, 400);
  EXPECT_EQ(parse_error(std::string(100, '[') + std::string(100, ']')).status, 400);
}

TEST(GenerationRequest, NestingDepthIgnoresStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})"), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[\"[[["})"), 1);
  EXPECT_EQ(json_nesting_depth("42"), 0);
}

}  // namespace
}  // namespace vela::server

namespace vela::server {
namespace {

// A JSON schema keeps the order its properties were written in (the output writes them so),
// wherever it is given; a schema given as text is kept as it is.
TEST(GenerationRequest, JsonSchemaKeepsItsPropertyOrder) {
  const std::string schema = R"({"type":"object","properties":{"zeta":{"type":"integer"},)"
                             R"("alpha":{"type":"string"}},"required":["zeta","alpha"]})";
  for (const std::string& body :
       {R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":)" +
            schema + "}}}",
        R"({"prompt":"x","structured_outputs":{"json":)" + schema + "}}",
        R"({"prompt":"x","guided_json":)" + schema + "}"}) {
    GenerationRequest r;
    ASSERT_FALSE(parse_generation_request(body, Endpoint::kCompletions, RequestLimits{}, r))
        << body;
    ASSERT_TRUE(r.params.structured_outputs.json) << body;
    const std::string& kept = *r.params.structured_outputs.json;
    EXPECT_LT(kept.find("zeta"), kept.find("alpha")) << kept;
  }
}

// The tools reach the chat template (and a forced call's grammar) in the order written.
TEST(GenerationRequest, ToolsKeepTheirKeyOrder) {
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":)"
      R"({"name":"f","parameters":{"type":"object","properties":{"zeta":{"type":"integer"},)"
      R"("alpha":{"type":"string"}}}}}]})";
  GenerationRequest r;
  ASSERT_FALSE(parse_generation_request(body, Endpoint::kChatCompletions, RequestLimits{}, r));
  const std::string kept = r.tools.tools.dump();
  EXPECT_LT(kept.find("zeta"), kept.find("alpha")) << kept;
  EXPECT_LT(kept.find("\"type\":\"function\""), kept.find("\"function\":{")) << kept;
}

}  // namespace
}  // namespace vela::server

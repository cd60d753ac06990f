// `vela serve` as clients see it: the OpenAI completions API whole and streamed, /v1/models,
// /health, /metrics, and 4xx answers with OpenAI error objects. Runs the real binary on a free
// loopback port with the shared aidreams260K model and talks to it with curl.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

json parse(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text;
  return j;
}

// The reference engine's greedy run for a prompt (shared/reference/aidreams260K.jsonl).
json reference_run(const std::string& prompt) {
  std::ifstream in(shared_path("reference/aidreams260K.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["prompt"] == prompt) return j;
  }
  ADD_FAILURE() << "no reference for " << prompt;
  return json::object();
}

void expect_error_object(const HttpResult& r, int status, const std::string& param = "",
                         const std::string& code = "") {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = parse(r.body);
  ASSERT_TRUE(j.contains("error")) << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.body;
  }
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << r.body;
  }
}

class ServerApi : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (shared_dir().empty()) return;
    server_ = ServerProcess::start({"-m", model_path(), "--max-body-bytes", "64K"}).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    VELA_REQUIRE_SHARED();
    ASSERT_TRUE(server_ != nullptr && server_->port() != 0);
  }
  static ServerProcess* server_;
};
ServerProcess* ServerApi::server_ = nullptr;

TEST_F(ServerApi, HealthAndModels) {
  const HttpResult health = server_->get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(parse(health.body)["status"], "ok");

  const HttpResult models = server_->get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  const json m = parse(models.body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "aidreams260K");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["max_model_len"], 128);
}

TEST_F(ServerApi, GreedyCompletionMatchesTheReference) {
  const json ref = reference_run("Once upon a time");
  ASSERT_TRUE(ref.contains("text"));
  const HttpResult r = server_->post(
      "/v1/completions",
      R"({"model":"aidreams260K","prompt":"Once upon a time","max_tokens":32,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.has_header("content-type: application/json"));
  const json j = parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_GT(j["created"].get<int64_t>(), 0);
  EXPECT_EQ(j["model"], "aidreams260K");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["text"], ref["text"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], ref["prompt_tokens"].size());
  EXPECT_EQ(j["usage"]["completion_tokens"], 32);
  EXPECT_EQ(j["usage"]["total_tokens"], ref["prompt_tokens"].size() + 32);
}

TEST_F(ServerApi, StreamingIsServerSentEventsAndMatchesWholeResponse) {
  const std::string base = R"("prompt":"The quick brown fox","max_tokens":24,"temperature":0)";
  const HttpResult whole = server_->post("/v1/completions", "{" + base + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json w = parse(whole.body);

  const HttpResult r = server_->post(
      "/v1/completions", "{" + base + R"(,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.has_header("content-type: text/event-stream"));
  bool framing_ok = false;
  const std::vector<std::string> events = sse_events(r.body, &framing_ok);
  EXPECT_TRUE(framing_ok) << r.body;
  ASSERT_GE(events.size(), 4u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text, id;
  int finishes = 0;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json c = parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    if (id.empty()) id = c["id"];
    EXPECT_EQ(c["id"], id);
    ASSERT_EQ(c["choices"].size(), 1u);
    EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) {
      ++finishes;
      EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
      EXPECT_EQ(i + 3, events.size()) << "the finish chunk comes last before usage";
    }
  }
  EXPECT_EQ(finishes, 1);
  EXPECT_EQ(text, w["choices"][0]["text"]);
  const json usage = parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 24);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], w["usage"]["prompt_tokens"]);
}

TEST_F(ServerApi, PromptShapesAndChoices) {
  // Token ids give the same text as the string they encode.
  const json ids = reference_run("Once upon a time")["prompt_tokens"];
  const HttpResult by_ids = server_->post(
      "/v1/completions", json{{"prompt", ids}, {"max_tokens", 12}, {"temperature", 0}}.dump());
  const HttpResult by_text = server_->post(
      "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":12,"temperature":0})");
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  ASSERT_EQ(by_text.status, 200) << by_text.body;
  EXPECT_EQ(parse(by_ids.body)["choices"][0]["text"], parse(by_text.body)["choices"][0]["text"]);

  // Two prompts x n=2 = four choices, indexed prompt-major; prompt tokens counted per prompt.
  const HttpResult multi = server_->post(
      "/v1/completions",
      R"({"prompt":["Once upon a time", [1, 368, 430]],"n":2,"max_tokens":5,"temperature":0})");
  ASSERT_EQ(multi.status, 200) << multi.body;
  const json m = parse(multi.body);
  ASSERT_EQ(m["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m["choices"][i]["index"], i);
  EXPECT_EQ(m["choices"][0]["text"], m["choices"][1]["text"]);  // greedy: same per prompt
  EXPECT_EQ(m["usage"]["prompt_tokens"], 13 + 3);
  EXPECT_EQ(m["usage"]["completion_tokens"], 20);
}

TEST_F(ServerApi, StopStringsAndSeeds) {
  const HttpResult full = server_->post(
      "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":20,"temperature":0})");
  const std::string text = parse(full.body)["choices"][0]["text"];
  ASSERT_GE(text.size(), 12u);
  const std::string stop = text.substr(6, 4);
  const HttpResult stopped =
      server_->post("/v1/completions", json{{"prompt", "Once upon a time"},
                                            {"max_tokens", 20},
                                            {"temperature", 0},
                                            {"stop", json::array({stop, "zzzz"})}}
                                           .dump());
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  const json s = parse(stopped.body);
  EXPECT_EQ(s["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(s["choices"][0]["text"], text.substr(0, text.find(stop)));

  const std::string seeded =
      R"({"prompt":"Hello","max_tokens":16,"temperature":1.0,"seed":7,"n":2})";
  const json a = parse(server_->post("/v1/completions", seeded).body);
  const json b = parse(server_->post("/v1/completions", seeded).body);
  ASSERT_EQ(a["choices"].size(), 2u);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_EQ(a["choices"][1]["text"], b["choices"][1]["text"]);
  EXPECT_NE(a["choices"][0]["text"], a["choices"][1]["text"]);  // n samples differ
}

TEST_F(ServerApi, CompletionLogprobs) {
  const HttpResult r =
      server_->post("/v1/completions",
                    R"({"prompt":"Once upon a time","max_tokens":8,"temperature":0,"logprobs":3})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = parse(r.body)["choices"][0];
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u) << r.body;
  ASSERT_EQ(lp["token_logprobs"].size(), 8u);
  ASSERT_EQ(lp["top_logprobs"].size(), 8u);
  ASSERT_EQ(lp["text_offset"].size(), 8u);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(lp["text_offset"][i], int64_t(joined.size()));
    joined += lp["tokens"][i].get<std::string>();
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
  }
  EXPECT_EQ(joined, c["text"]);
}

TEST_F(ServerApi, ChatWithoutTemplateIsAClear400) {
  const HttpResult r =
      server_->post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})");
  expect_error_object(r, 400, "messages", "chat_template_missing");
  EXPECT_NE(r.body.find("--chat-template"), std::string::npos);
}

TEST_F(ServerApi, BadRequestsAreOpenAiErrors) {
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* param;
  };
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "dream ";
  std::string deep(200, '[');
  const std::string very_deep(50000, '[');  // hostile: would overflow a recursive parser's stack
  const std::vector<Case> cases = {
      {"/v1/completions", very_deep, 400, ""},
      {"/v1/completions",
       "{\"prompt\":" + std::string(20000, '[') + "1" + std::string(20000, ']') + "}", 400, ""},
      {"/v1/completions", "{\"prompt\":\"bad \xff\xfe utf-8\"}", 400, ""},
      {"/v1/completions", R"({"prompt":"lone \ud800 surrogate"})", 400, ""},
      {"/v1/completions", R"({"prompt":"x","max_tokens":1e999})", 400, ""},  // number overflow
      {"/v1/completions", R"({"prompt":"x","temperature":1e308})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":"x","seed":123456789012345678901234567890})", 400, "seed"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":9223372036854775807})", 400, "max_tokens"},
      {"/v1/completions", "{\"prompt\": \"x\",", 400, ""},
      {"/v1/completions", "[1, 2]", 400, ""},
      {"/v1/completions", deep, 400, ""},
      {"/v1/completions", R"({"prompt":"x","temperature":"hot"})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":"x","temperature":-1})", 400, "temperature"},
      {"/v1/completions", R"({"prompt":"x","top_p":0})", 400, "top_p"},
      {"/v1/completions", R"({"prompt":"x","presence_penalty":5})", 400, "presence_penalty"},
      {"/v1/completions", R"({"prompt":"x","n":0})", 400, "n"},
      {"/v1/completions", R"({"prompt":"x","n":1000})", 400, "n"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":-5})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":1.5})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":1000})", 400, "max_tokens"},
      {"/v1/completions", R"({"max_tokens":5})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":123})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[[]]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[1, 99999]})", 400, "prompt"},
      {"/v1/completions", "{\"prompt\":\"" + long_prompt + "\"}", 400, "prompt"},
      {"/v1/completions", R"({"prompt":"x","stop":[""]})", 400, "stop"},
      {"/v1/completions", R"({"prompt":"x","stop":7})", 400, "stop"},
      {"/v1/completions", R"({"prompt":"x","logprobs":50})", 400, "logprobs"},
      {"/v1/completions", R"({"prompt":"x","stream":"yes"})", 400, "stream"},
      {"/v1/completions", R"({"prompt":"x","stream_options":{"include_usage":true}})", 400,
       "stream_options"},
      {"/v1/completions", R"({"prompt":"x","echo":true,"logprobs":0})", 400, "echo"},
      {"/v1/completions", R"({"prompt":"x","seed":"abc"})", 400, "seed"},
      {"/v1/completions", R"({"prompt":"x","top_k":-7})", 400, "top_k"},
      {"/v1/completions", R"({"prompt":"x","priority":"high"})", 400, "priority"},
      {"/v1/completions", R"({"prompt":"x","model":"nope"})", 404, "model"},
      {"/v1/chat/completions", R"({"messages":"hi"})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages":[{"role":"wizard","content":"hi"}]})", 400,
       "messages"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"logprobs":2})", 400,
       "logprobs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 120));
    expect_error_object(server_->post(c.path, c.body), c.status, c.param);
  }
  expect_error_object(server_->get("/v1/completions"), 405);
  expect_error_object(server_->get("/no/such/path"), 404);
  // The server is still fine.
  EXPECT_EQ(server_->post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
}

TEST_F(ServerApi, BodyOverTheLimitIs413) {
  const std::string big = "{\"prompt\":\"" + std::string(70 * 1024, 'a') + "\"}";
  expect_error_object(server_->post("/v1/completions", big), 413, "", "request_too_large");
  // With 100-continue the server answers before the body is sent.
  expect_error_object(server_->post("/v1/completions", big, "-H 'Expect: 100-continue'"), 413);
  // Chunked upload (no Content-Length): the limit applies while reading.
  expect_error_object(server_->post("/v1/completions", big, "-H 'Transfer-Encoding: chunked'"),
                      413);
  EXPECT_EQ(server_->get("/health").status, 200);
}

TEST_F(ServerApi, MetricsParseAndMove) {
  const HttpResult before_r = server_->get("/metrics");
  ASSERT_EQ(before_r.status, 200);
  EXPECT_TRUE(before_r.has_header("content-type: text/plain; version=0.0.4"));
  std::string error;
  const auto before = parse_metrics(before_r.body, &error);
  EXPECT_EQ(error, "");
  const std::string l = "model_name=\"aidreams260K\"";
  for (const char* name :
       {"vela:num_requests_running", "vela:num_requests_waiting", "vela:kv_cache_usage_perc",
        "vela:prompt_tokens_total", "vela:generation_tokens_total", "vela:num_preemptions_total",
        "vela:prefix_cache_queries_total", "vela:prefix_cache_hits_total",
        "vela:time_to_first_token_seconds_count", "vela:inter_token_latency_seconds_count",
        "vela:time_per_output_token_seconds_count", "vela:e2e_request_latency_seconds_count",
        "vela:request_queue_time_seconds_count", "vela:request_prefill_time_seconds_count",
        "vela:request_decode_time_seconds_count", "vela:request_prompt_tokens_count",
        "vela:request_generation_tokens_count"})
    EXPECT_TRUE(before.count(std::string(name) + "{" + l + "}")) << name;
  for (const char* type :
       {"# TYPE vela:prompt_tokens_total counter", "# TYPE vela:num_requests_running gauge",
        "# TYPE vela:time_to_first_token_seconds histogram"})
    EXPECT_NE(before_r.body.find(type), std::string::npos) << type;

  const HttpResult r = server_->post(
      "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":10,"temperature":0})");
  ASSERT_EQ(r.status, 200);
  const auto after = parse_metrics(server_->get("/metrics").body, &error);
  auto delta = [&](const std::string& key) { return after.at(key) - before.at(key); };
  EXPECT_EQ(delta("vela:prompt_tokens_total{" + l + "}"), 13);
  EXPECT_EQ(delta("vela:generation_tokens_total{" + l + "}"), 10);
  EXPECT_EQ(delta("vela:request_success_total{finished_reason=\"length\"," + l + "}"), 1);
  EXPECT_EQ(delta("vela:time_to_first_token_seconds_count{" + l + "}"), 1);
  EXPECT_EQ(delta("vela:e2e_request_latency_seconds_count{" + l + "}"), 1);
  EXPECT_EQ(delta("vela:inter_token_latency_seconds_count{" + l + "}"), 9);
  EXPECT_EQ(delta("vela:request_generation_tokens_sum{" + l + "}"), 10);
  EXPECT_EQ(after.at("vela:num_requests_running{" + l + "}"), 0);
  EXPECT_EQ(after.at("vela:kv_cache_usage_perc{" + l + "}"), 0);
  // Buckets are cumulative and end at _count.
  double previous = 0;
  const std::string prefix = "vela:time_to_first_token_seconds_bucket{le=\"";
  int buckets = 0;
  for (const auto& [key, value] : after) {
    if (key.rfind(prefix, 0) != 0) continue;
    ++buckets;
    if (key.find("+Inf") != std::string::npos) {
      EXPECT_EQ(value, after.at("vela:time_to_first_token_seconds_count{" + l + "}"));
    }
  }
  EXPECT_GE(buckets, 10);
  const double bounds[] = {0.001, 0.01, 0.1, 1.0, 10.0};
  for (double b : bounds) {
    char key[128];
    std::snprintf(key, sizeof(key), "%s%g\",%s}", prefix.c_str(), b, l.c_str());
    ASSERT_TRUE(after.count(key)) << key;
    EXPECT_GE(after.at(key), previous);
    previous = after.at(key);
  }
}

}  // namespace
}  // namespace vela::test

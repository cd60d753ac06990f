// Anthropic's Messages API on a real `vela serve`: the official @anthropic-ai/sdk client
// (tests/server/node/anthropic_client_test.mjs: create, stream, tools, thinking, stop sequences,
// countTokens, errors), and over curl the API keys (x-api-key for /v1/messages*, Bearer still
// accepted), the error shapes of the session's own refusals, and the raw event stream. The
// model is random-weight with a byte-level BPE tokenizer, driven by --test-scripted-output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "named_events.h"
#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

constexpr const char* kKey = "k-anthropic";

std::unique_ptr<ServerProcess> serve() {
  return ServerProcess::start(
      {"-m", shared_path("models/tiny-qwen2-bpe-F16.gguf").string(), "-c", "8192",
       "--chat-template", shared_path("chat-templates/templates/Qwen3.5-4B.jinja").string(),
       "--tool-call-parser", "qwen3_coder", "--reasoning-parser", "qwen3", "--served-model-name",
       "m", "--test-scripted-output", "--api-key", kKey, "--max-body-bytes", "262144"});
}

std::string header(const std::string& line) {
  return "-H " + shell_quote(line);
}

const std::string kXApiKey = header(std::string("x-api-key: ") + kKey);

TEST(AnthropicApi, NodeClient) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path dir = VELA_SERVER_NODE_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "@anthropic-ai" / "sdk"))
    GTEST_SKIP() << "@anthropic-ai/sdk not installed (run: npm ci --prefix tests/server/node)";
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found";
  auto s = serve();
  const std::string cmd = "timeout 300 node " +
                          shell_quote((dir / "anthropic_client_test.mjs").string()) + " " +
                          shell_quote(s->url("")) + " m " + kKey + " 2>&1";
  const test::CommandResult run = test::run_command(cmd);  // its stderr is in cmd's 2>&1
  const std::string& out = run.out;
  EXPECT_EQ(run.exit_code, 0) << out << "\nserver log:\n" << s->log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
}

json request(const std::vector<std::string>& pieces) {
  return json{{"model", "m"},
              {"max_tokens", 64},
              {"system", "Be brief."},
              {"messages", json::array({json{{"role", "user"}, {"content", "Hi"}}})},
              {"thinking", {{"type", "disabled"}}},
              {"vela_test_script", {{"pieces", pieces}}}};
}

void expect_anthropic_error(const HttpResult& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body;
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
}

TEST(AnthropicApi, KeysAndErrorShapes) {
  VELA_REQUIRE_SHARED();
  auto s = serve();
  const std::string body = request({"Hello."}).dump();
  // x-api-key or Bearer on /v1/messages and count_tokens.
  HttpResult r = s->post("/v1/messages", body, kXApiKey);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["content"][0]["text"], "Hello.");
  r = s->post("/v1/messages", body, header(std::string("Authorization: Bearer ") + kKey));
  EXPECT_EQ(r.status, 200) << r.body;
  r = s->post("/v1/messages/count_tokens", body, kXApiKey);
  EXPECT_EQ(r.status, 200) << r.body;
  // Missing or wrong: Anthropic's 401 on its paths.
  r = s->post("/v1/messages", body);
  expect_anthropic_error(r, 401, "authentication_error");
  EXPECT_NE(r.body.find("x-api-key"), std::string::npos) << r.body;
  expect_anthropic_error(s->post("/v1/messages", body, header("x-api-key: nope")), 401,
                         "authentication_error");
  expect_anthropic_error(s->post("/v1/messages/count_tokens", body), 401, "authentication_error");
  // x-api-key is Anthropic's header only: the OpenAI paths keep to Bearer.
  r = s->post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})",
              kXApiKey);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error") << r.body;

  // The session's own refusals and the handler's take the same shape.
  expect_anthropic_error(s->get("/v1/messages", kXApiKey), 405, "invalid_request_error");
  json other = request({"x"});
  other["model"] = "claude-x";
  expect_anthropic_error(s->post("/v1/messages", other.dump(), kXApiKey), 404, "not_found_error");
  expect_anthropic_error(s->post("/v1/messages/count_tokens", other.dump(), kXApiKey), 404,
                         "not_found_error");
  json no_max = request({"x"});
  no_max.erase("max_tokens");
  r = s->post("/v1/messages", no_max.dump(), kXApiKey);
  expect_anthropic_error(r, 400, "invalid_request_error");
  EXPECT_NE(r.body.find("max_tokens"), std::string::npos) << r.body;
  // count_tokens needs no max_tokens.
  r = s->post("/v1/messages/count_tokens", no_max.dump(), kXApiKey);
  EXPECT_EQ(r.status, 200) << r.body;
  expect_anthropic_error(s->post("/v1/messages", "{oops", kXApiKey), 400, "invalid_request_error");
  // An oversized body: the session's 413, in Anthropic's shape.
  json huge = request({std::string(300000, 'x')});
  expect_anthropic_error(s->post("/v1/messages", huge.dump(), kXApiKey), 413, "request_too_large");
  // thinking enabled without its budget_tokens.
  json bad_thinking = request({"x"});
  bad_thinking["thinking"] = {{"type", "enabled"}};
  expect_anthropic_error(s->post("/v1/messages", bad_thinking.dump(), kXApiKey), 400,
                         "invalid_request_error");
}

using Event = NamedEvent;

TEST(AnthropicApi, RawStreamOpensWithTheInputTokens) {
  VELA_REQUIRE_SHARED();
  auto s = serve();
  json body = request({"Thinking", " done.</think>", "\n\nAnswer."});
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 50}};
  body["stream"] = true;
  const HttpResult r = s->post("/v1/messages", body.dump(), kXApiKey);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.has_header("content-type: text/event-stream")) << r.headers;
  const std::vector<Event> events = parse_named_events(r.body);
  std::vector<std::string> names;
  for (const Event& e : events) {
    names.push_back(e.name);
    EXPECT_EQ(e.data["type"], e.name);
  }
  ASSERT_GE(events.size(), 8u) << r.body;
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names.back(), "message_stop");
  std::string thinking, text;
  for (const Event& e : events) {
    if (e.name != "content_block_delta") continue;
    const json& d = e.data["delta"];
    if (d["type"] == "thinking_delta") {
      EXPECT_EQ(e.data["index"], 0);
      thinking += d["thinking"].get<std::string>();
    } else if (d["type"] == "text_delta") {
      EXPECT_EQ(e.data["index"], 1);
      text += d["text"].get<std::string>();
    }
  }
  EXPECT_EQ(thinking, "Thinking done.");
  EXPECT_EQ(text, "Answer.");
  // message_start knows the prompt's length before anything is generated; count_tokens agrees,
  // and so does the final usage (input plus cache reads).
  const int64_t start_input = events.front().data["message"]["usage"]["input_tokens"];
  body.erase("stream");
  body.erase("max_tokens");
  body.erase("vela_test_script");
  const HttpResult count = s->post("/v1/messages/count_tokens", body.dump(), kXApiKey);
  ASSERT_EQ(count.status, 200) << count.body;
  EXPECT_EQ(start_input, json::parse(count.body)["input_tokens"].get<int64_t>());
  const json& delta = events[events.size() - 2].data;
  EXPECT_EQ(delta["type"], "message_delta");
  EXPECT_EQ(delta["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(delta["usage"]["input_tokens"].get<int64_t>() +
                delta["usage"]["cache_read_input_tokens"].get<int64_t>(),
            start_input);
  EXPECT_GT(delta["usage"]["output_tokens"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace vela::test

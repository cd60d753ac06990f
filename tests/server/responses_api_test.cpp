// POST /v1/responses through a real `vela serve` (Qwen3.5's chat template, its reasoning and
// tool-call parsers, the scripted-output hook): over curl (the whole response, the event stream's
// framing and order, errors in Responses terms), and with the official openai npm client's
// client.responses (tests/server/node/responses_client_test.mjs; skipped when Node.js or the
// client's node_modules are absent).
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

// GPT-2's byte-level BPE writes any scripted text back byte for byte.
std::unique_ptr<ServerProcess> serve() {
  return ServerProcess::start({"-m", shared_path("models/tiny-qwen2-bpe-F16.gguf").string(), "-c",
                               "8192", "--chat-template",
                               shared_path("chat-templates/templates/Qwen3.5-4B.jinja").string(),
                               "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
                               "--served-model-name", "m", "--test-scripted-output"});
}

json body_with(const std::vector<std::string>& pieces) {
  return json{{"model", "m"},
              {"input", "What is 2+2?"},
              {"temperature", 0},
              {"vela_test_script", {{"pieces", pieces}, {"eos", true}}}};
}

TEST(ResponsesApi, WholeStreamedAndErrorsOverHttp) {
  VELA_REQUIRE_SHARED();
  auto s = serve();
  const std::vector<std::string> pieces = {"Let me", " think.\n</th", "ink>\n\nThe answer",
                                           " is 4."};
  const HttpResult whole = s->post("/v1/responses", body_with(pieces).dump());
  ASSERT_EQ(whole.status, 200) << whole.body << s->log();
  const json r = json::parse(whole.body);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 2u) << r.dump(1);
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Let me think.\n");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "The answer is 4.");
  EXPECT_GT(r["usage"]["input_tokens"].get<int>(), 0);

  json stream_body = body_with(pieces);
  stream_body["stream"] = true;
  const HttpResult streamed = s->post("/v1/responses", stream_body.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_TRUE(streamed.has_header("text/event-stream")) << streamed.headers;
  const std::vector<NamedEvent> events = parse_named_events(streamed.body);
  ASSERT_GE(events.size(), 4u) << streamed.body;
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], i);
    if (events[i].name == "response.output_text.delta") text += events[i].data["delta"];
  }
  EXPECT_EQ(events.front().name, "response.created");
  EXPECT_EQ(events.back().name, "response.completed");
  EXPECT_EQ(text, "The answer is 4.");
  // The final event carries the response the whole request gave (but for its ids and time).
  json final_response = events.back().data["response"];
  ASSERT_EQ(final_response["output"].size(), 2u);
  EXPECT_EQ(final_response["output"][0]["content"], r["output"][0]["content"]);
  EXPECT_EQ(final_response["output"][1]["content"], r["output"][1]["content"]);
  EXPECT_EQ(final_response["usage"]["output_tokens"], r["usage"]["output_tokens"]);
  EXPECT_EQ(streamed.body.find("[DONE]"), std::string::npos);  // no chat terminator

  // Errors, in Responses terms.
  const auto error_of = [&](const json& body, int status) {
    const HttpResult e = s->post("/v1/responses", body.dump());
    EXPECT_EQ(e.status, status) << body << " -> " << e.body;
    const json j = json::parse(e.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : json();
  };
  json bad_role = body_with(pieces);
  bad_role["input"] = json::array({json{{"role", "robot"}, {"content", "x"}}});
  EXPECT_EQ(error_of(bad_role, 400)["param"], "input");
  json prev = body_with(pieces);
  prev["previous_response_id"] = "resp_1";
  EXPECT_EQ(error_of(prev, 400)["param"], "previous_response_id");
  json unknown = body_with(pieces);
  unknown["frobnicate"] = true;
  EXPECT_EQ(error_of(unknown, 400)["param"], "frobnicate");
  json other_model = body_with(pieces);
  other_model["model"] = "gpt-4o";
  EXPECT_EQ(error_of(other_model, 404)["param"], "model");
  // The chat parser's context check names the Responses field.
  json too_long = body_with(pieces);
  too_long["max_output_tokens"] = 100000;
  const json e = error_of(too_long, 400);
  EXPECT_EQ(e["param"], "max_output_tokens") << e;
  EXPECT_EQ(e["message"].get<std::string>().find("max_tokens"), std::string::npos) << e;
  EXPECT_EQ(s->get("/v1/responses").status, 405);
}

TEST(ResponsesApi, OpenAiNodeClient) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path dir = VELA_SERVER_NODE_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "openai"))
    GTEST_SKIP() << "openai npm client not installed (run: npm ci --prefix tests/server/node)";
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found";
  auto s = serve();
  const std::string cmd = "timeout 300 node " +
                          shell_quote((dir / "responses_client_test.mjs").string()) + " " +
                          shell_quote(s->url("/v1")) + " m 2>&1";
  const test::CommandResult run = test::run_command(cmd);  // its stderr is in cmd's 2>&1
  const std::string& out = run.out;
  EXPECT_EQ(run.exit_code, 0) << out << "\nserver log:\n" << s->log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
}

}  // namespace
}  // namespace vela::test

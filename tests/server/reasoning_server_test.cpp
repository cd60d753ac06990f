// Reasoning and the tool-call formats of the 2026 families through a real `vela serve`, over
// the real chat templates (../shared/chat-templates/templates) with the scripted-output hook
// (--test-scripted-output: the request's "vela_test_script" is what the model writes, piece
// by piece, so markers can be split across tokens). Whole and streamed answers: the exact
// reasoning_content, content and tool_calls; an unterminated block at max_tokens; the
// reasoning budget; structured output and forced calls after the thinking; the startup choices
// and errors of --reasoning-parser and --tool-call-parser.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

// A random-weight model with GPT-2's byte-level BPE: any text tokenizes and decodes back byte
// for byte (no SentencePiece space prefix on each scripted piece), markers in several tokens.
// The real templates' prompts with tools need a long context.
std::unique_ptr<ServerProcess> serve(const std::string& template_file,
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {
      "-m",
      shared_path("models/tiny-qwen2-bpe-F16.gguf").string(),
      "-c",
      "8192",
      "--chat-template",
      shared_path("chat-templates/templates/" + template_file).string(),
      "--served-model-name",
      "m",
      "--test-scripted-output"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ServerProcess::start(args);
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
])");

json request(const std::vector<std::string>& pieces, bool eos = true) {
  return json{{"model", "m"},
              {"messages", json::array({json{{"role", "user"}, {"content", "Weather?"}}})},
              {"temperature", 0},
              {"max_tokens", 400},
              {"vela_test_script", {{"pieces", pieces}, {"eos", eos}}}};
}

struct Answer {
  json reasoning = nullptr, content = nullptr;
  std::vector<std::pair<std::string, json>> calls;  // name, arguments
  std::string finish_reason;
};

Answer whole(const ServerProcess& s, json body) {
  const HttpResult r = s.post("/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  Answer a;
  if (j.is_discarded() || !j.contains("choices")) return a;
  const json& m = j["choices"][0]["message"];
  a.reasoning = m.value("reasoning_content", json(nullptr));
  a.content = m["content"];
  for (const json& c : m.value("tool_calls", json::array())) {
    EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u);
    a.calls.push_back(
        {c["function"]["name"], json::parse(c["function"]["arguments"].get<std::string>())});
  }
  a.finish_reason = j["choices"][0]["finish_reason"];
  return a;
}

Answer streamed(const ServerProcess& s, json body) {
  body["stream"] = true;
  const HttpResult r = s.post("/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  bool framing = false;
  Answer a;
  std::string reasoning, content;
  std::vector<std::string> args;
  for (const std::string& e : sse_events(r.body, &framing)) {
    if (e == "[DONE]") continue;
    const json j = json::parse(e);
    if (j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    const json& d = c["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
    for (const json& t : d.value("tool_calls", json::array())) {
      const size_t i = t["index"];
      if (i == a.calls.size()) {
        a.calls.push_back({t["function"]["name"], nullptr});
        args.emplace_back();
      }
      args.at(i) += t["function"]["arguments"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) a.finish_reason = c["finish_reason"];
  }
  EXPECT_TRUE(framing);
  for (size_t i = 0; i < args.size(); ++i) a.calls[i].second = json::parse(args[i]);
  if (!reasoning.empty()) a.reasoning = reasoning;
  if (!content.empty()) a.content = content;
  return a;
}

// Both ways give `want`.
void expect_answer(const ServerProcess& s, const json& body, const Answer& want) {
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    const Answer a = stream ? streamed(s, body) : whole(s, body);
    EXPECT_EQ(a.reasoning, want.reasoning);
    EXPECT_EQ(a.content, want.content);
    EXPECT_EQ(a.calls, want.calls);
    EXPECT_EQ(a.finish_reason, want.finish_reason);
  }
}

TEST(ReasoningServer, Qwen35ThinkingContentAndToolCalls) {
  VELA_REQUIRE_SHARED();
  auto s = serve("Qwen3.5-4B.jinja");
  EXPECT_NE(s->log().find("reasoning parser qwen3 (auto"), std::string::npos) << s->log();
  EXPECT_NE(s->log().find("tool-call parser qwen3_coder (auto"), std::string::npos);

  // The template opens the block (its prompt ends in "<think>\n"); the end marker comes split.
  expect_answer(*s, request({"Let me", " think.\n</th", "ink>\n\nThe answer", " is 4."}),
                {"Let me think.\n", "The answer is 4.", {}, "stop"});

  // Thinking off: the prompt closes the block, everything is content.
  json off = request({"Plain <think>x</think>"});
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  expect_answer(*s, off, {nullptr, "Plain <think>x</think>", {}, "stop"});
  // enable_thinking at the top level does the same.
  off.erase("chat_template_kwargs");
  off["enable_thinking"] = false;
  expect_answer(*s, off, {nullptr, "Plain <think>x</think>", {}, "stop"});

  // A call after the thinking, its markers split too.
  json tools = request({"Need the weather.", "</think>", "\n\n<tool_", "call>\n<function=get_",
                        "weather>\n<parameter=city>\nParis\n</param", "eter>\n<parameter=days>\n",
                        "2\n</parameter>\n</function>\n</tool_call>"});
  tools["tools"] = kTools;
  expect_answer(*s, tools,
                {"Need the weather.",
                 nullptr,
                 {{"get_weather", {{"city", "Paris"}, {"days", 2}}}},
                 "tool_calls"});

  // parallel_tool_calls false: the first call only, whether or not a call is forced.
  json two =
      request({"Two.</think><tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n"
               "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
               "<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>"});
  two["tools"] = kTools;
  expect_answer(*s, two,
                {"Two.",
                 nullptr,
                 {{"get_time", {{"zone", "UTC"}}}, {"get_time", {{"zone", "CET"}}}},
                 "tool_calls"});
  two["parallel_tool_calls"] = false;
  expect_answer(*s, two, {"Two.", nullptr, {{"get_time", {{"zone", "UTC"}}}}, "tool_calls"});
}

TEST(ReasoningServer, UnterminatedThinkingAtMaxTokensIsAllReasoning) {
  VELA_REQUIRE_SHARED();
  auto s = serve("Qwen3.5-4B.jinja");
  json body = request({"one two three four five six seven eight nine ten eleven twelve"});
  body["max_tokens"] = 6;
  const Answer a = whole(*s, body);
  EXPECT_EQ(a.finish_reason, "length");
  EXPECT_TRUE(a.content.is_null());
  ASSERT_TRUE(a.reasoning.is_string());
  const std::string r = a.reasoning.get<std::string>();
  EXPECT_FALSE(r.empty());
  EXPECT_EQ(std::string("one two three four five six seven").rfind(r, 0), 0u) << r;
  const Answer b = streamed(*s, body);
  EXPECT_EQ(b.reasoning, a.reasoning);
  EXPECT_TRUE(b.content.is_null());
  EXPECT_EQ(b.finish_reason, "length");
}

TEST(ReasoningServer, BudgetForcesTheEndMarker) {
  VELA_REQUIRE_SHARED();
  auto s = serve("Qwen3.5-4B.jinja");
  const std::string thought = "alpha beta gamma delta epsilon zeta eta theta iota kappa";
  for (const char* name : {"max_reasoning_tokens", "thinking_token_budget"}) {
    SCOPED_TRACE(name);
    json body = request({thought, "</think>", "Done."});
    body[name] = 4;
    for (bool stream : {false, true}) {
      const Answer a = stream ? streamed(*s, body) : whole(*s, body);
      ASSERT_TRUE(a.reasoning.is_string());
      ASSERT_TRUE(a.content.is_string());
      const std::string r = a.reasoning.get<std::string>();
      // Four tokens of thinking, then the forced "</think>", then the script goes on as the
      // answer: the rest of the thought (its leading space dropped), its own marker, "Done.".
      EXPECT_FALSE(r.empty());
      EXPECT_LT(r.size(), thought.size() / 2);
      ASSERT_EQ(thought.rfind(r, 0), 0u) << r;
      std::string rest = thought.substr(r.size());
      rest.erase(0, rest.find_first_not_of(' '));
      EXPECT_EQ(a.content.get<std::string>(), rest + "</think>Done.");
    }
  }
  // Without a reasoning parser the budget is refused.
  auto none = serve("Qwen3.5-4B.jinja", {"--reasoning-parser", "none"});
  json body = request({"x"});
  body["max_reasoning_tokens"] = 4;
  const HttpResult r = none->post("/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("max_reasoning_tokens"), std::string::npos);
  // ... and the thinking stays in the content.
  expect_answer(*none, request({"a</think>b"}), {nullptr, "a</think>b", {}, "stop"});
}

TEST(ReasoningServer, StructuredOutputAndForcedCallsApplyAfterTheThinking) {
  VELA_REQUIRE_SHARED();
  auto s = serve("Qwen3.5-4B.jinja");
  // The script writes the thinking (free text no JSON grammar allows), then the model samples
  // the answer under the schema.
  json body = request({"Think first.", "</think>"}, /*eos=*/false);
  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema",
                              {{"name", "r"},
                               {"schema",
                                {{"type", "object"},
                                 {"properties", {{"ok", {{"type", "boolean"}}}}},
                                 {"required", {"ok"}},
                                 {"additionalProperties", false}}}}}};
  for (bool stream : {false, true}) {
    const Answer a = stream ? streamed(*s, body) : whole(*s, body);
    EXPECT_EQ(a.reasoning, "Think first.");
    ASSERT_TRUE(a.content.is_string());
    const json j = json::parse(a.content.get<std::string>(), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << a.content;
    EXPECT_TRUE(j["ok"].is_boolean()) << j;
    EXPECT_EQ(a.finish_reason, "stop");
  }
  json forced = request({"Must call.", "</think>"}, /*eos=*/false);
  forced["tools"] = kTools;
  forced["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  forced["parallel_tool_calls"] = false;
  for (bool stream : {false, true}) {
    const Answer a = stream ? streamed(*s, forced) : whole(*s, forced);
    EXPECT_EQ(a.reasoning, "Must call.");
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].first, "get_time");
    EXPECT_TRUE(a.calls[0].second["zone"].is_string()) << a.calls[0].second;
  }
}

TEST(ReasoningServer, DeepSeekV31) {
  VELA_REQUIRE_SHARED();
  auto s = serve("deepseek-ai-DeepSeek-V3.1.jinja");
  EXPECT_NE(s->log().find("reasoning parser deepseek_r1 (auto"), std::string::npos) << s->log();
  EXPECT_NE(s->log().find("tool-call parser deepseek_v31 (auto"), std::string::npos);
  // Thinking off by default: the prompt ends in <think></think>.
  expect_answer(*s, request({"Hello."}), {nullptr, "Hello.", {}, "stop"});
  json body = request(
      {"Look it", " up.</thi", "nk>Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>",
       "get_time<｜tool▁sep｜>{\"zone\": ", "\"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"});
  body["tools"] = kTools;
  body["chat_template_kwargs"] = {{"thinking", true}};
  expect_answer(*s, body,
                {"Look it up.", "Sure.", {{"get_time", {{"zone", "UTC"}}}}, "tool_calls"});
}

TEST(ReasoningServer, Glm46) {
  VELA_REQUIRE_SHARED();
  auto s = serve("GLM-4.6.jinja");
  EXPECT_NE(s->log().find("reasoning parser glm45 (auto"), std::string::npos) << s->log();
  EXPECT_NE(s->log().find("tool-call parser glm45 (auto"), std::string::npos);
  json body = request({"<think>Plan", ".</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>",
                       "\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3",
                       "</arg_value>\n</tool_call>"});
  body["tools"] = kTools;
  expect_answer(
      *s, body,
      {"Plan.", nullptr, {{"get_weather", {{"city", "Oslo"}, {"days", 3}}}}, "tool_calls"});
  // No block: all content.
  expect_answer(*s, request({"Just this."}), {nullptr, "Just this.", {}, "stop"});
}

// gpt-oss's harmony channels: analysis is reasoning, final is content, a commentary message to
// functions.NAME is a call; markers split across pieces.
TEST(ReasoningServer, GptOssHarmony) {
  VELA_REQUIRE_SHARED();
  auto s = serve("openai-gpt-oss-120b.jinja");
  EXPECT_NE(s->log().find("reasoning parser gpt_oss (auto"), std::string::npos) << s->log();
  EXPECT_NE(s->log().find("tool-call parser gpt_oss (auto"), std::string::npos);
  expect_answer(*s,
                request({"<|chan", "nel|>analysis<|message|>Think", ".<|end|><|start|>assis",
                         "tant<|channel|>final<|mess", "age|>Hello.<|ret", "urn|>"}),
                {"Think.", "Hello.", {}, "stop"});
  json body = request({"<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|chan",
                       "nel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
                       "{\"city\": ", "\"Oslo\"}<|call|>"});
  body["tools"] = kTools;
  // The gpt-oss template reads each tool's description.
  for (json& t : body["tools"]) t["function"]["description"] = "A tool.";
  expect_answer(*s, body,
                {"Need it.", nullptr, {{"get_weather", {{"city", "Oslo"}}}}, "tool_calls"});
  // Cut off by max_tokens inside analysis: all reasoning.
  const std::string words =
      "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
      "sixteen seventeen eighteen nineteen twenty";
  json cut = request({"<|channel|>analysis<|message|>" + words});
  cut["max_tokens"] = 24;  // the header is fewer tokens, the whole script more
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    const Answer a = stream ? streamed(*s, cut) : whole(*s, cut);
    EXPECT_TRUE(a.content.is_null()) << a.content;
    ASSERT_TRUE(a.reasoning.is_string());
    const std::string r = a.reasoning.get<std::string>();
    EXPECT_FALSE(r.empty());
    EXPECT_EQ(words.rfind(r, 0), 0u) << r;
    EXPECT_EQ(a.finish_reason, "length");
  }
}

TEST(ReasoningServer, MistralSmall32) {
  VELA_REQUIRE_SHARED();
  auto s = serve("Mistral-Small-3.2-24B-Instruct-2506.jinja");
  EXPECT_NE(s->log().find("reasoning parser none (auto"), std::string::npos) << s->log();
  EXPECT_NE(s->log().find("tool-call parser mistral (auto"), std::string::npos);
  json body = request({"[TOOL_", "CALLS]get_weather[AR",
                       "GS]{\"city\": \"Lyon\"}[TOOL_CALLS]get_time", "[ARGS]{\"zone\": \"CET\"}"});
  body["tools"] = kTools;
  // No reasoning parser: no reasoning_content key.
  expect_answer(*s, body,
                {nullptr,
                 nullptr,
                 {{"get_weather", {{"city", "Lyon"}}}, {"get_time", {{"zone", "CET"}}}},
                 "tool_calls"});
}

TEST(ReasoningServer, ParserFlagsAndErrors) {
  VELA_REQUIRE_SHARED();
  // A template that reads tools in a syntax no parser knows: `auto` refuses to start.
  const auto odd = temp_file("odd-tools");
  write_file(odd,
             "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}CALL: "
             "name(args){% endif %}");
  auto bad = ServerProcess::start({"-m", shared_path("models/tiny-qwen2-bpe-F16.gguf").string(),
                                   "--chat-template", odd.string()},
                                  /*wait_ready=*/false);
  EXPECT_NE(bad->wait_exit(60), 0);
  EXPECT_NE(bad->log().find("--tool-call-parser"), std::string::npos) << bad->log();
  EXPECT_NE(bad->log().find("qwen3_coder, deepseek_v31, glm45"), std::string::npos) << bad->log();
  // Named explicitly, it serves.
  auto named =
      ServerProcess::start({"-m", shared_path("models/tiny-qwen2-bpe-F16.gguf").string(),
                            "--chat-template", odd.string(), "--tool-call-parser", "hermes",
                            "--test-scripted-output", "--served-model-name", "m"});
  json body =
      request({"<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}"
               "</tool_call>"});
  body["tools"] = kTools;
  expect_answer(*named, body, {nullptr, nullptr, {{"get_time", {{"zone", "UTC"}}}}, "tool_calls"});
  // --tool-call-parser none: requests with tools get a 400 that says why.
  auto off = ServerProcess::start({"-m", shared_path("models/tiny-qwen2-bpe-F16.gguf").string(),
                                   "--chat-template", odd.string(), "--tool-call-parser", "none",
                                   "--served-model-name", "m"});
  const HttpResult r = off->post("/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("--tool-call-parser none"), std::string::npos) << r.body;
  // The script hook needs its flag.
  const HttpResult hook = off->post("/v1/chat/completions", request({"x"}).dump());
  EXPECT_EQ(hook.status, 400) << hook.body;
  EXPECT_NE(hook.body.find("--test-scripted-output"), std::string::npos) << hook.body;
  // Unknown parser names fail at once, before the model loads.
  for (const char* flag : {"--reasoning-parser", "--tool-call-parser"}) {
    const CommandResult r =
        run_command("timeout 60 " + std::string(VELA_BINARY) + " serve -m " +
                    shell_quote(shared_path("models/tiny-qwen2-bpe-F16.gguf").string()) + " " +
                    flag + " bogus");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("unknown parser 'bogus'"), std::string::npos) << r.err;
  }
  std::filesystem::remove(odd);
}

}  // namespace
}  // namespace vela::test

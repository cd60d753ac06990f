// Tool-call parsing (whole and streamed, every split point) for each format, the request's
// tool fields, and the grammar that forces a call.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "constraint/gbnf.h"
#include "constraint/grammar_matcher.h"
#include "grammar_accepts.h"
#include "server/tool_calls.h"

namespace vela::server {
namespace {

using json = nlohmann::json;

struct Assembled {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

Assembled assemble(const std::vector<ToolCallStreamParser::Delta>& deltas) {
  Assembled a;
  for (const auto& d : deltas) {
    if (d.index < 0) {
      a.content += d.content;
      continue;
    }
    if (size_t(d.index) >= a.calls.size()) {
      EXPECT_EQ(size_t(d.index), a.calls.size());
      EXPECT_FALSE(d.id.empty());
      a.calls.push_back({d.name, ""});
    }
    a.calls[size_t(d.index)].second += d.arguments;
  }
  return a;
}

// Streams `text` split into pieces of `step` bytes.
Assembled stream(const std::string& text, ToolCallFormat format, size_t step) {
  ToolCallStreamParser p(format);
  std::vector<ToolCallStreamParser::Delta> all;
  for (size_t i = 0; i < text.size(); i += step)
    for (auto& d : p.push(std::string_view(text).substr(i, step))) all.push_back(std::move(d));
  for (auto& d : p.finish()) all.push_back(std::move(d));
  return assemble(all);
}

struct Case {
  ToolCallFormat format;
  std::string text;
  std::vector<std::pair<std::string, json>> calls;
  std::string content;
};

TEST(ToolCalls, WholeAndStreamedAgree) {
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris \\\"x\\\"\", "
       "\"days\": 3}}\n</tool_call>",
       {{"get_weather", {{"city", "Paris \"x\""}, {"days", 3}}}},
       ""},
      {ToolCallFormat::kHermes,
       "Let me "
       "check.<tool_call>{\"name\":\"a\",\"arguments\":{}}</"
       "tool_call>\n<tool_call>{\"arguments\":{\"k\":[1,{\"z\":\"}\"}]},\"name\":\"b\"}</"
       "tool_call>",
       {{"a", json::object()}, {"b", {{"k", {1, {{"z", "}"}}}}}}},
       "Let me check."},
      {ToolCallFormat::kHermes, "no calls here < tool_call", {}, "no calls here < tool_call"},
      {ToolCallFormat::kLlama3Json,
       "{\"name\": \"f\", \"parameters\": {\"x\": 1}}",
       {{"f", {{"x", 1}}}},
       ""},
      {ToolCallFormat::kLlama3Json,
       "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": "
       "{\"y\": \"z\"}}",
       {{"f", json::object()}, {"g", {{"y", "z"}}}},
       ""},
      {ToolCallFormat::kLlama3Json, "Just text {not json}", {}, "Just text {not json}"},
      {ToolCallFormat::kLlama3Json,
       "{\"answer\": {\"name\": \"x\"}}",
       {},
       "{\"answer\": {\"name\": \"x\"}}"},
      {ToolCallFormat::kLlama3Json, "<|python_tag|>print(1)", {}, "<|python_tag|>print(1)"},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"m\", \"arguments\": {\"q\": true}}]",
       {{"m", {{"q", true}}}},
       ""},
      {ToolCallFormat::kMistral, "[TOOL is not it", {}, "[TOOL is not it"},
      {ToolCallFormat::kMistral,
       " [TOOL_CALLS] [{\"name\": \"m\", \"arguments\": {}}, {\"arguments\": {\"s\": "
       "\"]\"}, \"name\": \"n\"}]",
       {{"m", json::object()}, {"n", {{"s", "]"}}}},
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const ParsedToolOutput whole = parse_tool_calls(c.text, c.format);
    ASSERT_EQ(whole.calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(whole.calls[i].name, c.calls[i].first);
      EXPECT_EQ(json::parse(whole.calls[i].arguments), c.calls[i].second);
      EXPECT_EQ(whole.calls[i].id.rfind("call_", 0), 0u);
    }
    EXPECT_EQ(whole.content.value_or(""), c.content);
    for (size_t step : {size_t(1), size_t(2), size_t(3), size_t(7), c.text.size()}) {
      SCOPED_TRACE(step);
      const Assembled s = stream(c.text, c.format, step);
      ASSERT_EQ(s.calls.size(), c.calls.size());
      for (size_t i = 0; i < c.calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].first, c.calls[i].first);
        EXPECT_EQ(json::parse(s.calls[i].second), c.calls[i].second) << s.calls[i].second;
      }
      EXPECT_EQ(std::string(s.content), c.calls.empty() ? c.text : c.content);
    }
  }
}

TEST(ToolCalls, ArgumentsStreamIncrementallyInEveryFormat) {
  const std::string args = "{\"a\": \"long value\", \"b\": [1, 2, 3]}";
  const std::vector<std::pair<ToolCallFormat, std::string>> outputs = {
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": " + args + "}</tool_call>"},
      {ToolCallFormat::kLlama3Json, "{\"name\": \"f\", \"parameters\": " + args + "}"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": " + args + "}]"},
  };
  for (const auto& [format, text] : outputs) {
    SCOPED_TRACE(text);
    ToolCallStreamParser p(format);
    int argument_deltas = 0;
    std::string streamed;
    for (char ch : text)
      for (const auto& d : p.push(std::string(1, ch))) {
        EXPECT_TRUE(d.content.empty()) << "leaked: " << d.content;
        argument_deltas += !d.arguments.empty();
        streamed += d.arguments;
      }
    for (const auto& d : p.finish()) streamed += d.arguments;
    EXPECT_GT(argument_deltas, 10) << "arguments arrive while the call is being written";
    EXPECT_EQ(streamed, args);
    EXPECT_TRUE(p.saw_calls());
  }
}

TEST(ToolCalls, RequestFields) {
  const json tools = json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  ToolRequest r;
  EXPECT_FALSE(read_tool_request(json{{"tools", tools}, {"tool_choice", "required"}}, r));
  EXPECT_EQ(r.choice, ToolRequest::Choice::kRequired);
  ToolRequest named;
  EXPECT_FALSE(read_tool_request(
      json{{"tools", tools},
           {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}},
      named));
  EXPECT_EQ(named.named, "f");
  ToolRequest bad;
  auto e = read_tool_request(
      json{{"tools", tools},
           {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
      bad);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'nope'"), std::string::npos);
  EXPECT_TRUE(read_tool_request(json{{"tools", json::array({1})}}, bad));
  EXPECT_TRUE(read_tool_request(json{{"tool_choice", "sometimes"}}, bad));
  // A "type" of another JSON type is a 400, not a json::type_error (found by request_fuzzer).
  EXPECT_TRUE(
      read_tool_request(json::parse(R"({"tools":[{"type":1,"function":{"name":"f"}}]})"), bad));
  EXPECT_TRUE(read_tool_request(
      json{{"tools", tools},
           {"tool_choice", {{"type", json::array({1})}, {"function", {{"name", "f"}}}}}},
      bad));
}

TEST(ToolCalls, ForcedGrammarAcceptsOnlyCallsToTheTools) {
  const json tools =
      json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"x":{"type":"integer"}},"required":["x"]}}},{"type":"function","function":{"name":"g"}}])");
  ToolRequest r;
  ASSERT_FALSE(read_tool_request(json{{"tools", tools}, {"tool_choice", "required"}}, r));
  for (ToolCallFormat format :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral}) {
    auto text = tool_call_grammar(r, format);
    ASSERT_TRUE(text) << text.message();
    auto g = constraint::compile_gbnf(*text);
    ASSERT_TRUE(g) << g.message() << "\n" << *text;
    const auto matches = [&](const std::string& s) { return test::grammar_accepts(*g, s); };
    const std::string key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
    const std::string call = "{\"name\": \"f\", \"" + key + "\": {\"x\": 5}}";
    const std::string other = "{\"name\": \"g\", \"" + key + "\": {}}";
    const std::string unknown = "{\"name\": \"h\", \"" + key + "\": {}}";
    const auto wrap = [&](const std::string& c) {
      switch (format) {
        case ToolCallFormat::kHermes:
          return "<tool_call>\n" + c + "\n</tool_call>";
        case ToolCallFormat::kMistral:
          return "[TOOL_CALLS][" + c + "]";
        default:
          return c;
      }
    };
    EXPECT_TRUE(matches(wrap(call))) << *text;
    EXPECT_TRUE(matches(wrap(other)));
    EXPECT_FALSE(matches(wrap(unknown)));
    EXPECT_FALSE(matches("plain text"));
    EXPECT_EQ(parse_tool_calls(wrap(call), format).calls.size(), 1u);
  }
}

// A forced call writes a tool's parameters in the order the request wrote them (as vLLM's
// grammars do), not sorted: "zeta" before "alpha", in a JSON format and in an XML one.
TEST(ToolCalls, ForcedCallsKeepTheParametersWrittenOrder) {
  const std::string raw =
      R"({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",)"
      R"("properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},)"
      R"("required":["zeta","alpha"]}}}],"tool_choice":"required"})";
  ToolRequest r;
  ASSERT_FALSE(read_tool_request(json::parse(raw), r, raw));
  const std::string kept = r.tools.dump();
  EXPECT_LT(kept.find("zeta"), kept.find("alpha")) << kept;
  const auto accepts = [&](ToolCallFormat format, const std::string& s) {
    auto text = tool_call_grammar(r, format);
    EXPECT_TRUE(text) << text.message();
    auto g = constraint::compile_gbnf(*text);
    EXPECT_TRUE(g) << g.message() << "\n" << *text;
    return test::grammar_accepts(*g, s);
  };
  const std::string hermes = "<tool_call>\n{\"name\": \"f\", \"arguments\": ";
  EXPECT_TRUE(
      accepts(ToolCallFormat::kHermes, hermes + "{\"zeta\": 1, \"alpha\": 2}}\n</tool_call>"));
  EXPECT_FALSE(
      accepts(ToolCallFormat::kHermes, hermes + "{\"alpha\": 2, \"zeta\": 1}}\n</tool_call>"));
  const auto xml = [](const char* first, const char* second) {
    return std::string("<tool_call>\n<function=f>\n<parameter=") + first + ">\n1\n</parameter>\n" +
           "<parameter=" + second + ">\n2\n</parameter>\n</function>\n</tool_call>";
  };
  EXPECT_TRUE(accepts(ToolCallFormat::kQwen3Coder, xml("zeta", "alpha")));
  EXPECT_FALSE(accepts(ToolCallFormat::kQwen3Coder, xml("alpha", "zeta")));
  // Without the request's text (a body built in code) the parsed order stands.
  ToolRequest parsed;
  ASSERT_FALSE(read_tool_request(json::parse(raw), parsed));
  EXPECT_EQ(parsed.tools.size(), 1u);
}

}  // namespace
}  // namespace vela::server

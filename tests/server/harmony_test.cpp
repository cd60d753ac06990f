// gpt-oss's harmony output through the gpt_oss reasoning parser and then the gpt_oss tool-call
// parser, as the server chains them: whole and streamed at every piece size (markers split
// anywhere), the forced-call grammar, and `auto`'s choice on the real gpt-oss template.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "constraint/gbnf.h"
#include "constraint/grammar_matcher.h"
#include "grammar_accepts.h"
#include "server/reasoning/reasoning_parser.h"
#include "server/structured_output_request.h"
#include "server/tool_calls.h"
#include "support/shared_data.h"

namespace vela::server {
namespace {

using json = nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
])");

struct Out {
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments text
};

// The output in pieces of `step` bytes (0: whole) through both parsers.
Out run(std::string_view text, size_t step) {
  ReasoningStream rs(ReasoningFormat::kGptOss, reasoning::Phase::kBefore);
  ToolCallStreamParser tp(ToolCallFormat::kGptOss, kTools);
  Out o;
  const auto take = [&](const std::vector<ToolCallDelta>& deltas) {
    for (const ToolCallDelta& d : deltas) {
      if (d.index < 0) {
        o.content += d.content;
        continue;
      }
      if (size_t(d.index) == o.calls.size()) o.calls.push_back({d.name, ""});
      o.calls.at(size_t(d.index)).second += d.arguments;
    }
  };
  const auto feed = [&](const ReasoningStream::Split& s) {
    o.reasoning += s.reasoning;
    take(tp.push(s.content));
  };
  if (step == 0) step = text.size();
  for (size_t i = 0; i < text.size(); i += step) feed(rs.push(text.substr(i, step)));
  feed(rs.finish());
  take(tp.finish());
  return o;
}

void expect(const std::string& text, const std::string& reasoning, const std::string& content,
            const std::vector<std::pair<std::string, json>>& calls) {
  SCOPED_TRACE(text);
  for (size_t step = 0; step <= text.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Out o = run(text, step);
    EXPECT_EQ(o.reasoning, reasoning);
    EXPECT_EQ(o.content, content);
    ASSERT_EQ(o.calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(o.calls[i].first, calls[i].first);
      EXPECT_EQ(json::parse(o.calls[i].second, nullptr, false), calls[i].second)
          << o.calls[i].second;
    }
  }
}

TEST(Harmony, AnalysisThenFinal) {
  expect(
      "<|channel|>analysis<|message|>Think of it.<|end|><|start|>assistant<|channel|>final"
      "<|message|>Hello there.<|return|>",
      "Think of it.", "Hello there.", {});
  expect(
      "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>final<|message|>"
      "Hi<|end|>",
      "Hm.", "Hi", {});
}

TEST(Harmony, AnalysisThenToolCall) {
  expect(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary"
      " to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
      "Need weather.", "", {{"get_weather", {{"city", "Paris"}}}});
  // The recipient before the channel.
  expect(
      "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.get_weather"
      "<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>",
      "x", "", {{"get_weather", {{"city", "Oslo"}}}});
}

TEST(Harmony, FinalOnlyAndPlainText) {
  expect("<|channel|>final<|message|>Just this.<|return|>", "", "Just this.", {});
  expect("no markers at all", "", "no markers at all", {});
  expect("lead <|channel|>final<|message|>answer", "", "lead answer", {});
}

// Cut off by max_tokens inside analysis, even mid-marker: all reasoning.
TEST(Harmony, UnterminatedAnalysisAtMaxTokens) {
  expect("<|channel|>analysis<|message|>Still thinking", "Still thinking", "", {});
  expect("<|channel|>analysis<|message|>Still thinking <|en", "Still thinking <|en", "", {});
}

TEST(Harmony, ToolCallArgumentsStream) {
  ToolCallStreamParser tp(ToolCallFormat::kGptOss, kTools);
  EXPECT_EQ(tp.push("<|start|>assistant<|channel|>commentary to=functions.get_weather "
                    "<|constrain|>json<|message|>")
                .size(),
            1u);
  const std::vector<ToolCallDelta> d = tp.push("{\"city\": \"Pa");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].arguments, "{\"city\": \"Pa");
}

TEST(Harmony, ForcedGrammar) {
  ToolRequest r;
  ASSERT_FALSE(read_tool_request(json{{"tools", kTools}, {"tool_choice", "required"}}, r));
  auto text = tool_call_grammar(r, ToolCallFormat::kGptOss);
  ASSERT_TRUE(text) << text.message();
  auto g = constraint::compile_gbnf(*text);
  ASSERT_TRUE(g) << g.message() << "\n" << *text;
  const auto matches = [&](const std::string& s) { return test::grammar_accepts(*g, s); };
  const std::string good =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
      "\"Paris\"}<|call|>";
  EXPECT_TRUE(matches(good)) << *text;
  EXPECT_TRUE(matches("<|start|>assistant" + good)) << *text;
  EXPECT_FALSE(
      matches("<|channel|>commentary to=functions.get_weather <|constrain|>json"
              "<|message|>{}<|call|>"));  // city is required
  EXPECT_EQ(parse_tool_calls(good, ToolCallFormat::kGptOss, kTools).calls.size(), 1u);
}

// response_format under harmony: the JSON is the final channel's message, after an optional
// analysis message; the analysis stays free text.
TEST(Harmony, StructuredOutputIsTheFinalMessage) {
  StructuredOutputs answer;
  answer.json = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                   "additionalProperties": false})";
  auto whole = harmony_final_answer(answer);
  ASSERT_TRUE(whole) << whole.message();
  ASSERT_TRUE(whole->grammar);
  auto g = constraint::compile_gbnf(*whole->grammar);
  ASSERT_TRUE(g) << g.message() << "\n" << *whole->grammar;
  const auto matches = [&](const std::string& s) { return test::grammar_accepts(*g, s); };
  const std::string final_json = "<|channel|>final<|message|>{\"a\": 1}";
  EXPECT_TRUE(matches(final_json));
  EXPECT_TRUE(matches("<|start|>assistant" + final_json));
  EXPECT_TRUE(
      matches("<|channel|>analysis<|message|>Let me think: 1 < 2, {not json}.<|end|>"
              "<|start|>assistant" +
              final_json));
  EXPECT_FALSE(matches("{\"a\": 1}"));  // no header
  EXPECT_FALSE(matches("<|channel|>final<|message|>{\"b\": 1}"));
  EXPECT_FALSE(matches("<|channel|>commentary<|message|>{\"a\": 1}"));
  // The answer's own errors are reported as such.
  StructuredOutputs bad;
  bad.json = "{not a schema";
  EXPECT_FALSE(harmony_final_answer(bad));
}

TEST(Harmony, NamesAndAutoOnTheRealTemplate) {
  EXPECT_EQ(reasoning_format_from_name("gpt_oss"), ReasoningFormat::kGptOss);
  EXPECT_EQ(tool_call_format_from_name("gpt_oss"), ToolCallFormat::kGptOss);
  VELA_REQUIRE_SHARED();
  std::ifstream in(test::shared_path("chat-templates/templates/openai-gpt-oss-120b.jinja"));
  std::ostringstream s;
  s << in.rdbuf();
  const std::string source = s.str();
  ASSERT_FALSE(source.empty());
  std::string why;
  EXPECT_EQ(detect_reasoning_format(source, why), ReasoningFormat::kGptOss) << why;
  EXPECT_EQ(detect_tool_call_format(source), ToolCallFormat::kGptOss);
  EXPECT_TRUE(template_uses_tools(source));
}

}  // namespace
}  // namespace vela::server

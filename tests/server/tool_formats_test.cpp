// The tool-call syntaxes of the 2026 families (Qwen3-Coder / Qwen3.5 XML, DeepSeek-V3.1,
// GLM-4.5, Mistral's NAME[ARGS]): parsed whole and streamed piece by piece at every split
// point, values typed by the tool's schema, the text the real chat templates write for an
// assistant's calls read back into the same calls, the forced-call grammars, and `auto`'s
// choice per template.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "constraint/gbnf.h"
#include "constraint/grammar_matcher.h"
#include "grammar_accepts.h"
#include "server/chat_formatter.h"
#include "server/tool_calls.h"
#include "support/shared_data.h"

namespace vela::server {
namespace {

using json = nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                   "metric": {"type": "boolean"}, "where": {"type": "object"},
                   "ratio": {"type": "number"}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}}}}
])");

struct Result {
  std::string content;
  std::vector<std::pair<std::string, json>> calls;  // name, parsed arguments
};

Result stream(std::string_view text, ToolCallFormat format, size_t step) {
  ToolCallStreamParser p(format, kTools);
  std::vector<ToolCallDelta> all;
  for (size_t i = 0; i < text.size(); i += step)
    for (auto& d : p.push(text.substr(i, step))) all.push_back(std::move(d));
  for (auto& d : p.finish()) all.push_back(std::move(d));
  Result r;
  std::vector<std::string> args;
  for (const ToolCallDelta& d : all) {
    if (d.index < 0) {
      r.content += d.content;
      continue;
    }
    if (size_t(d.index) == args.size()) {
      EXPECT_FALSE(d.id.empty());
      r.calls.push_back({d.name, nullptr});
      args.emplace_back();
    }
    EXPECT_LT(size_t(d.index), args.size());
    args[size_t(d.index)] += d.arguments;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    r.calls[i].second = json::parse(args[i], nullptr, false);
    EXPECT_FALSE(r.calls[i].second.is_discarded()) << "not JSON: " << args[i];
  }
  return r;
}

std::string read_template(const std::string& file) {
  std::ifstream in(test::shared_path("chat-templates/templates/" + file));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trimmed(std::string_view c) {
  while (!c.empty() && std::isspace(static_cast<unsigned char>(c.back()))) c.remove_suffix(1);
  while (!c.empty() && std::isspace(static_cast<unsigned char>(c.front()))) c.remove_prefix(1);
  return std::string(c);
}

// Whole and at every piece size: the same calls; content as given (streamed content keeps
// the whitespace the whole parse trims).
void expect_calls(ToolCallFormat format, const std::string& text, const std::string& content,
                  const std::vector<std::pair<std::string, json>>& calls) {
  SCOPED_TRACE(text);
  const ParsedToolOutput whole = parse_tool_calls(text, format, kTools);
  ASSERT_EQ(whole.calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(whole.calls[i].name, calls[i].first);
    EXPECT_EQ(json::parse(whole.calls[i].arguments), calls[i].second) << whole.calls[i].arguments;
    EXPECT_EQ(whole.calls[i].id.rfind("call_", 0), 0u);
  }
  EXPECT_EQ(whole.content.value_or(""), content);
  for (size_t step = 1; step <= text.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Result s = stream(text, format, step);
    ASSERT_EQ(s.calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(s.calls[i].first, calls[i].first);
      EXPECT_EQ(s.calls[i].second, calls[i].second);
    }
    EXPECT_EQ(trimmed(s.content), content);
  }
}

TEST(ToolFormats, Qwen3CoderXml) {
  expect_calls(ToolCallFormat::kQwen3Coder,
               "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis "
               "\"Nord\"\nline 2\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter="
               "metric>\ntrue\n</parameter>\n<parameter=where>\n{\"lat\": 48.8}\n</parameter>\n"
               "<parameter=ratio>\n2.0\n</parameter>\n</function>\n</tool_call>",
               "Let me check.",
               {{"get_weather",
                 {{"city", "Paris \"Nord\"\nline 2"},
                  {"days", 3},
                  {"metric", true},
                  {"where", {{"lat", 48.8}}},
                  {"ratio", 2}}}});
  // Two calls; a value that does not fit its type stays a string; </parameter> left out.
  expect_calls(
      ToolCallFormat::kQwen3Coder,
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n<parameter=days>\n"
      "soon\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
      "</function>\n</tool_call>",
      "", {{"get_weather", {{"city", "Rome"}, {"days", "soon"}}}, {"get_time", json::object()}});
  // Cut off inside a value: the call closes with what came.
  expect_calls(ToolCallFormat::kQwen3Coder,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs", "",
               {{"get_weather", {{"city", "Os"}}}});
  expect_calls(ToolCallFormat::kQwen3Coder, "No calls <tool here.", "No calls <tool here.", {});
}

TEST(ToolFormats, Glm45) {
  expect_calls(ToolCallFormat::kGlm45,
               "I will look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Köln"
               "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n<arg_key>where"
               "</arg_key>\n<arg_value>{\"a\": [1]}</arg_value>\n</tool_call>\n<tool_call>"
               "get_time\n</tool_call>",
               "I will look.",
               {{"get_weather", {{"city", "Köln"}, {"days", 2}, {"where", {{"a", {1}}}}}},
                {"get_time", json::object()}});
}

TEST(ToolFormats, DeepSeekV31) {
  expect_calls(
      ToolCallFormat::kDeepSeekV31,
      "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
      "{\"city\": \"Paris\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time"
      "<｜tool▁sep｜>{\"zone\": \"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      "Checking.",
      {{"get_weather", {{"city", "Paris"}, {"days", 3}}}, {"get_time", {{"zone", "UTC"}}}});
}

TEST(ToolFormats, MistralNamed) {
  expect_calls(ToolCallFormat::kMistral,
               "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"a}b\", \"days\": 1}[TOOL_CALLS]get_time"
               "[CALL_ID]abcdefghi[ARGS]{\"zone\": \"CET\"}",
               "",
               {{"get_weather", {{"city", "a}b"}, {"days", 1}}}, {"get_time", {{"zone", "CET"}}}});
  // The older JSON-list form still parses.
  expect_calls(ToolCallFormat::kMistral,
               "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]", "",
               {{"get_time", {{"zone", "UTC"}}}});
}

TEST(ToolFormats, StringArgumentsStreamAsTheyCome) {
  const std::string text =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nA long city name indeed\n"
      "</parameter>\n</function>\n</tool_call>";
  ToolCallStreamParser p(ToolCallFormat::kQwen3Coder, kTools);
  int deltas = 0;
  for (char ch : text)
    for (const auto& d : p.push(std::string(1, ch))) {
      EXPECT_TRUE(d.content.empty()) << "leaked: " << d.content;
      deltas += !d.arguments.empty();
    }
  EXPECT_GT(deltas, 15);
}

// The real templates write an assistant's calls; each parser reads them back.
struct TemplateCase {
  const char* file;
  ToolCallFormat format;
  const char* begin;  // where the calls start in the rendered text
  const char* end;    // just past them
};

TEST(ToolFormats, RealTemplatesRoundTrip) {
  VELA_REQUIRE_SHARED();
  const json calls = json::parse(R"([
    {"id": "abcdefghi", "type": "function", "function": {"name": "get_weather",
     "arguments": {"city": "Paris", "days": 3}}},
    {"id": "bcdefghij", "type": "function", "function": {"name": "get_time",
     "arguments": {"zone": "UTC"}}}])");
  const json messages =
      json::array({json{{"role", "user"}, {"content", "Weather and time?"}},
                   json{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}});
  const TemplateCase cases[] = {
      {"Qwen3-Coder.jinja", ToolCallFormat::kQwen3Coder, "<tool_call>", "</tool_call>"},
      {"Qwen3.5-4B.jinja", ToolCallFormat::kQwen3Coder, "<tool_call>", "</tool_call>"},
      {"GLM-4.6.jinja", ToolCallFormat::kGlm45, "<tool_call>", "</tool_call>"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallFormat::kDeepSeekV31, "<｜tool▁calls▁begin｜>",
       "<｜tool▁calls▁end｜>"},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::kMistral, "[TOOL_CALLS]",
       "</s>"},
  };
  for (const TemplateCase& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string source = read_template(c.file);
    auto formatter = ChatFormatter::create(source, "<s>", "</s>");
    ASSERT_TRUE(formatter) << formatter.message();
    EXPECT_EQ(detect_tool_call_format(source), c.format);
    auto text = formatter->render(messages, false, kTools);
    ASSERT_TRUE(text) << text.message();
    // The assistant's turn (system prompts show example calls).
    const size_t from = text->find(c.begin, text->find("Weather and time?"));
    const size_t to = text->rfind(c.end);
    ASSERT_NE(from, std::string::npos) << *text;
    ASSERT_NE(to, std::string::npos) << *text;
    const std::string written = text->substr(from, to - from + std::string_view(c.end).size());
    const std::string body = c.format == ToolCallFormat::kMistral
                                 ? written.substr(0, written.size() - 4)  // without </s>
                                 : written;
    expect_calls(
        c.format, body, "",
        {{"get_weather", {{"city", "Paris"}, {"days", 3}}}, {"get_time", {{"zone", "UTC"}}}});
  }
}

TEST(ToolFormats, AutoPicksByTemplate) {
  VELA_REQUIRE_SHARED();
  const auto detect = [](const char* file) { return detect_tool_call_format(read_template(file)); };
  EXPECT_EQ(detect("Qwen3-Coder.jinja"), ToolCallFormat::kQwen3Coder);
  EXPECT_EQ(detect("Qwen3.5-4B.jinja"), ToolCallFormat::kQwen3Coder);
  EXPECT_EQ(detect("Qwen-Qwen3-0.6B.jinja"), ToolCallFormat::kHermes);
  EXPECT_EQ(detect("GLM-4.6.jinja"), ToolCallFormat::kGlm45);
  EXPECT_EQ(detect("deepseek-ai-DeepSeek-V3.1.jinja"), ToolCallFormat::kDeepSeekV31);
  EXPECT_EQ(detect("Mistral-Small-3.2-24B-Instruct-2506.jinja"), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format("{{ messages }}"), std::nullopt);
  EXPECT_FALSE(template_uses_tools("{{ messages }}"));
  for (const char* name :
       {"hermes", "llama3_json", "mistral", "qwen3_coder", "deepseek_v31", "glm45"})
    EXPECT_EQ(tool_call_format_name(*tool_call_format_from_name(name)), std::string(name));
  EXPECT_EQ(tool_call_format_from_name("harmony?"), std::nullopt);
}

TEST(ToolFormats, ForcedGrammars) {
  ToolRequest r;
  ASSERT_FALSE(read_tool_request(json{{"tools", kTools}, {"tool_choice", "required"}}, r));
  const std::vector<std::tuple<ToolCallFormat, std::string, std::string>> cases = {
      {ToolCallFormat::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"UTC\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"PST\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter="
       "days>\n3\n</parameter>\n</function>\n</tool_call>",
       "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n"
       "</tool_call>"},  // city is required
      {ToolCallFormat::kGlm45,
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>metric</arg_key>\n<arg_value>false</arg_value>\n</tool_call>",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>metric</arg_key>\n<arg_value>maybe</arg_value>\n</tool_call>"},
  };
  for (const auto& [format, good, bad] : cases) {
    SCOPED_TRACE(tool_call_format_name(format));
    auto text = tool_call_grammar(r, format);
    ASSERT_TRUE(text) << text.message();
    auto g = constraint::compile_gbnf(*text);
    ASSERT_TRUE(g) << g.message() << "\n" << *text;
    const auto matches = [&](const std::string& s) { return test::grammar_accepts(*g, s); };
    EXPECT_TRUE(matches(good)) << *text;
    EXPECT_FALSE(matches(bad)) << *text;
    EXPECT_FALSE(matches("plain text"));
    EXPECT_EQ(parse_tool_calls(good, format, kTools).calls.size(), 1u);
  }
}

}  // namespace
}  // namespace vela::server

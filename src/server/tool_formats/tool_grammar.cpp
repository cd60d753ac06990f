#include "server/tool_formats/tool_grammar.h"

#include "constraint/gbnf_rules.h"
#include "constraint/json_schema_to_gbnf.h"
#include "server/tool_formats/tool_format_parser.h"

namespace vela::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// A GBNF string literal.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out + "\"";
}

// The grammar of `schema` with its rules renamed under `prefix`; its root is `prefix`"root".
Result<std::string> sub_grammar(const ojson& schema, const std::string& prefix) {
  constraint::JsonGrammarOptions options;
  options.compact_whitespace = true;
  auto g = constraint::json_schema_to_gbnf(schema, options);
  if (!g) return make_error("invalid tool parameters: " + g.message());
  return constraint::prefix_gbnf_rules(*g, prefix);
}

ojson parameters_of(const ojson& function) {
  ojson params = function.value("parameters", ojson::object());
  if (!params.is_object() || params.empty())
    params =
        ojson{{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
  return params;
}

// XML formats: each parameter by name, in the schema's order (the required ones always).
Result<std::string> xml_parameters(const ojson& params, const std::string& prefix,
                                   ToolCallFormat format, std::string& rules) {
  const ojson props = params.value("properties", ojson::object());
  const ojson required = params.value("required", ojson::array());
  std::string seq;
  int i = 0;
  for (const auto& [key, schema] : props.items()) {
    const std::string p = prefix + "p" + std::to_string(i++);
    std::string type;
    if (schema.is_object() && schema.contains("type") && schema["type"].is_string())
      type = schema["type"].get<std::string>();
    std::string value;
    if (type.empty() || tool_text::is_string_type(type)) {
      value = "xml-text";
    } else {
      auto sub = sub_grammar(schema, p + "-");
      if (!sub) return sub.error();
      rules += *sub;
      value = p + "-root";
    }
    const std::string open = format == ToolCallFormat::kQwen3Coder
                                 ? "<parameter=" + key + ">\n"
                                 : "<arg_key>" + key + "</arg_key>\n<arg_value>";
    const std::string close =
        format == ToolCallFormat::kQwen3Coder ? "\n</parameter>\n" : "</arg_value>\n";
    rules += p + " ::= " + literal(open) + " " + value + " " + literal(close) + "\n";
    bool is_required = false;
    for (const ojson& r : required) is_required = is_required || r == key;
    seq += " " + p + (is_required ? "" : "?");
  }
  return seq.empty() ? std::string(" \"\"") : seq;
}

}  // namespace

Result<std::string> named_tool_call_grammar(const ToolRequest& request, ToolCallFormat format,
                                            int max_calls) {
  std::string rules, alternatives;
  int i = 0;
  for (const ojson& t : request.tools) {
    const ojson& f = t["function"];
    const std::string name = f["name"].get<std::string>();
    if (request.choice == ToolRequest::Choice::kNamed && name != request.named) continue;
    const std::string prefix = "t" + std::to_string(i++) + "-";
    const ojson params = parameters_of(f);
    std::string body;
    if (format == ToolCallFormat::kDeepSeekV31 || format == ToolCallFormat::kGptOss) {
      auto sub = sub_grammar(params, prefix);
      if (!sub) return sub.error();
      rules += *sub;
      body = literal(name + (format == ToolCallFormat::kGptOss ? " <|constrain|>json<|message|>"
                                                               : "<｜tool▁sep｜>")) +
             " " + prefix + "root";
    } else {
      auto seq = xml_parameters(params, prefix, format, rules);
      if (!seq) return seq.error();
      body = literal(format == ToolCallFormat::kQwen3Coder ? name + ">\n" : name + "\n") + *seq;
    }
    rules += prefix + "call ::= " + body + "\n";
    alternatives += (alternatives.empty() ? "" : " | ") + prefix + "call";
  }
  if (alternatives.empty()) return make_error("no tool matches tool_choice");
  const std::string more = request.parallel ? "{0," + std::to_string(max_calls - 1) + "}" : "{0}";
  std::string root;
  switch (format) {
    case ToolCallFormat::kDeepSeekV31:
      root = "root ::= \"<｜tool▁calls▁begin｜>\" one-call one-call" + more +
             " \"<｜tool▁calls▁end｜>\"\n"
             "one-call ::= \"<｜tool▁call▁begin｜>\" (" +
             alternatives + ") \"<｜tool▁call▁end｜>\"\n";
      break;
    case ToolCallFormat::kQwen3Coder:
      root = "root ::= one-call (\"\\n\" one-call)" + more +
             "\none-call ::= \"<tool_call>\\n<function=\" (" + alternatives +
             ") \"</function>\\n</tool_call>\"\n";
      break;
    case ToolCallFormat::kGptOss:
      // One call: harmony ends the turn at <|call|>. The header's `<|start|>assistant` is there
      // when the constraint begins after an analysis message.
      root = "root ::= \"<|start|>assistant\"? \"<|channel|>commentary to=functions.\" (" +
             alternatives + ") \"<|call|>\"\n";
      break;
    default:  // GLM-4.5
      root = "root ::= one-call (\"\\n\" one-call)" + more + "\none-call ::= \"<tool_call>\" (" +
             alternatives + ") \"</tool_call>\"\n";
      break;
  }
  return root + "xml-text ::= [^<]*\n" + rules;
}

}  // namespace vela::server

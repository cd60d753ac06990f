#pragma once
// Streaming parsers of the tool-call syntaxes whose calls are not one JSON object per call:
// Qwen3-Coder / Qwen3.5 XML (`<function=NAME><parameter=K>V</parameter>`), GLM-4.5's
// `<arg_key>`/`<arg_value>` pairs, DeepSeek-V3.1's `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}`
// Mistral's `[TOOL_CALLS]NAME[ARGS]{...}` and gpt-oss's harmony messages to `functions.NAME`.
// Each turns the model's text, in pieces of any size, into content and tool-call deltas whose
// arguments assemble into one JSON object per call; markers split across pieces are held back
// until known. XML values are typed by the tool's JSON schema (string parameters stream as they
// come; others go out when complete).
// Thread-safety: none; one parser per generated sequence.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_calls.h"

namespace vela::server {

class ToolFormatParser {
 public:
  virtual ~ToolFormatParser() = default;
  void push(std::string_view text, std::vector<ToolCallDelta>& out);
  void finish(std::vector<ToolCallDelta>& out);
  int calls() const { return n_calls_; }

 protected:
  virtual void scan(std::vector<ToolCallDelta>& out, bool at_end) = 0;

  // Content outside calls; after a call, text that is only whitespace is dropped.
  void emit_content(std::string_view text, std::vector<ToolCallDelta>& out);
  void begin_call(std::string name, std::vector<ToolCallDelta>& out);
  void emit_arguments(std::string_view text, std::vector<ToolCallDelta>& out);
  void end_call() { ++n_calls_; }

  std::string buffer_;  // text not yet consumed
  int n_calls_ = 0;
};

// The parser for `format` (one of the formats above); `tools` is the request's tools array.
std::unique_ptr<ToolFormatParser> make_tool_format_parser(ToolCallFormat format,
                                                          const nlohmann::json& tools);
// Mistral's `[TOOL_CALLS]NAME[ARGS]{...}` (the older JSON-list form stays in tool_calls.cpp).
std::unique_ptr<ToolFormatParser> make_mistral_named_parser();
std::unique_ptr<ToolFormatParser> make_qwen3_coder_parser(const nlohmann::json& tools);
std::unique_ptr<ToolFormatParser> make_glm45_parser(const nlohmann::json& tools);
std::unique_ptr<ToolFormatParser> make_deepseek_v31_parser();
std::unique_ptr<ToolFormatParser> make_gpt_oss_parser();

// "call_" and 24 random letters and digits.
std::string new_call_id();

// Helpers shared by the parsers.
namespace tool_text {

inline constexpr size_t npos = std::string_view::npos;

// The first of `markers` in `s`: its position (npos when none) and index.
struct Found {
  size_t pos = npos;
  size_t which = 0;
};
Found find_first(std::string_view s, std::initializer_list<std::string_view> markers);
// Bytes at the end of `s` that may begin one of `markers` (to hold back).
size_t held_suffix(std::string_view s, std::initializer_list<std::string_view> markers);
size_t skip_space(std::string_view s, size_t from = 0);
// Bytes at the end of `s` that begin a UTF-8 character not yet complete (held back so a
// streamed string never splits one).
size_t utf8_tail(std::string_view s);
std::string_view trim(std::string_view s);
// `text` as the inside of a JSON string (escaped, no quotes); invalid UTF-8 becomes U+FFFD.
std::string json_string_body(std::string_view text);

// The JSON type a tool's parameter schema names ("string", "integer", "object", ...; the first
// non-null one of a list), or "" when the tool or parameter is unknown or has no type.
std::string parameter_type(const nlohmann::json& tools, std::string_view function,
                           std::string_view parameter);
bool is_string_type(std::string_view type);
// An XML parameter's text as JSON text, by its schema type: strings as written; integers,
// numbers and booleans when they parse as such; objects and arrays as JSON; "null" as null;
// anything that does not parse as a string. An unknown type reads as JSON when
// unknown_as_json (GLM) and as a string otherwise (Qwen3-Coder).
std::string typed_value_json(std::string_view value, std::string_view type, bool unknown_as_json);

}  // namespace tool_text

}  // namespace vela::server

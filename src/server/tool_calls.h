#pragma once
// OpenAI tool calling over a model's own tool-call syntax: reading `tools` / `tool_choice` /
// `parallel_tool_calls`, the grammar that forces a call (tool_choice "required" or a named
// function), and parsing the model's output back into message.tool_calls, whole or streamed.
// Formats (`vela serve --tool-call-parser`): Hermes / Qwen `<tool_call>{"name": ..., "arguments":
// ...}</tool_call>`, Llama 3.x JSON (`{"name": ..., "parameters": ...}`, optionally after
// `<|python_tag|>`), Mistral `[TOOL_CALLS][{"name": ..., "arguments": ...}]` and its newer
// `[TOOL_CALLS]NAME[ARGS]{...}`, and the formats of tool_formats/ (Qwen3-Coder XML,
// DeepSeek-V3.1, GLM-4.5, gpt-oss's harmony); `auto` reads the chat template's markers.
// Free functions and a per-choice stream parser; the parser is not thread-safe (one per choice).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "util/result.h"

namespace vela::server {

enum class ToolCallFormat {
  kHermes,
  kLlama3Json,
  kMistral,
  kQwen3Coder,
  kDeepSeekV31,
  kGlm45,
  kGptOss,
};

// The --tool-call-parser name of a format ("hermes", "qwen3_coder", ...), and back.
const char* tool_call_format_name(ToolCallFormat format);
std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name);
// Every parser name, comma-separated, for messages.
std::string tool_call_format_list();

// From the chat template source: the format whose markers it writes, or none.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view chat_template_source);
// Whether the template reads the request's tools at all.
bool template_uses_tools(std::string_view chat_template_source);

struct ToolRequest {
  // [{"type": "function", "function": {...}}] in the request's key order: the template shows the
  // model each tool's parameters, and a forced call writes them, in the order the client wrote.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  enum class Choice { kNone, kAuto, kRequired, kNamed } choice = Choice::kAuto;
  std::string named;  // kNamed: the function
  bool parallel = true;
  bool active() const { return !tools.empty(); }
  bool forced() const {
    return active() && (choice == Choice::kRequired || choice == Choice::kNamed);
  }
};

// `body` checked as parsed; `raw_body` (the same request's text, when there is one) gives the
// tools their written key order.
std::optional<ApiError> read_tool_request(const nlohmann::json& body, ToolRequest& out,
                                          std::string_view raw_body = {});

// GBNF for tool_choice required / named: one call (or, with parallel_tool_calls, one or more)
// in `format`. JSON formats: each {"name": <a tool>, "arguments": <that tool's parameters
// schema>}; formats that write the name apart: that name, then arguments by its schema (JSON)
// or its parameters' names with free-text values (XML, typed when parsed).
Result<std::string> tool_call_grammar(const ToolRequest& request, ToolCallFormat format);

struct ToolCall {
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

struct ParsedToolOutput {
  std::optional<std::string> content;  // text outside the calls; none when only calls
  std::vector<ToolCall> calls;
};

// The whole output of a choice; no calls when the text holds none that parse. `tools` (the
// request's) types the XML formats' values.
ParsedToolOutput parse_tool_calls(std::string_view text, ToolCallFormat format,
                                  const nlohmann::json& tools = nlohmann::json::array());

// message.tool_calls as OpenAI writes them.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);

// Splits a streamed output into content and tool-call deltas. Text that may start a call is
// held back until it is known, so a half-parsed call never reaches the client as content; a
// call's arguments stream as they arrive, in every format. (Llama 3 and Mistral: an output
// that starts like calls but holds none is content, released at the end.)
struct ToolCallDelta {
  std::string content;   // when index < 0
  int index = -1;        // tool call index
  std::string id, name;  // the call's first delta
  std::string arguments;
};

class ToolFormatParser;

class ToolCallStreamParser {
 public:
  using Delta = ToolCallDelta;
  explicit ToolCallStreamParser(ToolCallFormat format,
                                const nlohmann::json& tools = nlohmann::json::array());
  ~ToolCallStreamParser();
  ToolCallStreamParser(ToolCallStreamParser&&) noexcept;
  ToolCallStreamParser& operator=(ToolCallStreamParser&&) noexcept;

  std::vector<Delta> push(std::string_view text);
  std::vector<Delta> finish();  // end of output: releases what was held back
  bool saw_calls() const;

 private:
  void scan(std::vector<Delta>& out, bool at_end);
  void scan_hermes_call(std::vector<Delta>& out);
  void scan_json_calls(std::vector<Delta>& out, bool at_end);
  // Streams the name and arguments of the call whose JSON text is `body` (so far); once
  // `complete`, sends what is missing, counts the call and returns true. With
  // name_needs_arguments, the name waits until the arguments key appears.
  bool stream_call(std::string_view body, bool complete, bool name_needs_arguments,
                   std::vector<Delta>& out);

  ToolCallFormat format_;
  nlohmann::json tools_;                    // the request's, for the formats below
  std::unique_ptr<ToolFormatParser> impl_;  // tool_formats/ parsers (and Mistral's NAME[ARGS])
  std::string buffer_;                      // text not yet emitted
  bool in_call_ = false;                    // Hermes: inside <tool_call>...
  bool json_mode_ = false;                  // Llama 3 / Mistral: the output starts like calls
  size_t json_pos_ = 0;                     // json_mode_: buffer_ before this is sent
  bool json_failed_ = false;                // json_mode_: what follows json_pos_ is not a call
  bool decided_ = false;                    // whether the output starts with a call is known
  int n_calls_ = 0;
  bool name_sent_ = false;
  size_t args_sent_ = 0;  // bytes of the current call's arguments already emitted
};

}  // namespace vela::server

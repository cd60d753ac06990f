#include "server/tool_calls.h"

#include <random>

#include "constraint/json_schema_to_gbnf.h"
#include "server/tool_formats/tool_format_parser.h"
#include "server/tool_formats/tool_grammar.h"

namespace vela::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr int kMaxParallelCalls = 4;  // forced calls in one answer, at most

constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";

struct FormatName {
  ToolCallFormat format;
  const char* name;
};
constexpr FormatName kFormatNames[] = {
    {ToolCallFormat::kHermes, "hermes"},
    {ToolCallFormat::kLlama3Json, "llama3_json"},
    {ToolCallFormat::kMistral, "mistral"},
    {ToolCallFormat::kQwen3Coder, "qwen3_coder"},
    {ToolCallFormat::kDeepSeekV31, "deepseek_v31"},
    {ToolCallFormat::kGlm45, "glm45"},
    {ToolCallFormat::kGptOss, "gpt_oss"},
};

// Formats parsed by tool_formats/ alone.
bool separate_parser(ToolCallFormat f) {
  return f == ToolCallFormat::kQwen3Coder || f == ToolCallFormat::kDeepSeekV31 ||
         f == ToolCallFormat::kGlm45 || f == ToolCallFormat::kGptOss;
}

}  // namespace

std::string new_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return id;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// {"name": ..., "arguments" | "parameters": ...} -> a call; false when it is not one.
bool call_from_json(const ojson& obj, ToolCall& out) {
  if (!obj.is_object()) return false;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string()) return false;
  auto args = obj.find("arguments");
  if (args == obj.end()) args = obj.find("parameters");
  out.id = new_call_id();
  out.name = name->get<std::string>();
  if (args == obj.end())
    out.arguments = "{}";
  else if (args->is_string())
    out.arguments = args->get<std::string>();
  else
    out.arguments = args->dump();
  return true;
}

bool parse_call_text(std::string_view text, ToolCall& out) {
  const ojson j = ojson::parse(trim(text), nullptr, false);
  return !j.is_discarded() && call_from_json(j, out);
}

// Longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (marker.substr(0, n) == s.substr(s.size() - n)) return n;
  return 0;
}

// End of the JSON value starting at `s[0]` (one past it), or npos while it is incomplete.
size_t json_value_end(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if (c == '}' || c == ']') {
      if (--depth <= 0) return i + 1;
    } else if (depth == 0 && (c == ',' || std::isspace(static_cast<unsigned char>(c)))) {
      return i;  // end of a bare number / literal
    }
  }
  return std::string_view::npos;
}

// Position just after `"key"` followed by ':' and spaces, or npos.
size_t value_after_key(std::string_view s, std::string_view key) {
  std::string quoted(1, '"');  // appended piecewise: GCC 12 warns (-Wrestrict) on `+` here
  quoted.append(key).push_back('"');
  size_t at = s.find(quoted);
  if (at == std::string_view::npos) return at;
  size_t p = at + quoted.size();
  while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  if (p >= s.size() || s[p] != ':') return std::string_view::npos;
  ++p;
  while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  return p < s.size() ? p : std::string_view::npos;
}

// True when obj["key"] is the string `expected`; a missing or non-string member is false
// (json::value would throw on a member of another type).
bool has_string_member(const json& obj, const char* key, std::string_view expected) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  for (const FormatName& f : kFormatNames)
    if (f.format == format) return f.name;
  return "?";
}

std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  for (const FormatName& f : kFormatNames)
    if (name == f.name) return f.format;
  return std::nullopt;
}

std::string tool_call_format_list() {
  std::string out;
  for (const FormatName& f : kFormatNames) {
    if (!out.empty()) out += ", ";
    out += f.name;
  }
  return out;
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view source) {
  const auto has = [source](std::string_view marker) {
    return source.find(marker) != std::string_view::npos;
  };
  // Most specific first: Qwen3-Coder and GLM write <tool_call> too.
  if (has(kDeepSeekCallsBegin) || has(kDeepSeekCallBegin)) return ToolCallFormat::kDeepSeekV31;
  if (has(kMistralCalls)) return ToolCallFormat::kMistral;
  if (has("<|channel|>")) return ToolCallFormat::kGptOss;
  if (has("<function=")) return ToolCallFormat::kQwen3Coder;
  if (has("<arg_key>")) return ToolCallFormat::kGlm45;
  if (has(kHermesOpen)) return ToolCallFormat::kHermes;
  if (has(kPythonTag) || has("ipython")) return ToolCallFormat::kLlama3Json;
  return std::nullopt;
}

bool template_uses_tools(std::string_view source) {
  return source.find("tools") != std::string_view::npos;
}

std::optional<ApiError> read_tool_request(const json& body, ToolRequest& out,
                                          std::string_view raw_body) {
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return invalid_request("'tools' must be an array", "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || !has_string_member(t, "type", "function") || !t.contains("function") ||
          !t["function"].is_object())
        return invalid_request(where + " must be {\"type\": \"function\", \"function\": {...}}",
                               "tools");
      const json& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
        return invalid_request(where + ".function.name must be a non-empty string", "tools");
      if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
        return invalid_request(where + ".function.parameters must be an object", "tools");
    }
    out.tools = *tools;
    if (!raw_body.empty()) {
      const ojson doc = ojson::parse(raw_body, nullptr, /*allow_exceptions=*/false);
      if (doc.is_object() && doc.contains("tools")) out.tools = doc["tools"];
    }
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none")
        out.choice = ToolRequest::Choice::kNone;
      else if (c == "auto")
        out.choice = ToolRequest::Choice::kAuto;
      else if (c == "required")
        out.choice = ToolRequest::Choice::kRequired;
      else
        return invalid_request("'tool_choice' must be none, auto, required or a function",
                               "tool_choice");
    } else if (choice->is_object() && has_string_member(*choice, "type", "function") &&
               choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].contains("name") &&
               (*choice)["function"]["name"].is_string()) {
      out.choice = ToolRequest::Choice::kNamed;
      out.named = (*choice)["function"]["name"].get<std::string>();
      bool known = false;
      for (const ojson& t : out.tools) known = known || t["function"]["name"] == out.named;
      if (!known)
        return invalid_request(
            "'tool_choice' names the function '" + out.named + "', which is not in 'tools'",
            "tool_choice");
    } else {
      return invalid_request("'tool_choice' must be none, auto, required or a function",
                             "tool_choice");
    }
    if (out.tools.empty() && out.choice != ToolRequest::Choice::kNone &&
        out.choice != ToolRequest::Choice::kAuto)
      return invalid_request("'tool_choice' needs 'tools'", "tool_choice");
  }
  auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean())
      return invalid_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out.parallel = parallel->get<bool>();
  }
  return std::nullopt;
}

Result<std::string> tool_call_grammar(const ToolRequest& request, ToolCallFormat format) {
  if (separate_parser(format)) return named_tool_call_grammar(request, format, kMaxParallelCalls);
  const char* args_key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  ojson branches = ojson::array();
  for (const ojson& t : request.tools) {
    const ojson& f = t["function"];
    const std::string name = f["name"].get<std::string>();
    if (request.choice == ToolRequest::Choice::kNamed && name != request.named) continue;
    ojson params = f.value("parameters", ojson::object());
    if (params.is_null() || params.empty())
      params = ojson{
          {"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
    ojson branch = {{"type", "object"},
                    {"properties", {{"name", {{"const", name}}}, {args_key, params}}},
                    {"required", {"name", args_key}},
                    {"additionalProperties", false}};
    branches.push_back(std::move(branch));
  }
  const ojson schema = branches.size() == 1 ? branches[0] : ojson{{"anyOf", branches}};
  constraint::JsonGrammarOptions options;
  options.compact_whitespace = true;
  auto call = constraint::json_schema_to_gbnf(schema, options);
  if (!call) return make_error("invalid tool parameters: " + call.message());
  std::string rules = *call;
  constexpr std::string_view kRoot = "root ::= ";
  rules.replace(0, kRoot.size(), "tool-call ::= ");
  const std::string more =
      request.parallel ? "{0," + std::to_string(kMaxParallelCalls - 1) + "}" : "{0}";
  std::string root;
  switch (format) {
    case ToolCallFormat::kHermes:
      root = "root ::= hermes-call (\"\\n\" hermes-call)" + more +
             "\nhermes-call ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n";
      break;
    case ToolCallFormat::kLlama3Json:
      root = "root ::= tool-call (\"; \" tool-call)" + more + "\n";
      break;
    case ToolCallFormat::kMistral:
      root = "root ::= \"[TOOL_CALLS][\" tool-call (\", \" tool-call)" + more + " \"]\"\n";
      break;
    default:
      break;
  }
  return root + rules;
}

namespace {

// The calls and content a stream parser finds in the whole text.
ParsedToolOutput parse_by_stream(std::string_view text, ToolCallFormat format, const json& tools) {
  ToolCallStreamParser parser(format, tools);
  std::vector<ToolCallDelta> deltas = parser.push(text);
  for (ToolCallDelta& d : parser.finish()) deltas.push_back(std::move(d));
  ParsedToolOutput out;
  std::string content;
  for (ToolCallDelta& d : deltas) {
    if (d.index < 0) {
      content += d.content;
      continue;
    }
    if (size_t(d.index) >= out.calls.size()) out.calls.push_back(ToolCall{d.id, d.name, ""});
    out.calls[size_t(d.index)].arguments += d.arguments;
  }
  if (out.calls.empty()) {
    out.content = std::string(text);
    return out;
  }
  if (!trim(content).empty()) out.content = std::string(trim(content));
  return out;
}

}  // namespace

ParsedToolOutput parse_tool_calls(std::string_view text, ToolCallFormat format, const json& tools) {
  if (separate_parser(format)) return parse_by_stream(text, format, tools);
  ParsedToolOutput out;
  const auto as_content = [&] {
    ParsedToolOutput c;
    c.content = std::string(text);
    return c;
  };
  if (format == ToolCallFormat::kHermes) {
    std::string content;
    size_t pos = 0;
    while (true) {
      const size_t open = text.find(kHermesOpen, pos);
      if (open == std::string_view::npos) {
        content += text.substr(pos);
        break;
      }
      content += text.substr(pos, open - pos);
      const size_t body = open + kHermesOpen.size();
      size_t close = text.find(kHermesClose, body);
      const size_t end = close == std::string_view::npos ? text.size() : close;
      ToolCall call;
      if (!parse_call_text(text.substr(body, end - body), call)) return as_content();
      out.calls.push_back(std::move(call));
      pos = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
    }
    if (out.calls.empty()) return as_content();
    if (!trim(content).empty()) out.content = std::string(trim(content));
    return out;
  }
  std::string_view t = trim(text);
  if (format == ToolCallFormat::kMistral) {
    if (t.substr(0, kMistralCalls.size()) != kMistralCalls) return as_content();
    const std::string_view after = trim(t.substr(kMistralCalls.size()));
    if (!after.empty() && after[0] != '[' && after[0] != '{')  // NAME[ARGS]{...}
      return parse_by_stream(text, format, tools);
    const ojson j = ojson::parse(trim(t.substr(kMistralCalls.size())), nullptr, false);
    if (j.is_discarded()) return as_content();
    for (const ojson& item : j.is_array() ? j : ojson::array({j})) {
      ToolCall call;
      if (!call_from_json(item, call)) return as_content();
      out.calls.push_back(std::move(call));
    }
    return out.calls.empty() ? as_content() : out;
  }
  if (t.substr(0, kPythonTag.size()) == kPythonTag) t = trim(t.substr(kPythonTag.size()));
  if (t.empty() || t.front() != '{') return as_content();
  // One object, or several separated by ';'.
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t end = json_value_end(t.substr(pos));
    if (end == std::string_view::npos) return as_content();
    ToolCall call;
    if (!parse_call_text(t.substr(pos, end), call)) return as_content();
    out.calls.push_back(std::move(call));
    pos += end;
    while (pos < t.size() && (t[pos] == ';' || std::isspace(static_cast<unsigned char>(t[pos]))))
      ++pos;
  }
  return out.calls.empty() ? as_content() : out;
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls)
    out.push_back(json{{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format, const json& tools)
    : format_(format), tools_(tools) {
  if (separate_parser(format)) impl_ = make_tool_format_parser(format, tools_);
}
ToolCallStreamParser::~ToolCallStreamParser() = default;
ToolCallStreamParser::ToolCallStreamParser(ToolCallStreamParser&&) noexcept = default;
ToolCallStreamParser& ToolCallStreamParser::operator=(ToolCallStreamParser&&) noexcept = default;

bool ToolCallStreamParser::saw_calls() const {
  return impl_ ? impl_->calls() > 0 : n_calls_ > 0;
}

std::vector<ToolCallStreamParser::Delta> ToolCallStreamParser::push(std::string_view text) {
  std::vector<Delta> out;
  if (impl_) {
    impl_->push(text, out);
    return out;
  }
  buffer_ += text;
  scan(out, false);
  return out;
}

std::vector<ToolCallStreamParser::Delta> ToolCallStreamParser::finish() {
  std::vector<Delta> out;
  if (impl_) {
    impl_->finish(out);
    return out;
  }
  scan(out, true);
  return out;
}

bool ToolCallStreamParser::stream_call(std::string_view body, bool complete,
                                       bool name_needs_arguments, std::vector<Delta>& out) {
  size_t args = value_after_key(body, "arguments");
  if (args == std::string_view::npos) args = value_after_key(body, "parameters");
  if (!name_sent_ && (!name_needs_arguments || args != std::string_view::npos)) {
    const size_t v = value_after_key(body, "name");
    if (v != std::string_view::npos && body[v] == '"') {
      const size_t end = json_value_end(body.substr(v));
      if (end != std::string_view::npos) {
        const json name = json::parse(body.substr(v, end), nullptr, false);
        if (name.is_string()) {
          Delta d;
          d.index = n_calls_;
          d.id = new_call_id();
          d.name = name.get<std::string>();
          out.push_back(std::move(d));
          name_sent_ = true;
        }
      }
    }
  }
  if (name_sent_ && args != std::string_view::npos && body[args] != '"') {
    const std::string_view rest = body.substr(args);
    const size_t end = json_value_end(rest);
    const size_t avail = end == std::string_view::npos ? rest.size() : end;
    if (avail > args_sent_) {
      Delta d;
      d.index = n_calls_;
      d.arguments = std::string(rest.substr(args_sent_, avail - args_sent_));
      out.push_back(std::move(d));
      args_sent_ = avail;
    }
  }
  if (!complete) return false;
  // The call is complete: whatever was not streamed (string arguments, odd key order) now.
  ToolCall call;
  const bool ok = parse_call_text(body, call);
  if (!name_sent_) {
    Delta d;
    d.index = n_calls_;
    d.id = new_call_id();
    d.name = ok ? call.name : "";
    out.push_back(std::move(d));
  }
  if (args_sent_ == 0) {
    Delta d;
    d.index = n_calls_;
    d.arguments = ok ? call.arguments : "{}";
    out.push_back(std::move(d));
  }
  ++n_calls_;
  name_sent_ = false;
  args_sent_ = 0;
  return true;
}

void ToolCallStreamParser::scan_hermes_call(std::vector<Delta>& out) {
  const size_t close = buffer_.find(kHermesClose);
  const std::string_view body =
      std::string_view(buffer_).substr(0, close == std::string::npos ? buffer_.size() : close);
  if (!stream_call(body, close != std::string::npos, false, out)) return;
  in_call_ = false;
  buffer_.erase(0, close + kHermesClose.size());
}

void ToolCallStreamParser::scan_json_calls(std::vector<Delta>& out, bool at_end) {
  // From json_pos_ (past the marker): call objects, with separators ('[' ',' ']' or ';') and
  // whitespace between them. A complete object that is not a call ends the calls.
  while (!json_failed_) {
    const std::string_view t = std::string_view(buffer_).substr(json_pos_);
    size_t i = 0;
    while (i < t.size() && (std::isspace(static_cast<unsigned char>(t[i])) ||
                            std::string_view("[],;").find(t[i]) != std::string_view::npos))
      ++i;
    json_pos_ += i;  // separators are sent too
    if (i == t.size()) break;
    if (t[i] != '{') {
      json_failed_ = true;
      break;
    }
    const std::string_view object = t.substr(i);  // from json_pos_
    const size_t end = json_value_end(object);
    const bool complete = end != std::string_view::npos;
    ToolCall probe;
    if (complete && !name_sent_ && !parse_call_text(object.substr(0, end), probe)) {
      json_failed_ = true;
      break;
    }
    // The name goes out once the arguments begin: only then is the object surely a call.
    if (!stream_call(complete ? object.substr(0, end) : object, complete, true, out)) break;
    json_pos_ += end;
  }
  if (!at_end) return;
  if (n_calls_ == 0 && !name_sent_) {
    // No call began: the whole output is content, as parse_tool_calls says.
    Delta d;
    d.content = std::move(buffer_);
    if (!d.content.empty()) out.push_back(std::move(d));
    buffer_.clear();
    return;
  }
  if (name_sent_) {  // cut off inside a call: close it with what came
    stream_call(std::string_view(buffer_).substr(json_pos_), true, true, out);
    json_pos_ = buffer_.size();
  }
  const std::string_view rest = trim(std::string_view(buffer_).substr(json_pos_));
  if (!rest.empty()) {
    Delta d;
    d.content = std::string(rest);
    out.push_back(std::move(d));
  }
  buffer_.clear();
  json_pos_ = 0;
}

void ToolCallStreamParser::scan(std::vector<Delta>& out, bool at_end) {
  const auto emit_content = [&out](std::string text) {
    if (text.empty()) return;
    Delta d;
    d.content = std::move(text);
    out.push_back(std::move(d));
  };
  if (format_ != ToolCallFormat::kHermes) {
    // The whole output is either calls or content: decide on its first characters.
    if (!decided_) {
      std::string_view t = buffer_;
      while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
      const std::string_view marker =
          format_ == ToolCallFormat::kMistral ? kMistralCalls : kPythonTag;
      const size_t n = std::min(marker.size(), t.size());
      const bool json_start = format_ == ToolCallFormat::kLlama3Json && !t.empty() && t[0] == '{';
      if (format_ == ToolCallFormat::kMistral && t.size() >= marker.size() &&
          t.substr(0, n) == marker) {
        // [TOOL_CALLS]NAME[ARGS]{...}: the named form has its own parser.
        const std::string_view after = t.substr(marker.size());
        const size_t a = tool_text::skip_space(after);
        if (a == after.size() && !at_end) return;
        if (a < after.size() && after[a] != '[' && after[a] != '{') {
          impl_ = make_mistral_named_parser();
          impl_->push(buffer_, out);
          buffer_.clear();
          if (at_end) impl_->finish(out);
          return;
        }
      }
      if (json_start || (t.size() >= marker.size() && t.substr(0, n) == marker)) {
        json_mode_ = true;
        json_pos_ = buffer_.size() - t.size() + (json_start ? 0 : marker.size());
      } else if (!at_end && (t.empty() || t.substr(0, n) == marker.substr(0, n))) {
        return;  // could still become a marker
      }
      decided_ = true;
    }
    if (!json_mode_) {
      emit_content(std::move(buffer_));
      buffer_.clear();
      return;
    }
    scan_json_calls(out, at_end);
    return;
  }
  while (true) {
    if (in_call_) {
      scan_hermes_call(out);
      if (in_call_) {
        if (at_end) {
          // Unterminated: close it as if the tag had come.
          buffer_ += kHermesClose;
          scan_hermes_call(out);
        }
        return;
      }
      continue;
    }
    const size_t open = buffer_.find(kHermesOpen);
    if (open != std::string::npos) {
      std::string before = buffer_.substr(0, open);
      if (n_calls_ == 0 || !trim(before).empty()) emit_content(std::move(before));
      buffer_.erase(0, open + kHermesOpen.size());
      in_call_ = true;
      continue;
    }
    const size_t held = at_end ? 0 : partial_marker(buffer_, kHermesOpen);
    std::string ready = buffer_.substr(0, buffer_.size() - held);
    buffer_.erase(0, buffer_.size() - held);
    if (n_calls_ == 0 || !trim(ready).empty()) emit_content(std::move(ready));
    return;
  }
}

}  // namespace vela::server

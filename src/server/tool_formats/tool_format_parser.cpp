#include "server/tool_formats/tool_format_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace vela::server {

using json = nlohmann::json;

void ToolFormatParser::push(std::string_view text, std::vector<ToolCallDelta>& out) {
  buffer_ += text;
  scan(out, false);
}

void ToolFormatParser::finish(std::vector<ToolCallDelta>& out) {
  scan(out, true);
}

void ToolFormatParser::emit_content(std::string_view text, std::vector<ToolCallDelta>& out) {
  if (text.empty() || (n_calls_ > 0 && tool_text::trim(text).empty())) return;
  if (!out.empty() && out.back().index < 0) {
    out.back().content += text;
    return;
  }
  ToolCallDelta d;
  d.content = std::string(text);
  out.push_back(std::move(d));
}

void ToolFormatParser::begin_call(std::string name, std::vector<ToolCallDelta>& out) {
  ToolCallDelta d;
  d.index = n_calls_;
  d.id = new_call_id();
  d.name = std::move(name);
  out.push_back(std::move(d));
}

void ToolFormatParser::emit_arguments(std::string_view text, std::vector<ToolCallDelta>& out) {
  if (text.empty()) return;
  if (!out.empty() && out.back().index == n_calls_ && out.back().id.empty()) {
    out.back().arguments += text;
    return;
  }
  ToolCallDelta d;
  d.index = n_calls_;
  d.arguments = std::string(text);
  out.push_back(std::move(d));
}

std::unique_ptr<ToolFormatParser> make_tool_format_parser(ToolCallFormat format,
                                                          const nlohmann::json& tools) {
  switch (format) {
    case ToolCallFormat::kQwen3Coder:
      return make_qwen3_coder_parser(tools);
    case ToolCallFormat::kGlm45:
      return make_glm45_parser(tools);
    case ToolCallFormat::kDeepSeekV31:
      return make_deepseek_v31_parser();
    case ToolCallFormat::kMistral:
      return make_mistral_named_parser();
    case ToolCallFormat::kGptOss:
      return make_gpt_oss_parser();
    default:
      return nullptr;
  }
}

namespace tool_text {

Found find_first(std::string_view s, std::initializer_list<std::string_view> markers) {
  Found best;
  size_t i = 0;
  for (std::string_view m : markers) {
    const size_t at = s.find(m);
    if (at < best.pos) best = Found{at, i};
    ++i;
  }
  return best;
}

size_t held_suffix(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t held = 0;
  for (std::string_view m : markers)
    for (size_t n = std::min(s.size(), m.size() - 1); n > held; --n)
      if (m.substr(0, n) == s.substr(s.size() - n)) {
        held = n;
        break;
      }
  return held;
}

size_t skip_space(std::string_view s, size_t from) {
  while (from < s.size() && std::isspace(static_cast<unsigned char>(s[from]))) ++from;
  return from;
}

size_t utf8_tail(std::string_view s) {
  for (size_t n = 1; n <= std::min<size_t>(3, s.size()); ++n) {
    const auto c = static_cast<unsigned char>(s[s.size() - n]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > n ? n : 0;
  }
  return 0;
}

std::string_view trim(std::string_view s) {
  s.remove_prefix(skip_space(s));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string json_string_body(std::string_view text) {
  const std::string quoted =
      json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

std::string parameter_type(const json& tools, std::string_view function,
                           std::string_view parameter) {
  if (!tools.is_array()) return "";
  for (const json& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const json& f = t["function"];
    if (!f.contains("name") || f["name"] != function) continue;
    if (!f.contains("parameters") || !f["parameters"].is_object()) return "";
    const json& props = f["parameters"].value("properties", json::object());
    if (!props.is_object()) return "";
    auto p = props.find(std::string(parameter));
    if (p == props.end() || !p->is_object()) return "";
    auto type = p->find("type");
    if (type == p->end()) return "";
    if (type->is_string()) return type->get<std::string>();
    if (type->is_array())
      for (const json& ty : *type)
        if (ty.is_string() && ty != "null") return ty.get<std::string>();
    return "";
  }
  return "";
}

bool is_string_type(std::string_view type) {
  return type == "string" || type == "str" || type == "text" || type == "varchar" ||
         type == "char" || type == "enum";
}

std::string typed_value_json(std::string_view value, std::string_view type, bool unknown_as_json) {
  const auto as_string = [&] {
    return json(std::string(value)).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  if (is_string_type(type)) return as_string();
  const std::string_view v = trim(value);
  if (type.empty()) {
    if (!unknown_as_json) return as_string();
    const json j = json::parse(v, nullptr, false);
    return j.is_discarded() ? as_string() : j.dump();
  }
  if (v == "null") return "null";
  if (type == "integer" || type == "int" || type == "uint" || type == "long" || type == "short") {
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() ? std::to_string(n) : as_string();
  }
  if (type == "number" || type == "float" || type == "double") {
    const json j = json::parse(v, nullptr, false);
    if (j.is_discarded() || !j.is_number()) return as_string();
    const double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
      return std::to_string(int64_t(d));
    return j.dump();
  }
  if (type == "boolean" || type == "bool" || type == "binary") {
    if (v == "true" || v == "True") return "true";
    if (v == "false" || v == "False") return "false";
    return as_string();
  }
  // object, array, and types this parser does not know: JSON when it parses.
  const json j = json::parse(v, nullptr, false);
  return j.is_discarded() ? as_string() : j.dump();
}

}  // namespace tool_text

}  // namespace vela::server

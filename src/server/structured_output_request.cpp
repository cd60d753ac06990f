#include "server/structured_output_request.h"

#include "constraint/constraint.h"
#include "constraint/gbnf_rules.h"

#include <string>

namespace vela::server {

namespace {

using json = nlohmann::json;

const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// A schema given as an object or as JSON text.
bool schema_text(const json& v, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return true;
  }
  if (v.is_object() || v.is_boolean()) {
    out = v.dump();
    return true;
  }
  return false;
}

bool string_list(const json& v, std::vector<std::string>& out) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& s : v) {
    if (!s.is_string()) return false;
    out.push_back(s.get<std::string>());
  }
  return true;
}

std::optional<ApiError> read_response_format(const json& rf, StructuredOutputs& out) {
  const char* kParam = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return invalid_request("'response_format' must be an object with a string 'type'", kParam);
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    out.json_object = true;
    out.compact_whitespace = false;
    return std::nullopt;
  }
  if (type != "json_schema")
    return invalid_request(
        "'response_format.type' must be text, json_object or json_schema (got '" + type + "')",
        kParam);
  const json* js = field(rf, "json_schema");
  if (!js || !js->is_object())
    return invalid_request("'response_format.json_schema' must be an object", kParam);
  const json* schema = field(*js, "schema");
  std::string text = "{}";
  if (schema && !schema_text(*schema, text))
    return invalid_request("'response_format.json_schema.schema' must be an object", kParam);
  out.json = text;
  // strict: compact JSON; otherwise a small bounded whitespace allowance.
  const json* strict = field(*js, "strict");
  out.compact_whitespace = strict && strict->is_boolean() && strict->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_structured_outputs_sorted(const json& body, StructuredOutputs& out);

}  // namespace

std::optional<std::string> ordered_schema_text(std::string_view raw_body,
                                               std::initializer_list<const char*> path) {
  const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::ordered_json* at = &doc;
  for (const char* key : path) {
    if (!at->is_object()) return std::nullopt;
    auto it = at->find(key);
    if (it == at->end()) return std::nullopt;
    at = &*it;
  }
  if (!at->is_object()) return std::nullopt;
  return at->dump();
}

std::optional<ApiError> read_structured_outputs(const json& body, StructuredOutputs& out,
                                                std::string_view raw_body) {
  auto e = read_structured_outputs_sorted(body, out);
  if (e || !out.json || raw_body.empty()) return e;
  // The schema as written: its properties' order is the order the output writes them in. Only
  // a schema object needs the body read again (one given as text kept its order).
  for (const auto& path :
       {std::initializer_list<const char*>{"response_format", "json_schema", "schema"},
        std::initializer_list<const char*>{"structured_outputs", "json"},
        std::initializer_list<const char*>{"guided_json"}}) {
    const json* at = &body;
    for (const char* key : path) {
      if (at == nullptr || !at->is_object()) break;
      at = field(*at, key);
    }
    if (at == nullptr || !at->is_object()) continue;
    if (auto text = ordered_schema_text(raw_body, path)) out.json = std::move(*text);
    break;
  }
  return std::nullopt;
}

namespace {

// The fields read from the body parsed into sorted objects (a schema's key order is lost).
std::optional<ApiError> read_structured_outputs_sorted(const json& body, StructuredOutputs& out) {
  int given = 0;
  if (const json* rf = field(body, "response_format")) {
    if (auto e = read_response_format(*rf, out)) return e;
    given += out.active();
  }
  if (const json* so = field(body, "structured_outputs")) {
    const char* kParam = "structured_outputs";
    if (!so->is_object()) return invalid_request("'structured_outputs' must be an object", kParam);
    if (const json* j = field(*so, "json")) {
      std::string text;
      if (!schema_text(*j, text))
        return invalid_request("'structured_outputs.json' must be a schema object or string",
                               kParam);
      out.json = text;
      ++given;
    }
    if (const json* j = field(*so, "json_object"); j && j->is_boolean() && j->get<bool>()) {
      out.json_object = true;
      ++given;
    }
    if (const json* r = field(*so, "regex")) {
      if (!r->is_string())
        return invalid_request("'structured_outputs.regex' must be a string", kParam);
      out.regex = r->get<std::string>();
      ++given;
    }
    if (const json* c = field(*so, "choice")) {
      if (!string_list(*c, out.choice))
        return invalid_request("'structured_outputs.choice' must be a non-empty array of strings",
                               kParam);
      ++given;
    }
    if (const json* g = field(*so, "grammar")) {
      if (!g->is_string())
        return invalid_request("'structured_outputs.grammar' must be a string", kParam);
      out.grammar = g->get<std::string>();
      ++given;
    }
    // JSON is compact unless disable_any_whitespace is false (vLLM's field; its default there
    // allows any whitespace, vela's a compact rendering).
    if (const json* ws = field(*so, "disable_any_whitespace")) {
      if (!ws->is_boolean())
        return invalid_request("'structured_outputs.disable_any_whitespace' must be a boolean",
                               kParam);
      out.compact_whitespace = ws->get<bool>();
    }
  }
  if (const json* j = field(body, "guided_json")) {
    std::string text;
    if (!schema_text(*j, text))
      return invalid_request("'guided_json' must be a schema object or string", "guided_json");
    out.json = text;
    ++given;
  }
  if (const json* r = field(body, "guided_regex")) {
    if (!r->is_string()) return invalid_request("'guided_regex' must be a string", "guided_regex");
    out.regex = r->get<std::string>();
    ++given;
  }
  if (const json* c = field(body, "guided_choice")) {
    if (!string_list(*c, out.choice))
      return invalid_request("'guided_choice' must be a non-empty array of strings",
                             "guided_choice");
    ++given;
  }
  if (const json* g = field(body, "guided_grammar")) {
    if (!g->is_string())
      return invalid_request("'guided_grammar' must be a string", "guided_grammar");
    out.grammar = g->get<std::string>();
    ++given;
  }
  if (given > 1)
    return invalid_request(
        "give one structured-output constraint: response_format, structured_outputs (one of json, "
        "json_object, regex, choice, grammar) or one guided_* field");
  return std::nullopt;
}

}  // namespace

Result<StructuredOutputs> harmony_final_answer(const StructuredOutputs& answer) {
  auto gbnf = constraint::structured_outputs_to_gbnf(answer);
  if (!gbnf) return gbnf.error();
  StructuredOutputs whole;
  whole.grammar =
      "root ::= harmony-analysis? \"<|start|>assistant\"? \"<|channel|>final<|message|>\" "
      "answer-root\n"
      "harmony-analysis ::= \"<|channel|>analysis<|message|>\" harmony-text \"<|end|>\"\n"
      "harmony-text ::= ([^<] | \"<\" [^|])*\n" +
      constraint::prefix_gbnf_rules(*gbnf, "answer-");
  return whole;
}

}  // namespace vela::server

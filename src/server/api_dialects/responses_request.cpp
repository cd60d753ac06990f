#include "server/api_dialects/responses_request.h"

#include "server/structured_output_request.h"

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "util/json_depth.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

constexpr int32_t kMaxJsonDepth = 64;  // as the chat parser's limit

// The field's value, or nullptr when absent or null.
const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// Responses fields the translation reads (into the chat request, or only to echo or check),
// space-separated.
constexpr std::string_view kResponsesFields =
    " model input instructions tools tool_choice parallel_tool_calls text max_output_tokens"
    " temperature top_p stream user metadata reasoning store previous_response_id conversation"
    " include truncation background service_tier prompt_cache_key safety_identifier ";
// vela's (and vLLM's) chat extensions, passed through unchanged for the chat parser to check.
constexpr const char* kChatExtensions[] = {"seed",
                                           "top_k",
                                           "min_p",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "repetition_penalty",
                                           "stop",
                                           "chat_template_kwargs",
                                           "max_reasoning_tokens",
                                           "vela_test_script"};

bool known_field(const std::string& name) {
  if (kResponsesFields.find(" " + name + " ") != std::string_view::npos) return true;
  for (const char* f : kChatExtensions)
    if (name == f) return true;
  return false;
}

// Text of a content part list: input_text / output_text parts joined by newlines (as the chat
// parser joins its text parts).
std::optional<ApiError> parts_text(const json& parts, const std::string& where, const char* param,
                                   std::string& out) {
  for (size_t j = 0; j < parts.size(); ++j) {
    const json& part = parts[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string())
      return invalid_request(at + " must be an object with a string 'type'", param);
    const std::string t = type->get<std::string>();
    if (t != "input_text" && t != "output_text")
      return invalid_request(at + ".type '" + t +
                                 "' is not supported: this server reads text parts only "
                                 "(input_text, output_text)",
                             param);
    const json* text = field(part, "text");
    if (!text || !text->is_string()) return invalid_request(at + ".text must be a string", param);
    if (!out.empty()) out += '\n';
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// Builds chat `messages` from `input` items, in order. An assistant turn in the Responses API
// is several items (reasoning, message, function_call, ...): they become one assistant message
// with reasoning_content and tool_calls, as chat templates expect.
class InputTranslator {
 public:
  std::optional<ApiError> add(const json& item, size_t i) {
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return invalid_request(where + " must be an object", "input");
    const json* type = field(item, "type");
    if (type && !type->is_string())
      return invalid_request(where + ".type must be a string", "input");
    const std::string t = type ? type->get<std::string>() : "message";
    if (t == "message") return add_message(item, where);
    if (t == "function_call") return add_function_call(item, where);
    if (t == "function_call_output") return add_function_call_output(item, where);
    if (t == "reasoning") return add_reasoning(item, where);
    if (t == "item_reference")
      return invalid_request(where +
                                 " is an item_reference: this server does not keep items; send "
                                 "the item itself",
                             "input");
    return invalid_request(where + ".type '" + t +
                               "' is not supported (message, function_call, "
                               "function_call_output and reasoning items are)",
                           "input");
  }

  json take() { return std::move(messages_); }

 private:
  std::optional<ApiError> add_message(const json& item, const std::string& where) {
    const json* role = field(item, "role");
    if (!role || !role->is_string())
      return invalid_request(where + ".role must be a string", "input");
    std::string r = role->get<std::string>();
    if (!is_one_of(r, {"user", "system", "developer", "assistant"}))
      return invalid_request(
          where + ".role '" + r + "' is not one of user, system, developer, assistant", "input");
    // Open-weight chat templates know "system", not OpenAI's "developer".
    if (r == "developer") r = "system";
    const json* content = field(item, "content");
    std::string text;
    if (!content) return invalid_request(where + ".content is required", "input");
    if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_array()) {
      if (auto e = parts_text(*content, where + ".content", "input", text)) return e;
    } else {
      return invalid_request(where + ".content must be a string or an array of text parts",
                             "input");
    }
    json msg = {{"role", r}, {"content", std::move(text)}};
    if (r == "assistant") take_reasoning(msg);
    reasoning_.reset();  // a reasoning item belongs to the assistant turn right after it
    messages_.push_back(std::move(msg));
    return std::nullopt;
  }

  std::optional<ApiError> add_function_call(const json& item, const std::string& where) {
    std::string call_id, name, arguments;
    for (auto [key, out] : {std::pair<const char*, std::string*>{"call_id", &call_id},
                            {"name", &name},
                            {"arguments", &arguments}}) {
      const json* v = field(item, key);
      if (!v || !v->is_string())
        return invalid_request(where + "." + key + " must be a string", "input");
      *out = v->get<std::string>();
    }
    if (call_id.empty() || name.empty())
      return invalid_request(where + ".call_id and .name must not be empty", "input");
    call_names_[call_id] = name;
    json call = {{"id", call_id},
                 {"type", "function"},
                 {"function", {{"name", name}, {"arguments", arguments}}}};
    // The calls of one turn follow its message (or each other): one assistant message.
    const bool continues =
        !messages_.empty() && messages_.back()["role"] == "assistant" && !reasoning_;
    if (!continues) {
      json msg = {{"role", "assistant"}, {"content", nullptr}};
      take_reasoning(msg);
      messages_.push_back(std::move(msg));
    }
    json& msg = messages_.back();
    if (!msg.contains("tool_calls")) msg["tool_calls"] = json::array();
    msg["tool_calls"].push_back(std::move(call));
    return std::nullopt;
  }

  std::optional<ApiError> add_function_call_output(const json& item, const std::string& where) {
    const json* call_id = field(item, "call_id");
    if (!call_id || !call_id->is_string())
      return invalid_request(where + ".call_id must be a string", "input");
    const json* output = field(item, "output");
    std::string text;
    if (output && output->is_string()) {
      text = output->get<std::string>();
    } else if (output && output->is_array()) {
      if (auto e = parts_text(*output, where + ".output", "input", text)) return e;
    } else {
      return invalid_request(where + ".output must be a string or an array of text parts", "input");
    }
    json msg = {{"role", "tool"},
                {"tool_call_id", call_id->get<std::string>()},
                {"content", std::move(text)}};
    // Some templates name the function a result came from.
    if (auto it = call_names_.find(call_id->get<std::string>()); it != call_names_.end())
      msg["name"] = it->second;
    reasoning_.reset();
    messages_.push_back(std::move(msg));
    return std::nullopt;
  }

  // {"type": "reasoning", "content": [{"type": "reasoning_text", "text"}], "summary": [...],
  // "encrypted_content"?}: the text (not the summary, which the model did not write) goes to
  // the next assistant message's reasoning_content.
  std::optional<ApiError> add_reasoning(const json& item, const std::string& where) {
    std::string text;
    if (const json* content = field(item, "content")) {
      if (!content->is_array())
        return invalid_request(where + ".content must be an array of reasoning_text parts",
                               "input");
      for (size_t j = 0; j < content->size(); ++j) {
        const json& part = (*content)[j];
        const json* t = part.is_object() ? field(part, "text") : nullptr;
        if (!t || !t->is_string())
          return invalid_request(where + ".content[" + std::to_string(j) +
                                     "] must be {\"type\": \"reasoning_text\", "
                                     "\"text\": string}",
                                 "input");
        text += t->get<std::string>();
      }
    }
    if (const json* summary = field(item, "summary"); summary && !summary->is_array())
      return invalid_request(where + ".summary must be an array", "input");
    reasoning_ = std::move(text);
    return std::nullopt;
  }

  void take_reasoning(json& assistant) {
    if (reasoning_ && !reasoning_->empty()) assistant["reasoning_content"] = *reasoning_;
    reasoning_.reset();
  }

  json messages_ = json::array();
  std::optional<std::string> reasoning_;  // a reasoning item's text, for the next assistant turn
  std::unordered_map<std::string, std::string> call_names_;  // call_id -> function name
};

std::optional<ApiError> read_input(const json& doc, json& messages) {
  const json* input = field(doc, "input");
  if (!input) return invalid_request("'input' is required", "input");
  if (input->is_string()) {
    messages = json::array({json{{"role", "user"}, {"content", *input}}});
    return std::nullopt;
  }
  if (!input->is_array() || input->empty())
    return invalid_request("'input' must be a string or a non-empty array of items", "input");
  InputTranslator translator;
  for (size_t i = 0; i < input->size(); ++i)
    if (auto e = translator.add((*input)[i], i)) return e;
  messages = translator.take();
  if (messages.empty())
    return invalid_request("'input' holds no message (only reasoning items)", "input");
  return std::nullopt;
}

// instructions: a system message before the input's; a system message that opens the input
// joins it (templates accept one leading system message).
std::optional<ApiError> read_instructions(const json& doc, json& messages, json& echo) {
  echo["instructions"] = nullptr;
  const json* instructions = field(doc, "instructions");
  if (!instructions) return std::nullopt;
  if (!instructions->is_string())
    return invalid_request("'instructions' must be a string", "instructions");
  echo["instructions"] = *instructions;
  std::string text = instructions->get<std::string>();
  if (!messages.empty() && messages[0]["role"] == "system") {
    text += "\n\n" + messages[0]["content"].get<std::string>();
    messages.erase(messages.begin());
  }
  messages.insert(messages.begin(), json{{"role", "system"}, {"content", std::move(text)}});
  return std::nullopt;
}

// tools: [{"type": "function", "name", "description"?, "parameters"?, "strict"?}] (flat) ->
// chat's [{"type": "function", "function": {...}}].
std::optional<ApiError> read_tools(const json& doc, json& chat, json& echo) {
  echo["tools"] = json::array();
  const json* tools = field(doc, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return invalid_request("'tools' must be an array", "tools");
  json chat_tools = json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json* type = t.is_object() ? field(t, "type") : nullptr;
    if (!type || !type->is_string())
      return invalid_request(where + " must be an object with a string 'type'", "tools");
    if (*type != "function")
      return invalid_request(where + ".type '" + type->get<std::string>() +
                                 "' is not supported: this server runs no built-in tools; "
                                 "declare function tools and run them yourself",
                             "tools");
    const json* name = field(t, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty())
      return invalid_request(where + ".name must be a non-empty string", "tools");
    json function = {{"name", *name}};
    json flat = {{"type", "function"},
                 {"name", *name},
                 {"description", nullptr},
                 {"parameters", nullptr},
                 {"strict", nullptr}};
    if (const json* d = field(t, "description")) {
      if (!d->is_string()) return invalid_request(where + ".description must be a string", "tools");
      function["description"] = flat["description"] = *d;
    }
    if (const json* p = field(t, "parameters")) {
      if (!p->is_object()) return invalid_request(where + ".parameters must be an object", "tools");
      function["parameters"] = flat["parameters"] = *p;
    }
    if (const json* s = field(t, "strict")) {
      if (!s->is_boolean()) return invalid_request(where + ".strict must be a boolean", "tools");
      function["strict"] = flat["strict"] = *s;
    }
    chat_tools.push_back(json{{"type", "function"}, {"function", std::move(function)}});
    echo["tools"].push_back(std::move(flat));
  }
  chat["tools"] = std::move(chat_tools);
  return std::nullopt;
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "name"}.
std::optional<ApiError> read_tool_choice(const json& doc, json& chat, json& echo) {
  echo["tool_choice"] = "auto";
  const json* choice = field(doc, "tool_choice");
  if (!choice) return std::nullopt;
  const char* kShape =
      "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\": ...}";
  if (choice->is_string()) {
    if (!is_one_of(choice->get<std::string>(), {"none", "auto", "required"}))
      return invalid_request(kShape, "tool_choice");
    chat["tool_choice"] = *choice;
  } else if (choice->is_object()) {
    const json* type = field(*choice, "type");
    const json* name = field(*choice, "name");
    if (!type || *type != "function" || !name || !name->is_string())
      return invalid_request(kShape, "tool_choice");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return invalid_request(kShape, "tool_choice");
  }
  echo["tool_choice"] = *choice;
  return std::nullopt;
}

// text: {"format": {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name",
// "schema", "strict"?, "description"?}, "verbosity"?} -> response_format.
std::optional<ApiError> read_text(const json& doc, json& chat, json& echo) {
  echo["text"] = {{"format", {{"type", "text"}}}};
  const json* text = field(doc, "text");
  if (!text) return std::nullopt;
  if (!text->is_object()) return invalid_request("'text' must be an object", "text");
  if (const json* v = field(*text, "verbosity")) {
    if (!v->is_string() || !is_one_of(v->get<std::string>(), {"low", "medium", "high"}))
      return invalid_request("'text.verbosity' must be low, medium or high", "text.verbosity");
    echo["text"]["verbosity"] = *v;
  }
  const json* format = field(*text, "format");
  if (!format) return std::nullopt;
  const json* type = format->is_object() ? field(*format, "type") : nullptr;
  if (!type || !type->is_string())
    return invalid_request("'text.format' must be an object with a string 'type'", "text.format");
  const std::string t = type->get<std::string>();
  if (t == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (t == "json_schema") {
    const json* schema = field(*format, "schema");
    if (!schema || !schema->is_object())
      return invalid_request("'text.format.schema' must be an object", "text.format.schema");
    json js = {{"schema", *schema}};
    if (const json* name = field(*format, "name")) {
      if (!name->is_string())
        return invalid_request("'text.format.name' must be a string", "text.format.name");
      js["name"] = *name;
    }
    if (const json* strict = field(*format, "strict")) {
      if (!strict->is_boolean())
        return invalid_request("'text.format.strict' must be a boolean", "text.format.strict");
      js["strict"] = *strict;
    }
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
  } else if (t != "text") {
    return invalid_request(
        "'text.format.type' must be text, json_object or json_schema (got '" + t + "')",
        "text.format");
  }
  echo["text"]["format"] = *format;
  return std::nullopt;
}

// reasoning: {"effort": null | minimal | low | medium | high, "summary": null | auto | concise
// | detailed}. The effort reaches the chat template as reasoning_effort; no summaries are
// written (a reasoning item's summary stays empty).
std::optional<ApiError> read_reasoning(const json& doc, json& chat, json& echo) {
  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  const json* reasoning = field(doc, "reasoning");
  if (!reasoning) return std::nullopt;
  if (!reasoning->is_object()) return invalid_request("'reasoning' must be an object", "reasoning");
  if (const json* effort = field(*reasoning, "effort")) {
    if (!effort->is_string() ||
        !is_one_of(effort->get<std::string>(), {"minimal", "low", "medium", "high"}))
      return invalid_request("'reasoning.effort' must be minimal, low, medium or high",
                             "reasoning.effort");
    chat["reasoning_effort"] = *effort;
    echo["reasoning"]["effort"] = *effort;
  }
  for (const char* key : {"summary", "generate_summary"})
    if (const json* summary = field(*reasoning, key)) {
      if (!summary->is_string() ||
          !is_one_of(summary->get<std::string>(), {"auto", "concise", "detailed"}))
        return invalid_request(
            std::string("'reasoning.") + key + "' must be auto, concise or detailed",
            std::string("reasoning.") + key);
      echo["reasoning"]["summary"] = *summary;
    }
  return std::nullopt;
}

// Fields about storage and state, which a server that keeps nothing can only accept when they
// ask for nothing.
std::optional<ApiError> read_state_fields(const json& doc, json& echo) {
  for (const char* name : {"previous_response_id", "conversation"})
    if (field(doc, name))
      return invalid_request(
          std::string("'") + name +
              "' is not supported: this server does not keep responses or conversations; send "
              "the whole conversation in 'input' (earlier output items included)",
          name);
  if (const json* store = field(doc, "store"); store && !store->is_boolean())
    return invalid_request("'store' must be a boolean", "store");
  if (const json* background = field(doc, "background")) {
    if (!background->is_boolean())
      return invalid_request("'background' must be a boolean", "background");
    if (background->get<bool>())
      return invalid_request(
          "'background' is not supported: this server does not keep responses to poll",
          "background");
  }
  if (const json* include = field(doc, "include")) {
    if (!include->is_array()) return invalid_request("'include' must be an array", "include");
    for (const json& v : *include)
      // Nothing is encrypted: reasoning items carry their text, which 'input' takes back.
      if (!v.is_string() || v != "reasoning.encrypted_content")
        return invalid_request("'include' value " + v.dump() +
                                   " is not supported (only reasoning.encrypted_content is "
                                   "accepted, and reasoning comes back as plain text)",
                               "include");
  }
  if (const json* truncation = field(doc, "truncation")) {
    if (*truncation == "auto")
      return invalid_request(
          "'truncation' auto is not supported: the input must fit the model's context",
          "truncation");
    if (*truncation != "disabled")
      return invalid_request("'truncation' must be disabled", "truncation");
  }
  if (const json* metadata = field(doc, "metadata")) {
    if (!metadata->is_object()) return invalid_request("'metadata' must be an object", "metadata");
    for (const auto& [key, value] : metadata->items())
      if (!value.is_string())
        return invalid_request("'metadata." + key + "' must be a string", "metadata");
    echo["metadata"] = *metadata;
  }
  for (const char* name : {"service_tier", "prompt_cache_key", "safety_identifier"})
    if (const json* v = field(doc, name); v && !v->is_string())
      return invalid_request(std::string("'") + name + "' must be a string", name);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> responses_to_chat_request(std::string_view body, json& chat, json& echo) {
  if (json_nesting_depth(body) > kMaxJsonDepth)
    return invalid_request("the JSON body is nested too deeply");
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_request("the body is not valid JSON");
  if (!doc.is_object()) return invalid_request("the body must be a JSON object");
  for (const auto& [key, value] : doc.items())
    if (!known_field(key))
      return invalid_request("'" + key + "' is not a /v1/responses parameter this server accepts",
                             key);

  chat = json::object();
  echo = {{"metadata", json::object()},
          {"parallel_tool_calls", true},
          {"max_output_tokens", nullptr},
          {"temperature", 1.0},
          {"top_p", 1.0},
          {"store", false},  // nothing is kept, whatever was asked
          {"truncation", "disabled"},
          {"background", false},
          {"previous_response_id", nullptr},
          {"service_tier", "default"}};
  json messages;
  if (auto e = read_input(doc, messages)) return e;
  if (auto e = read_instructions(doc, messages, echo)) return e;
  chat["messages"] = std::move(messages);
  if (auto e = read_tools(doc, chat, echo)) return e;
  if (auto e = read_tool_choice(doc, chat, echo)) return e;
  if (auto e = read_text(doc, chat, echo)) return e;
  // The schema as written (the parsed object's keys are sorted): the output follows its order.
  if (chat.contains("response_format") && chat["response_format"].contains("json_schema"))
    if (auto ordered = ordered_schema_text(body, {"text", "format", "schema"}))
      chat["response_format"]["json_schema"]["schema"] = std::move(*ordered);
  if (auto e = read_reasoning(doc, chat, echo)) return e;
  if (auto e = read_state_fields(doc, echo)) return e;

  if (const json* model = field(doc, "model")) {
    if (!model->is_string()) return invalid_request("'model' must be a string", "model");
    chat["model"] = *model;
  }
  if (const json* p = field(doc, "parallel_tool_calls")) {
    if (!p->is_boolean())
      return invalid_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    chat["parallel_tool_calls"] = echo["parallel_tool_calls"] = *p;
  }
  if (const json* m = field(doc, "max_output_tokens")) {
    if (!m->is_number_integer() || m->get<int64_t>() < 1)
      return invalid_request("'max_output_tokens' must be a positive integer", "max_output_tokens");
    chat["max_tokens"] = echo["max_output_tokens"] = *m;
  }
  for (const char* name : {"temperature", "top_p"})
    if (const json* v = field(doc, name)) {
      if (!v->is_number())
        return invalid_request(std::string("'") + name + "' must be a number", name);
      chat[name] = echo[name] = *v;
    }
  if (const json* user = field(doc, "user")) {
    if (!user->is_string()) return invalid_request("'user' must be a string", "user");
    chat["user"] = echo["user"] = *user;
  }
  if (const json* stream = field(doc, "stream")) {
    if (!stream->is_boolean()) return invalid_request("'stream' must be a boolean", "stream");
    chat["stream"] = *stream;
    // response.completed carries the usage, which the chat stream sends in its last chunk.
    if (stream->get<bool>()) chat["stream_options"] = {{"include_usage", true}};
  }
  for (const char* name : kChatExtensions)
    if (const json* v = field(doc, name)) chat[name] = *v;
  return std::nullopt;
}

json responses_error(const json& openai_error) {
  if (!openai_error.is_object() || !openai_error.contains("error") ||
      !openai_error["error"].is_object())
    return openai_error;
  json out = openai_error;
  json& e = out["error"];
  // Longest names first: 'response_format.json_schema.schema' before 'response_format'.
  static const std::pair<const char*, const char*> kRenames[] = {
      {"response_format.json_schema.schema", "text.format.schema"},
      {"response_format.json_schema", "text.format"},
      {"response_format.type", "text.format.type"},
      {"response_format", "text.format"},
      {"max_completion_tokens", "max_output_tokens"},
      {"max_tokens", "max_output_tokens"},
      {"reasoning_effort", "reasoning.effort"},
      {"messages", "input"},
  };
  if (e.contains("param") && e["param"].is_string()) {
    const std::string param = e["param"].get<std::string>();
    for (const auto& [from, to] : kRenames)
      if (param == from) {
        e["param"] = to;
        break;
      }
  }
  if (e.contains("message") && e["message"].is_string()) {
    std::string message = e["message"].get<std::string>();
    for (const auto& [from, to] : kRenames) {
      const std::string quoted = std::string("'") + from + "'";
      for (size_t pos = message.find(quoted); pos != std::string::npos;
           pos = message.find(quoted, pos + std::char_traits<char>::length(to) + 2))
        message.replace(pos, quoted.size(), std::string("'") + to + "'");
    }
    // The context-length message names max_tokens bare ("reduce the prompt or max_tokens").
    if (e["param"] == "max_output_tokens")
      for (size_t pos = message.find(" max_tokens"); pos != std::string::npos;
           pos = message.find(" max_tokens", pos + 1))
        message.replace(pos, 11, " max_output_tokens");
    e["message"] = std::move(message);
  }
  return out;
}

}  // namespace vela::server

// A Messages API request as a chat-completions request (see anthropic_dialect.h).
#include <algorithm>
#include <limits>
#include <map>

#include "server/api_dialects/anthropic_dialect.h"
#include "util/json_depth.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

constexpr int32_t kMaxJsonDepth = 64;

// Top-level fields this server reads. cache_control and service_tier are accepted and have no
// effect: prompt prefixes are cached automatically and there is one service tier.
constexpr std::string_view kKnownFields[] = {
    "model",  "max_tokens",    "messages",     "system",          "metadata", "stop_sequences",
    "stream", "temperature",   "top_p",        "top_k",           "thinking", "tool_choice",
    "tools",  "cache_control", "service_tier", "vela_test_script"};

ApiError bad(std::string message, std::string param = "") {
  return invalid_request(std::move(message), std::move(param));
}

// The block's "type", or an error when `block` is not an object with a string type.
std::optional<ApiError> block_type(const json& block, const std::string& where, std::string& type) {
  auto t = block.is_object() ? block.find("type") : block.end();
  if (t == block.end() || !t->is_string())
    return bad(where + ": a content block must be an object with a string 'type'", "messages");
  type = t->get<std::string>();
  return std::nullopt;
}

ApiError unsupported_block(const std::string& where, const std::string& type,
                           const char* supported) {
  if (type == "image" || type == "document")
    return bad(where + ": this model takes text only ('" + type + "' blocks are not supported)",
               "messages");
  return bad(
      where + ": content block type '" + type + "' is not supported here (use " + supported + ")",
      "messages");
}

std::optional<ApiError> text_of_block(const json& block, const std::string& where,
                                      std::string& out) {
  auto text = block.find("text");
  if (text == block.end() || !text->is_string())
    return bad(where + ".text must be a string", "messages");
  if (!out.empty()) out += '\n';
  out += text->get_ref<const std::string&>();
  return std::nullopt;
}

// content: string | [{"type": "text", "text": str}, ...]; the texts joined by newlines.
std::optional<ApiError> read_text(const json& content, const std::string& where, std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return bad(where + " must be a string or an array of text blocks");
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    std::string type;
    if (auto e = block_type(content[i], at, type)) return e;
    if (type != "text") return unsupported_block(at, type, "text blocks");
    if (auto e = text_of_block(content[i], at, out)) return e;
  }
  return std::nullopt;
}

// The Anthropic fields of one message, gathered before they become chat messages.
struct Turn {
  std::string text;
  std::string thinking;
  json tool_calls = json::array();    // chat tool_calls
  json tool_results = json::array();  // chat tool messages
};

// tool_result {tool_use_id, content: string | text blocks, is_error} -> a chat tool message.
// `tool_names` (tool_use id -> name, from earlier assistant turns) names the tool for templates
// that print it.
std::optional<ApiError> read_tool_result(const json& block, const std::string& where,
                                         const std::map<std::string, std::string>& tool_names,
                                         Turn& turn) {
  auto id = block.find("tool_use_id");
  if (id == block.end() || !id->is_string())
    return bad(where + ".tool_use_id must be a string", "messages");
  std::string text;
  if (auto c = block.find("content"); c != block.end() && !c->is_null())
    if (auto e = read_text(*c, where + ".content", text)) return e;
  if (auto err = block.find("is_error"); err != block.end() && !err->is_null()) {
    if (!err->is_boolean()) return bad(where + ".is_error must be a boolean", "messages");
    // Chat tool messages have no error flag: the model reads it in the text.
    if (err->get<bool>()) text = "Error: " + text;
  }
  json msg = {{"role", "tool"}, {"tool_call_id", *id}, {"content", std::move(text)}};
  if (auto name = tool_names.find(id->get<std::string>()); name != tool_names.end())
    msg["name"] = name->second;
  turn.tool_results.push_back(std::move(msg));
  return std::nullopt;
}

// tool_use {id, name, input: object} -> a chat tool call (arguments: the input's JSON text).
std::optional<ApiError> read_tool_use(const json& block, const std::string& where,
                                      std::map<std::string, std::string>& tool_names, Turn& turn) {
  auto id = block.find("id");
  auto name = block.find("name");
  auto input = block.find("input");
  if (id == block.end() || !id->is_string() || name == block.end() || !name->is_string())
    return bad(where + ": a tool_use block needs a string 'id' and 'name'", "messages");
  if (input == block.end() || !input->is_object())
    return bad(where + ".input must be an object", "messages");
  tool_names[id->get<std::string>()] = name->get<std::string>();
  turn.tool_calls.push_back({{"id", *id},
                             {"type", "function"},
                             {"function", {{"name", *name}, {"arguments", input->dump()}}}});
  return std::nullopt;
}

std::optional<ApiError> read_block(const json& block, const std::string& where, bool user,
                                   std::map<std::string, std::string>& tool_names, Turn& turn) {
  std::string type;
  if (auto e = block_type(block, where, type)) return e;
  if (type == "text") return text_of_block(block, where, turn.text);
  if (user) {
    if (type == "tool_result") return read_tool_result(block, where, tool_names, turn);
    return unsupported_block(where, type, "text and tool_result in user messages");
  }
  if (type == "tool_use") return read_tool_use(block, where, tool_names, turn);
  if (type == "thinking") {
    auto thinking = block.find("thinking");
    if (thinking == block.end() || !thinking->is_string())
      return bad(where + ".thinking must be a string", "messages");
    if (!turn.thinking.empty()) turn.thinking += '\n';
    turn.thinking += thinking->get_ref<const std::string&>();
    return std::nullopt;
  }
  if (type == "redacted_thinking") return std::nullopt;  // encrypted for another model: dropped
  return unsupported_block(where, type,
                           "text, tool_use, thinking and redacted_thinking in assistant messages");
}

// messages: [{"role": "user" | "assistant", "content": string | [block, ...]}, ...], appended to
// `chat` as chat messages. A user turn's tool results come first, as tool messages, in order.
std::optional<ApiError> read_messages(const json& messages, json& chat) {
  if (!messages.is_array() || messages.empty())
    return bad("'messages' must be a non-empty array", "messages");
  std::map<std::string, std::string> tool_names;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& msg = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return bad(where + " must be an object", "messages");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string())
      return bad(where + ".role must be a string", "messages");
    const std::string role_name = role->get<std::string>();
    if (role_name != "user" && role_name != "assistant")
      return bad(where + ".role '" + role_name +
                     "' is not one of user, assistant (a system prompt goes in 'system')",
                 "messages");
    const bool user = role_name == "user";
    auto content = msg.find("content");
    if (content == msg.end() || !(content->is_string() || content->is_array()))
      return bad(where + ".content must be a string or an array of content blocks", "messages");
    Turn turn;
    if (content->is_string()) {
      turn.text = content->get<std::string>();
    } else {
      for (size_t b = 0; b < content->size(); ++b)
        if (auto e = read_block((*content)[b], where + ".content[" + std::to_string(b) + "]", user,
                                tool_names, turn))
          return e;
    }
    for (json& result : turn.tool_results) chat.push_back(std::move(result));
    // A turn of tool results only adds no empty user message.
    if (user && turn.text.empty() && !turn.tool_results.empty()) continue;
    json out = {{"role", role_name}, {"content", std::move(turn.text)}};
    if (!turn.tool_calls.empty()) out["tool_calls"] = std::move(turn.tool_calls);
    if (!turn.thinking.empty()) out["reasoning_content"] = std::move(turn.thinking);
    chat.push_back(std::move(out));
  }
  // Anthropic continues a final assistant turn (a prefill); chat templates close it and open a
  // new one, which would answer something else.
  if (messages.back().value("role", "") == "assistant")
    return bad("messages[" + std::to_string(messages.size() - 1) +
                   "]: a final assistant message (prefill) is not supported; end with a user "
                   "message",
               "messages");
  return std::nullopt;
}

// tools: [{name, description?, input_schema}] -> chat function tools. Server tools (a "type"
// such as web_search_20250305) run on Anthropic's side and have no equivalent here.
std::optional<ApiError> read_tools(const json& tools, json& out) {
  if (!tools.is_array()) return bad("'tools' must be an array", "tools");
  out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return bad(where + " must be an object", "tools");
    if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom") {
      const std::string name = type->is_string() ? type->get<std::string>() : type->dump();
      return bad(where + ": the server tool '" + name +
                     "' is not supported; this server runs client tools ({name, description, "
                     "input_schema}) only",
                 "tools");
    }
    auto name = t.find("name");
    if (name == t.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad(where + ".name must be a non-empty string", "tools");
    auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object())
      return bad(where + ".input_schema must be an object (a JSON schema)", "tools");
    json function = {{"name", *name}, {"parameters", *schema}};
    if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
      if (!d->is_string()) return bad(where + ".description must be a string", "tools");
      function["description"] = *d;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return std::nullopt;
}

// tool_choice: {type: auto | any | tool | none, name (tool), disable_parallel_tool_use}.
std::optional<ApiError> read_tool_choice(const json& choice, json& chat) {
  const char* kShape =
      "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"} (\"tool\" with "
      "a \"name\")";
  auto type = choice.is_object() ? choice.find("type") : choice.end();
  if (type == choice.end() || !type->is_string()) return bad(kShape, "tool_choice");
  const std::string t = type->get<std::string>();
  if (t == "auto" || t == "none") {
    chat["tool_choice"] = t;
  } else if (t == "any") {
    chat["tool_choice"] = "required";
  } else if (t == "tool") {
    auto name = choice.find("name");
    if (name == choice.end() || !name->is_string()) return bad(kShape, "tool_choice");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return bad(kShape, "tool_choice");
  }
  if (auto d = choice.find("disable_parallel_tool_use"); d != choice.end() && !d->is_null()) {
    if (!d->is_boolean())
      return bad("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice");
    chat["parallel_tool_calls"] = !d->get<bool>();
  }
  return std::nullopt;
}

// thinking: {type: "enabled", budget_tokens} | {type: "adaptive"} | {type: "disabled"} -> the
// template's enable_thinking and the reasoning budget.
std::optional<ApiError> read_thinking(const json& thinking, json& chat) {
  const char* kShape =
      "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": "
      "\"adaptive\"} or {\"type\": \"disabled\"}";
  auto type = thinking.is_object() ? thinking.find("type") : thinking.end();
  if (type == thinking.end() || !type->is_string()) return bad(kShape, "thinking");
  const std::string t = type->get<std::string>();
  if (t == "disabled") {
    chat["chat_template_kwargs"]["enable_thinking"] = false;
  } else if (t == "adaptive") {
    chat["chat_template_kwargs"]["enable_thinking"] = true;
  } else if (t == "enabled") {
    auto budget = thinking.find("budget_tokens");
    if (budget == thinking.end() || !budget->is_number_integer() || budget->get<int64_t>() < 0 ||
        budget->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad("'thinking.budget_tokens' must be a non-negative integer", "thinking");
    chat["chat_template_kwargs"]["enable_thinking"] = true;
    chat["max_reasoning_tokens"] = *budget;
  } else {
    return bad(kShape, "thinking");
  }
  return std::nullopt;
}

std::optional<ApiError> read_metadata(const json& metadata, json& chat) {
  if (!metadata.is_object()) return bad("'metadata' must be an object", "metadata");
  for (const auto& [key, value] : metadata.items()) {
    if (key != "user_id") return bad("unknown field 'metadata." + key + "'", "metadata");
    if (value.is_null()) continue;
    if (!value.is_string()) return bad("'metadata.user_id' must be a string", "metadata");
    chat["user"] = value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> anthropic_chat_request(std::string_view body, AnthropicEndpoint endpoint,
                                               json& chat) {
  if (json_nesting_depth(body) > kMaxJsonDepth) return bad("the JSON body is nested too deeply");
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception& e) {
    return bad(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return bad("the body must be a JSON object");
  for (const auto& [key, value] : doc.items())
    if (std::find(std::begin(kKnownFields), std::end(kKnownFields), key) == std::end(kKnownFields))
      return bad("unknown field '" + key + "'", key);
  auto present = [&](const char* name) -> const json* {
    auto it = doc.find(name);
    return it == doc.end() || it->is_null() ? nullptr : &*it;
  };

  chat = json::object();
  const json* model = present("model");
  if (!model || !model->is_string()) return bad("'model' (a string) is required", "model");
  chat["model"] = *model;
  const json* max_tokens = present("max_tokens");
  if (max_tokens) {
    if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
      return bad("'max_tokens' must be an integer of at least 1", "max_tokens");
    chat["max_tokens"] = *max_tokens;
  } else if (endpoint == AnthropicEndpoint::kMessages) {
    return bad("'max_tokens' is required", "max_tokens");
  }

  chat["messages"] = json::array();
  if (const json* system = present("system")) {
    std::string text;
    if (auto e = read_text(*system, "system", text)) {
      e->param = "system";
      return e;
    }
    chat["messages"].push_back({{"role", "system"}, {"content", std::move(text)}});
  }
  const json* messages = present("messages");
  if (!messages) return bad("'messages' is required", "messages");
  if (auto e = read_messages(*messages, chat["messages"])) return e;

  if (const json* tools = present("tools"))
    if (auto e = read_tools(*tools, chat["tools"])) return e;
  if (const json* choice = present("tool_choice"))
    if (auto e = read_tool_choice(*choice, chat)) return e;
  if (const json* thinking = present("thinking"))
    if (auto e = read_thinking(*thinking, chat)) return e;
  if (const json* metadata = present("metadata"))
    if (auto e = read_metadata(*metadata, chat)) return e;
  if (const json* stop = present("stop_sequences")) {
    if (!stop->is_array() ||
        !std::all_of(stop->begin(), stop->end(), [](const json& s) { return s.is_string(); }))
      return bad("'stop_sequences' must be an array of strings", "stop_sequences");
    if (!stop->empty()) chat["stop"] = *stop;
  }
  // Checked by the chat parser, under the same names.
  for (const char* name : {"temperature", "top_p", "top_k", "vela_test_script"})
    if (const json* v = present(name)) chat[name] = *v;
  if (const json* stream = present("stream")) {
    if (!stream->is_boolean()) return bad("'stream' must be a boolean", "stream");
    if (stream->get<bool>() && endpoint == AnthropicEndpoint::kMessages) {
      chat["stream"] = true;
      chat["stream_options"] = {{"include_usage", true}};
    }
  }
  return std::nullopt;
}

std::optional<ApiError> AnthropicDialect::to_chat_request(std::string_view body, json& chat) {
  return anthropic_chat_request(body, AnthropicEndpoint::kMessages, chat);
}

}  // namespace vela::server

#include "server/api_dialects/responses_dialect.h"

#include <utility>

#include "server/api_dialects/responses_request.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

// {"type": "reasoning", "id": "rs_…", "summary": [], "content": [{"type": "reasoning_text",
// "text"}], "status"}. No summaries are written: the text itself is returned.
json reasoning_item(const std::string& id, const std::string& text, const char* status) {
  return json{{"type", "reasoning"},
              {"id", id},
              {"summary", json::array()},
              {"content", json::array({json{{"type", "reasoning_text"}, {"text", text}}})},
              {"status", status}};
}

json output_text_part(const std::string& text) {
  return json{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json message_item(const std::string& id, const std::string& text, const char* status) {
  return json{{"type", "message"},
              {"id", id},
              {"status", status},
              {"role", "assistant"},
              {"content", json::array({output_text_part(text)})}};
}

json function_call_item(const std::string& id, const std::string& call_id, const std::string& name,
                        const std::string& arguments, const char* status) {
  return json{{"type", "function_call"}, {"id", id},        {"call_id", call_id}, {"name", name},
              {"arguments", arguments},  {"status", status}};
}

// A copy: `fallback` is often a temporary, which a reference would outlive.
std::string string_or(const json& obj, const char* key, const std::string& fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ref<const std::string&>() : fallback;
}

int64_t int_at(const json& obj, const char* key, const char* inner = nullptr) {
  auto it = obj.find(key);
  if (it == obj.end()) return 0;
  if (inner) {
    if (!it->is_object()) return 0;
    return int_at(*it, inner);
  }
  return it->is_number_integer() ? it->get<int64_t>() : 0;
}

// Chat usage {"prompt_tokens", "completion_tokens", "prompt_tokens_details": {"cached_tokens"},
// "completion_tokens_details"?: {"reasoning_tokens"}} in the Responses shape.
json responses_usage(const json& usage) {
  if (!usage.is_object()) return nullptr;
  const int64_t input = int_at(usage, "prompt_tokens");
  const int64_t output = int_at(usage, "completion_tokens");
  return json{
      {"input_tokens", input},
      {"input_tokens_details",
       {{"cached_tokens", int_at(usage, "prompt_tokens_details", "cached_tokens")}}},
      {"output_tokens", output},
      {"output_tokens_details",
       {{"reasoning_tokens", int_at(usage, "completion_tokens_details", "reasoning_tokens")}}},
      {"total_tokens", input + output}};
}

// An item cut short (max_output_tokens, an abort) is "incomplete".
const char* item_status(const std::string& finish_reason) {
  return finish_reason == "stop" || finish_reason == "tool_calls" ? "completed" : "incomplete";
}

}  // namespace

std::optional<ApiError> ResponsesDialect::to_chat_request(std::string_view body, json& chat) {
  return responses_to_chat_request(body, chat, echo_);
}

json ResponsesDialect::error_json(int status, const json& openai_error) {
  (void)status;  // the Responses API answers errors in OpenAI's shape, with its own names
  return responses_error(openai_error);
}

void ResponsesDialect::set_ids(const json& chat) {
  const std::string id = string_or(chat, "id", "");
  const size_t dash = id.find('-');  // "chatcmpl-<hex>"
  id_suffix_ = dash == std::string::npos ? id : id.substr(dash + 1);
  created_at_ = int_at(chat, "created");
  model_ = string_or(chat, "model", "");
}

std::string ResponsesDialect::item_id(const char* prefix, size_t output_index) const {
  return std::string(prefix) + "_" + id_suffix_ + "_" + std::to_string(output_index);
}

json ResponsesDialect::response_object(const std::string& finish_reason, json output,
                                       json usage) const {
  json r = echo_;
  r["id"] = "resp_" + id_suffix_;
  r["object"] = "response";
  r["created_at"] = created_at_;
  r["model"] = model_;
  r["output"] = std::move(output);
  r["usage"] = std::move(usage);
  r["status"] = "completed";
  r["error"] = nullptr;
  r["incomplete_details"] = nullptr;
  if (finish_reason.empty()) {
    r["status"] = "in_progress";
  } else if (finish_reason == "length") {
    r["status"] = "incomplete";
    r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  } else if (finish_reason == "abort") {
    r["status"] = "failed";
    r["error"] = {{"code", "server_error"},
                  {"message",
                   "the generation was stopped before it finished (the server's request timeout "
                   "or shutdown)"}};
  }
  return r;
}

json ResponsesDialect::from_chat_response(const json& chat) {
  if (!chat.is_object() || !chat.contains("choices") || !chat["choices"].is_array() ||
      chat["choices"].empty())
    return chat;
  set_ids(chat);
  const json& choice = chat["choices"][0];
  const json message = choice.value("message", json::object());
  const std::string finish = string_or(choice, "finish_reason", "stop");
  json output = json::array();
  const std::string reasoning = string_or(message, "reasoning_content", "");
  if (!reasoning.empty())
    output.push_back(reasoning_item(item_id("rs", output.size()), reasoning, "completed"));
  const std::string content = string_or(message, "content", "");
  if (!content.empty())
    output.push_back(message_item(item_id("msg", output.size()), content, "completed"));
  for (const json& call : message.value("tool_calls", json::array())) {
    const json function = call.value("function", json::object());
    output.push_back(function_call_item(item_id("fc", output.size()), string_or(call, "id", ""),
                                        string_or(function, "name", ""),
                                        string_or(function, "arguments", ""), "completed"));
  }
  // The item the output ended in is the one cut short, if it was.
  if (!output.empty()) output.back()["status"] = item_status(finish);
  return response_object(finish, std::move(output), responses_usage(chat.value("usage", json())));
}

std::string ResponsesDialect::event(const char* type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return named_sse_event(type, data);
}

std::string ResponsesDialect::start_stream() {
  started_ = true;
  const json r = response_object("", json::array(), nullptr);
  std::string out = event("response.created", {{"response", r}});
  out += event("response.in_progress", {{"response", r}});  // numbered after created
  return out;
}

std::string ResponsesDialect::open_item(ItemKind kind, json item) {
  const size_t index = output_.size();
  open_kind_ = kind;
  open_text_.clear();
  std::string out = event("response.output_item.added", {{"output_index", index}, {"item", item}});
  const json part = kind == ItemKind::kReasoning ? json{{"type", "reasoning_text"}, {"text", ""}}
                    : kind == ItemKind::kMessage ? output_text_part("")
                                                 : json();
  if (!part.is_null())
    out += event(
        "response.content_part.added",
        {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  open_item_ = std::move(item);
  return out;
}

std::string ResponsesDialect::close_item(const char* status) {
  if (open_kind_ == ItemKind::kNone) return "";
  const size_t index = output_.size();
  const std::string id = open_item_["id"];
  std::string out;
  json item;
  if (open_kind_ == ItemKind::kReasoning) {
    out += event(
        "response.reasoning_text.done",
        {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", open_text_}});
    out += event("response.content_part.done",
                 {{"item_id", id},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", {{"type", "reasoning_text"}, {"text", open_text_}}}});
    item = reasoning_item(id, open_text_, status);
  } else if (open_kind_ == ItemKind::kMessage) {
    out += event("response.output_text.done", {{"item_id", id},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"text", open_text_},
                                               {"logprobs", json::array()}});
    out += event("response.content_part.done", {{"item_id", id},
                                                {"output_index", index},
                                                {"content_index", 0},
                                                {"part", output_text_part(open_text_)}});
    item = message_item(id, open_text_, status);
  } else {
    out += event("response.function_call_arguments.done",
                 {{"item_id", id}, {"output_index", index}, {"arguments", open_text_}});
    item = function_call_item(id, open_item_["call_id"], open_item_["name"], open_text_, status);
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  open_kind_ = ItemKind::kNone;
  open_text_.clear();
  return out;
}

std::string ResponsesDialect::add_reasoning(const std::string& text) {
  std::string out;
  if (open_kind_ == ItemKind::kMessage && !held_space_.empty()) out += emit_text(held_space_);
  held_space_.clear();
  if (open_kind_ != ItemKind::kReasoning) {
    out += close_item("completed");
    out += open_item(ItemKind::kReasoning, json{{"type", "reasoning"},
                                                {"id", item_id("rs", output_.size())},
                                                {"summary", json::array()},
                                                {"content", json::array()},
                                                {"status", "in_progress"}});
  }
  open_text_ += text;
  out += event("response.reasoning_text.delta", {{"item_id", open_item_["id"]},
                                                 {"output_index", output_.size()},
                                                 {"content_index", 0},
                                                 {"delta", text}});
  return out;
}

std::string ResponsesDialect::emit_text(const std::string& text) {
  std::string out;
  if (open_kind_ != ItemKind::kMessage) {
    out += close_item("completed");
    out += open_item(ItemKind::kMessage, json{{"type", "message"},
                                              {"id", item_id("msg", output_.size())},
                                              {"status", "in_progress"},
                                              {"role", "assistant"},
                                              {"content", json::array()}});
  }
  open_text_ += text;
  out += event("response.output_text.delta", {{"item_id", open_item_["id"]},
                                              {"output_index", output_.size()},
                                              {"content_index", 0},
                                              {"delta", text},
                                              {"logprobs", json::array()}});
  return out;
}

// Whitespace at the end of the content so far is held back: before a function call it is only
// the separator the model wrote (the whole answer trims it too), and no message item is opened
// for it; more text, or the end of the output without calls, releases it.
std::string ResponsesDialect::add_content(std::string text) {
  text.insert(0, held_space_);
  held_space_.clear();
  const size_t last = text.find_last_not_of(" \t\r\n");
  if (last == std::string::npos) {
    held_space_ = std::move(text);
    return "";
  }
  held_space_ = text.substr(last + 1);
  text.resize(last + 1);
  return emit_text(text);
}

std::string ResponsesDialect::add_tool_call(const json& call) {
  if (!call.is_object()) return "";
  std::string out;
  const json function = call.value("function", json::object());
  if (call.contains("id")) {  // a call's first delta: its id and name
    held_space_.clear();
    saw_call_ = true;
    out += close_item("completed");
    out += open_item(ItemKind::kFunctionCall, json{{"type", "function_call"},
                                                   {"id", item_id("fc", output_.size())},
                                                   {"call_id", string_or(call, "id", "")},
                                                   {"name", string_or(function, "name", "")},
                                                   {"arguments", ""},
                                                   {"status", "in_progress"}});
  }
  const std::string arguments = string_or(function, "arguments", "");
  if (open_kind_ != ItemKind::kFunctionCall || arguments.empty()) return out;
  open_text_ += arguments;
  out += event(
      "response.function_call_arguments.delta",
      {{"item_id", open_item_["id"]}, {"output_index", output_.size()}, {"delta", arguments}});
  return out;
}

std::string ResponsesDialect::stream_chunk(const json& chunk) {
  if (!chunk.is_object()) return "";
  std::string out;
  if (!started_) {
    set_ids(chunk);
    out += start_stream();
  }
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object())
    usage_ = responses_usage(*u);
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  const json delta = choice.value("delta", json::object());
  if (const std::string r = string_or(delta, "reasoning_content", ""); !r.empty())
    out += add_reasoning(r);
  if (const std::string c = string_or(delta, "content", ""); !c.empty()) out += add_content(c);
  if (auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array())
    for (const json& call : *calls) out += add_tool_call(call);
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string())
    finish_reason_ = f->get<std::string>();
  return out;
}

std::string ResponsesDialect::stream_end() {
  std::string out;
  if (!started_) out += start_stream();
  // Whitespace still held: the end of the message, unless the output went on to calls.
  if (!held_space_.empty() && (open_kind_ == ItemKind::kMessage || !saw_call_))
    out += emit_text(held_space_);
  held_space_.clear();
  out += close_item(item_status(finish_reason_));
  const json r = response_object(finish_reason_, output_, usage_);
  const std::string status = r["status"];
  const char* type = status == "completed"    ? "response.completed"
                     : status == "incomplete" ? "response.incomplete"
                                              : "response.failed";
  out += event(type, {{"response", r}});
  return out;
}

}  // namespace vela::server

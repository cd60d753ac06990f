// The chat handler's answers as Anthropic's: messages, errors and the event stream (see
// anthropic_dialect.h). The request's translation is in anthropic_request.cpp.
#include "server/api_dialects/anthropic_dialect.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

// Anthropic's usage from the chat layer's {"prompt_tokens", "completion_tokens",
// "prompt_tokens_details": {"cached_tokens"}}. Anthropic counts cache reads apart from
// input_tokens (the prompt is their sum).
json usage_from_chat(const json& usage) {
  const int64_t prompt = usage.value("prompt_tokens", int64_t(0));
  int64_t cached = 0;
  if (auto d = usage.find("prompt_tokens_details"); d != usage.end() && d->is_object())
    cached = d->value("cached_tokens", int64_t(0));
  return json{{"input_tokens", prompt - cached},
              {"output_tokens", usage.value("completion_tokens", int64_t(0))},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", cached}};
}

// stop_reason from the chat finish_reason; `stop_string` is the matched stop sequence (the chat
// choice's "stop_reason"), a string or null.
const char* stop_reason_from_chat(const json& finish_reason, const json& stop_string) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "stop" && stop_string.is_string()) return "stop_sequence";
  return "end_turn";
}

json matched_stop_sequence(const json& choice) {
  auto s = choice.find("stop_reason");
  return s != choice.end() && s->is_string() ? *s : json(nullptr);
}

// A tool call's arguments (JSON text) as the tool_use block's input object.
json tool_input(const json& function) {
  auto args = function.find("arguments");
  if (args == function.end() || !args->is_string()) return json::object();
  json input = json::parse(args->get_ref<const std::string&>(), nullptr, false);
  return input.is_object() ? input : json::object();
}

std::string with_prefix(std::string_view prefix, std::string_view id, std::string_view old) {
  if (id.substr(0, old.size()) == old) id.remove_prefix(old.size());
  return std::string(prefix) + std::string(id);
}

bool non_empty_string(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

}  // namespace

json anthropic_error(int status, std::string_view message) {
  return json{{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}};
}

std::string anthropic_message_id(std::string_view chat_id) {
  return with_prefix("msg_", chat_id, "chatcmpl-");
}

std::string anthropic_tool_use_id(std::string_view call_id) {
  return with_prefix("toolu_", call_id, "call_");
}

json AnthropicDialect::error_json(int status, const json& openai_error) {
  std::string message = "error";
  if (auto e = openai_error.find("error"); e != openai_error.end() && e->is_object())
    if (auto m = e->find("message"); m != e->end() && m->is_string()) message = *m;
  return anthropic_error(status, message);
}

json AnthropicDialect::from_chat_response(const json& chat) {
  const json& choices = chat.at("choices");
  const json choice = choices.empty() ? json::object() : choices[0];
  const json message = choice.value("message", json::object());
  json content = json::array();
  if (non_empty_string(message, "reasoning_content"))
    content.push_back(
        {{"type", "thinking"}, {"thinking", message["reasoning_content"]}, {"signature", ""}});
  if (non_empty_string(message, "content"))
    content.push_back({{"type", "text"}, {"text", message["content"]}});
  for (const json& call : message.value("tool_calls", json::array())) {
    const json function = call.value("function", json::object());
    content.push_back({{"type", "tool_use"},
                       {"id", anthropic_tool_use_id(call.value("id", ""))},
                       {"name", function.value("name", "")},
                       {"input", tool_input(function)}});
  }
  const json finish = choice.value("finish_reason", json(nullptr));
  const json stop_sequence = matched_stop_sequence(choice);
  return json{{"id", anthropic_message_id(chat.value("id", ""))},
              {"type", "message"},
              {"role", "assistant"},
              {"model", chat.value("model", "")},
              {"content", std::move(content)},
              {"stop_reason", stop_reason_from_chat(finish, stop_sequence)},
              {"stop_sequence", finish == "stop" ? stop_sequence : json(nullptr)},
              {"usage", usage_from_chat(chat.value("usage", json::object()))}};
}

void AnthropicDialect::set_prompt_tokens(int64_t prompt_tokens) {
  prompt_tokens_ = prompt_tokens;
}

void AnthropicDialect::start_message(const json& chat_chunk, std::string& out) {
  started_ = true;
  // The prompt's cached share is known only at the end (message_delta's usage).
  json message = {{"id", anthropic_message_id(chat_chunk.value("id", ""))},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", chat_chunk.value("model", "")},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage",
                   {{"input_tokens", prompt_tokens_},
                    {"output_tokens", 0},
                    {"cache_creation_input_tokens", 0},
                    {"cache_read_input_tokens", 0}}}};
  out += named_sse_event("message_start",
                         json{{"type", "message_start"}, {"message", std::move(message)}});
  out += named_sse_event("ping", json{{"type", "ping"}});
}

void AnthropicDialect::close_block(std::string& out) {
  if (open_ == Block::kNone) return;
  // Thinking blocks carry a signature for Anthropic's models to verify; this server has none.
  if (open_ == Block::kThinking)
    out += named_sse_event("content_block_delta",
                           json{{"type", "content_block_delta"},
                                {"index", open_index_},
                                {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
  out += named_sse_event("content_block_stop",
                         json{{"type", "content_block_stop"}, {"index", open_index_}});
  open_ = Block::kNone;
}

void AnthropicDialect::open_block(Block kind, const json& content_block, std::string& out) {
  if (open_ == kind && kind != Block::kToolUse) return;
  close_block(out);
  open_ = kind;
  open_index_ = next_index_++;
  out += named_sse_event("content_block_start", json{{"type", "content_block_start"},
                                                     {"index", open_index_},
                                                     {"content_block", content_block}});
}

void AnthropicDialect::block_delta(const json& delta, std::string& out) {
  auto emit = [&](json d) {
    out += named_sse_event(
        "content_block_delta",
        json{{"type", "content_block_delta"}, {"index", open_index_}, {"delta", std::move(d)}});
  };
  if (non_empty_string(delta, "reasoning_content")) {
    open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
    emit({{"type", "thinking_delta"}, {"thinking", delta["reasoning_content"]}});
  }
  if (non_empty_string(delta, "content")) {
    open_block(Block::kText, {{"type", "text"}, {"text", ""}}, out);
    emit({{"type", "text_delta"}, {"text", delta["content"]}});
  }
  if (auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array())
    for (const json& call : *calls) tool_call_delta(call, out);
}

// chat tool-call deltas: the first of a call has its id and name, the rest arguments only. The
// chat handler streams each call whole before the next, so a call's block is the open one.
void AnthropicDialect::tool_call_delta(const json& call, std::string& out) {
  if (!call.is_object()) return;
  const int index = call.value("index", 0);
  const json function = call.value("function", json::object());
  if (non_empty_string(call, "id")) {
    open_block(Block::kToolUse,
               {{"type", "tool_use"},
                {"id", anthropic_tool_use_id(call["id"].get<std::string>())},
                {"name", function.value("name", "")},
                {"input", json::object()}},
               out);
    tool_blocks_[index] = open_index_;
  }
  auto block = tool_blocks_.find(index);
  if (block == tool_blocks_.end() || block->second != open_index_ || open_ != Block::kToolUse)
    return;
  if (!non_empty_string(function, "arguments")) return;
  out += named_sse_event(
      "content_block_delta",
      json{{"type", "content_block_delta"},
           {"index", open_index_},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", function["arguments"]}}}});
}

std::string AnthropicDialect::stream_chunk(const json& chat_chunk) {
  std::string out;
  if (ended_ || !chat_chunk.is_object()) return out;
  if (!started_) start_message(chat_chunk, out);
  if (auto usage = chat_chunk.find("usage"); usage != chat_chunk.end() && usage->is_object())
    usage_ = *usage;
  auto choices = chat_chunk.find("choices");
  if (choices == chat_chunk.end() || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object())
    block_delta(*delta, out);
  if (auto finish = choice.find("finish_reason"); finish != choice.end() && !finish->is_null()) {
    finish_reason_ = *finish;
    stop_sequence_ = matched_stop_sequence(choice);
    close_block(out);
  }
  return out;
}

std::string AnthropicDialect::stream_end() {
  std::string out;
  if (ended_) return out;
  ended_ = true;
  if (!started_) start_message(json::object(), out);
  close_block(out);
  // Aborted: --request-timeout passed or the server is stopping (a client that left reads
  // nothing). Anthropic's streams report such failures as an error event.
  if (finish_reason_ == "abort") {
    out += named_sse_event(
        "error", anthropic_error(500,
                                 "the generation was stopped before it finished (the server's "
                                 "--request-timeout passed, or it is shutting down)"));
    return out;
  }
  json usage = usage_.is_object() ? usage_from_chat(usage_) : json{{"output_tokens", 0}};
  out += named_sse_event(
      "message_delta",
      json{{"type", "message_delta"},
           {"delta",
            {{"stop_reason", stop_reason_from_chat(finish_reason_, stop_sequence_)},
             {"stop_sequence", finish_reason_ == "stop" ? stop_sequence_ : json(nullptr)}}},
           {"usage", std::move(usage)}});
  out += named_sse_event("message_stop", json{{"type", "message_stop"}});
  return out;
}

}  // namespace vela::server

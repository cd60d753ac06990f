#pragma once
// POST /v1/responses: OpenAI's Responses API (stateless subset) served by translation to chat
// completions. The request becomes a chat request (responses_request.h); the chat answer
// becomes a response object whose `output` holds a reasoning item (when the reasoning parser
// found thinking), a message item, and function_call items; a chat stream becomes the
// Responses event stream (response.created, response.in_progress, per item
// response.output_item.added ... response.output_item.done, then response.completed or
// response.incomplete carrying the whole response).
//
// Thread-safety: one instance per request, as ApiDialect says (calls never overlap).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_dialects/api_dialect.h"

namespace vela::server {

class ResponsesDialect : public ApiDialect {
 public:
  std::optional<ApiError> to_chat_request(std::string_view body, nlohmann::json& chat) override;
  nlohmann::json from_chat_response(const nlohmann::json& chat_response) override;
  nlohmann::json error_json(int status, const nlohmann::json& openai_error) override;
  std::string stream_chunk(const nlohmann::json& chat_chunk) override;
  std::string stream_end() override;

 private:
  enum class ItemKind { kNone, kReasoning, kMessage, kFunctionCall };

  // The response object: this request's echo fields, then id, status, output, usage, ...
  // `finish_reason` is the chat one ("stop", "length", "tool_calls", "abort").
  nlohmann::json response_object(const std::string& finish_reason, nlohmann::json output,
                                 nlohmann::json usage) const;
  void set_ids(const nlohmann::json& chat);  // response and item ids from the chat id

  // Streaming: one event record, numbered.
  std::string event(const char* type, nlohmann::json data);
  std::string start_stream();
  std::string open_item(ItemKind kind, nlohmann::json item);
  std::string close_item(const char* status);
  std::string add_reasoning(const std::string& text);
  std::string add_content(std::string text);
  std::string emit_text(const std::string& text);  // message text, opening the item if needed
  std::string add_tool_call(const nlohmann::json& call);  // one entry of delta.tool_calls
  std::string item_id(const char* prefix, size_t output_index) const;

  nlohmann::json echo_ = nlohmann::json::object();  // request fields the response repeats
  std::string id_suffix_;                           // the chat id's, for resp_/msg_/... ids
  int64_t created_at_ = 0;
  std::string model_;

  // Streaming state.
  bool started_ = false;
  int64_t sequence_ = 0;
  nlohmann::json output_ = nlohmann::json::array();  // finished items
  ItemKind open_kind_ = ItemKind::kNone;
  nlohmann::json open_item_;  // the item being streamed (its text or arguments so far)
  std::string open_text_;     // reasoning text / message text / call arguments so far
  std::string held_space_;    // trailing whitespace of the content, held back (see add_content)
  bool saw_call_ = false;     // a function_call item was opened
  std::string finish_reason_ = "stop";
  nlohmann::json usage_ = nullptr;  // Responses usage, from the last chat chunk
};

}  // namespace vela::server

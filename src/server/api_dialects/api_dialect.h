#pragma once
// A client API served by translation: its request body becomes a chat-completions request, and
// the chat handler's answer (the whole response, each streamed chunk, errors) becomes the API's
// own. The OpenAI Responses API and Anthropic's Messages API are dialects; the handler, its
// parsers (reasoning, tool calls, structured output) and the engine are shared with
// /v1/chat/completions.
//
// Thread-safety: one instance serves one request. to_chat_request() runs on a request worker
// before any other call; the other calls follow on the io_context thread (the hand-over is a
// post), never concurrently.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace vela::server {

class ApiDialect {
 public:
  virtual ~ApiDialect() = default;

  // The API's request body as a chat-completions request (a JSON object the chat parser then
  // validates), or the 4xx to answer. Streaming requests ask for the usage chunk.
  virtual std::optional<ApiError> to_chat_request(std::string_view body, nlohmann::json& chat) = 0;
  // A whole chat-completions response (one choice) as the API's response.
  virtual nlohmann::json from_chat_response(const nlohmann::json& chat_response) = 0;
  // An error in the API's shape; `openai_error` is the OpenAI body {"error": {...}}.
  virtual nlohmann::json error_json(int status, const nlohmann::json& openai_error) = 0;
  // Streaming: the prompt's token count, given before the first chunk (the chat layer's usage
  // chunk comes last), for APIs whose stream opens with the input usage.
  virtual void set_prompt_tokens(int64_t prompt_tokens) { (void)prompt_tokens; }
  // Streaming: the server-sent events (whole "event:/data:" records) that one chat chunk
  // becomes (possibly none), and those that end the stream.
  virtual std::string stream_chunk(const nlohmann::json& chat_chunk) = 0;
  virtual std::string stream_end() = 0;
};

// The dialect serving `path` (POST /v1/responses, /v1/messages), or null. Also Anthropic's for
// /v1/messages/count_tokens, which the session answers itself, so its errors take that shape.
std::shared_ptr<ApiDialect> dialect_for_path(std::string_view path);

// An error body for `path` in its API's shape (OpenAI's unless a dialect serves the path).
std::string error_body_for_path(std::string_view path, const ApiError& error);

// "event: NAME\ndata: JSON\n\n".
std::string named_sse_event(std::string_view name, const nlohmann::json& data);

}  // namespace vela::server

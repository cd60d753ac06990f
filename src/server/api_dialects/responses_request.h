#pragma once
// POST /v1/responses (OpenAI's Responses API, the stateless subset) as a chat-completions
// request: `input` (a string or message / function_call / function_call_output / reasoning
// items) and `instructions` become `messages`, the flat function tools become chat's nested
// ones, `text.format` becomes `response_format`, `max_output_tokens` becomes `max_tokens`,
// `reasoning.effort` becomes `reasoning_effort`. Nothing is stored, so `previous_response_id`
// is refused; so are unknown fields and tool types other than functions.
// Free functions over plain values; no thread-safety concerns.
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace vela::server {

// Translates the Responses request `body` into `chat` (a chat-completions request object; the
// chat parser validates it further). `echo` receives the request fields a Responses response
// object repeats: {"instructions", "max_output_tokens", "metadata", "parallel_tool_calls",
// "reasoning", "temperature", "text", "tool_choice", "tools" (flat, as sent), "top_p", "user"?,
// ...}. Returns the 400 to answer for bad input.
std::optional<ApiError> responses_to_chat_request(std::string_view body, nlohmann::json& chat,
                                                  nlohmann::json& echo);

// A chat-side error in Responses terms: the chat request fields the translation wrote
// (max_tokens, messages, response_format, ...) renamed to the Responses fields they came from,
// in `param` and in quoted names in the message. `openai_error` is {"error": {...}}.
nlohmann::json responses_error(const nlohmann::json& openai_error);

}  // namespace vela::server

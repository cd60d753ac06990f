#pragma once
// JSON shapes of OpenAI responses: completions and chat completions (whole and streamed as
// server-sent events), logprobs in each endpoint's format, usage, the model list.
// Free functions over plain values; no thread-safety concerns.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/generation_request.h"
#include "vela/llm.h"

namespace vela::server {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// Serialises without throwing: bytes that are not valid UTF-8 (a token can hold part of a
// character) become U+FFFD.
std::string dump_json(const nlohmann::json& value);

// "data: <json>\n\n" and the terminator of an event stream.
std::string sse_event(const nlohmann::json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// Completions logprobs {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
// text_offset continues from `offset`, which is advanced past these tokens.
nlohmann::json completion_logprobs(std::span<const TokenLogprobs> tokens, int64_t& offset);
// Chat logprobs {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
nlohmann::json chat_logprobs(std::span<const TokenLogprobs> tokens);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// One choice of a whole response. `logprobs` null when not requested; finish_reason as the
// engine names it ("stop", "length", "abort").
nlohmann::json response_choice(Endpoint endpoint, int32_t index, const std::string& text,
                               nlohmann::json logprobs, const char* finish_reason);
// The whole (non-streamed) response.
nlohmann::json full_response(const ResponseMeta& meta, nlohmann::json choices,
                             nlohmann::json usage);

// One streamed chunk with a single choice. Chat: `role_delta` adds "role": "assistant" (the
// first chunk of a choice); completions ignore it. finish_reason null while running.
nlohmann::json stream_chunk(const ResponseMeta& meta, int32_t index, std::string_view text,
                            bool role_delta, nlohmann::json logprobs, const char* finish_reason,
                            bool include_usage_field);
// The final usage chunk of a stream (choices empty).
nlohmann::json usage_chunk(const ResponseMeta& meta, nlohmann::json usage);

// GET /v1/models.
nlohmann::json models_list(const std::string& model_name, int64_t created, int32_t max_model_len);

}  // namespace vela::server

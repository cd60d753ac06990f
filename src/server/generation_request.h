#pragma once
// The body of POST /v1/completions and /v1/chat/completions, parsed and validated: JSON types,
// ranges (Sampler::validate plus the API's own limits), and options this server does not
// implement (a clear 400 rather than silently ignoring them). Tokenization and chat-template
// rendering happen later, in the handler, which knows the model.
// A plain value type; no thread-safety concerns.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/tool_calls.h"
#include "util/json_depth.h"
#include "vela/sampling_params.h"

namespace vela::server {

enum class Endpoint { kCompletions, kChatCompletions };

// One prompt of a completions request: text, or token ids sent by the client.
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool pretokenized = false;  // tokens came from the client
};

struct RequestLimits {
  int32_t max_n = 16;        // choices per prompt
  int32_t max_prompts = 64;  // prompts in one completions request
  int32_t max_stop = 16;     // stop strings
  int32_t max_stop_token_ids = 64;
  int32_t default_chat_max_tokens = 2048;  // chat without max_tokens: up to the context
  int32_t max_best_of = 16;                // completions' best_of
  int32_t max_logit_bias = 300;            // logit_bias entries (OpenAI's limit)
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                 // as sent; empty when absent
  std::vector<PromptInput> prompts;  // completions
  nlohmann::json messages;           // chat: [{"role": str, "content": str}, ...]
  SamplingParams params;             // max_tokens, stop, logprobs, ... filled in
  bool max_tokens_given = false;     // the client chose max_tokens (else the default applies)
  int32_t n = 1;
  int32_t best_of = 1;  // completions: candidates per prompt (>= n); the n best are returned
  bool echo = false;    // completions: the prompt's text precedes each choice's text
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report logprobs (completions: logprobs given; chat: true)
  int32_t top_logprobs = 0;    // alternatives per token
  int32_t priority = 0;        // engine priority: higher first (the API's value, negated)
  std::string user;
  ToolRequest tools;  // chat: tools, tool_choice, parallel_tool_calls
  // chat: variables for the chat template (chat_template_kwargs, with a top-level
  // enable_thinking / reasoning_effort folded in where the kwargs do not set them).
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  int32_t max_reasoning_tokens = -1;  // max_reasoning_tokens / thinking_token_budget; -1 = none
  // Test hook: text pieces the model writes (each tokenized alone), then EOS unless
  // test_script_eos is false (sampling then goes on).
  std::optional<std::vector<std::string>> test_script;
  bool test_script_eos = true;
};

// Parses `body` for `endpoint`. On failure returns the 4xx error to send.
std::optional<ApiError> parse_generation_request(std::string_view body, Endpoint endpoint,
                                                 const RequestLimits& limits,
                                                 GenerationRequest& out);

// Deepest nesting of arrays/objects in a JSON text (util/json_depth.h).
using vela::json_nesting_depth;

}  // namespace vela::server

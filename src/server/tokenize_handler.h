#pragma once
// POST /tokenize and /detokenize in vLLM's shapes:
//   /tokenize   {"prompt": "...", "add_special_tokens": true, "return_token_strs": false}
//            or {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false}
//               (with the chat request's "tools" and "chat_template_kwargs", rendered as for chat)
//            -> {"count": N, "max_model_len": M, "tokens": [...], "token_strs": [...] | null}
//   /detokenize {"tokens": [...]} -> {"prompt": "..."}
// Either may name the model ("model"); another model's name is a 404 as for completions.
// Free functions over an immutable model (the tokenizer and chat formatter are thread-safe):
// safe to call from the request workers concurrently.
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/server_context.h"

namespace vela::server {

struct JsonReply {
  int status = 200;
  std::string body;
};

JsonReply tokenize_reply(std::string_view body, const LoadedModel& model,
                         const std::string& served_model_name);

// A parsed chat request's prompt text as the chat handler renders it (the request's tools and
// template variables included), or the 4xx to answer. Shared with Anthropic's count_tokens.
std::optional<ApiError> render_chat_prompt(const GenerationRequest& request,
                                           const LoadedModel& model, bool add_generation_prompt,
                                           std::string& text);
JsonReply detokenize_reply(std::string_view body, const LoadedModel& model,
                           const std::string& served_model_name);

}  // namespace vela::server

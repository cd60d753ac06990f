#pragma once
// POST /v1/messages/count_tokens: a Messages request (max_tokens not needed) -> {"input_tokens":
// N}, the prompt the chat template renders from it (system, messages, tools, the thinking
// switch) counted in tokens, as /v1/messages would submit it. Errors in Anthropic's shape.
// A free function over an immutable model: safe on the request workers, concurrently.
#include <string>
#include <string_view>

#include "server/server_context.h"
#include "server/tokenize_handler.h"

namespace vela::server {

JsonReply anthropic_count_tokens_reply(std::string_view body, const LoadedModel& model,
                                       const std::string& served_model_name);

}  // namespace vela::server

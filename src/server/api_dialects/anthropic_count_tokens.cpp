#include "server/api_dialects/anthropic_count_tokens.h"

#include "model/model.h"
#include "server/api_dialects/anthropic_dialect.h"
#include "server/openai_response.h"

namespace vela::server {

JsonReply anthropic_count_tokens_reply(std::string_view body, const LoadedModel& model,
                                       const std::string& served_model_name) {
  auto fail = [](const ApiError& e) {
    return JsonReply{e.status, dump_json(anthropic_error(e.status, e.message))};
  };
  nlohmann::json chat;
  if (auto e = anthropic_chat_request(body, AnthropicEndpoint::kCountTokens, chat)) return fail(*e);
  GenerationRequest request;
  if (auto e = parse_generation_request(dump_json(chat), Endpoint::kChatCompletions,
                                        RequestLimits{}, request))
    return fail(*e);
  if (!request.model.empty() && request.model != served_model_name)
    return fail(ApiError{404,
                         "The model '" + request.model + "' does not exist; this server serves '" +
                             served_model_name + "'",
                         "invalid_request_error", "model", "model_not_found"});
  std::string text;
  if (auto e = render_chat_prompt(request, model, /*add_generation_prompt=*/true, text))
    return fail(*e);
  // As the chat handler tokenizes: the template writes any BOS itself.
  const size_t n = model.engine->tokenizer()
                       .encode(text, /*add_special=*/false,
                               /*parse_special=*/true)
                       .size();
  return JsonReply{200, dump_json(nlohmann::json{{"input_tokens", n}})};
}

}  // namespace vela::server

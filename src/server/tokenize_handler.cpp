#include "server/tokenize_handler.h"

#include <limits>

#include "model/model.h"
#include "server/openai_response.h"

namespace vela::server {

namespace {

using json = nlohmann::json;

JsonReply error_reply(const ApiError& e) {
  return JsonReply{e.status, error_body(e)};
}

// The body as an object, or the error to answer.
std::optional<ApiError> parse_object(std::string_view body, json& doc) {
  if (json_nesting_depth(body) > 64) return invalid_request("the JSON body is nested too deeply");
  try {
    doc = json::parse(body);
  } catch (const json::exception& e) {
    return invalid_request(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return invalid_request("the body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> check_model(const json& doc, const std::string& served) {
  auto it = doc.find("model");
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return invalid_request("'model' must be a string", "model");
  const std::string name = it->get<std::string>();
  if (name.empty() || name == served) return std::nullopt;
  return ApiError{404,
                  "The model '" + name + "' does not exist; this server serves '" + served + "'",
                  "invalid_request_error", "model", "model_not_found"};
}

std::optional<ApiError> read_bool(const json& doc, const char* name, bool& out) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    return invalid_request(std::string("'") + name + "' must be a boolean", name);
  out = it->get<bool>();
  return std::nullopt;
}

}  // namespace

JsonReply tokenize_reply(std::string_view body, const LoadedModel& model,
                         const std::string& served_model_name) {
  json doc;
  if (auto e = parse_object(body, doc)) return error_reply(*e);
  if (auto e = check_model(doc, served_model_name)) return error_reply(*e);
  const Tokenizer& tokenizer = model.engine->tokenizer();
  const bool chat = doc.contains("messages");
  bool add_special = !chat;  // a chat template writes its own BOS
  bool add_generation_prompt = true;
  bool return_strs = false;
  for (auto [name, out] : {std::pair{"add_special_tokens", &add_special},
                           std::pair{"add_generation_prompt", &add_generation_prompt},
                           std::pair{"return_token_strs", &return_strs}})
    if (auto e = read_bool(doc, name, *out)) return error_reply(*e);
  std::string text;
  if (chat) {
    // The chat-completions parser checks and flattens the messages the same way.
    GenerationRequest request;
    if (auto e =
            parse_generation_request(body, Endpoint::kChatCompletions, RequestLimits{}, request))
      return error_reply(*e);
    if (auto e = render_chat_prompt(request, model, add_generation_prompt, text))
      return error_reply(*e);
  } else {
    auto it = doc.find("prompt");
    if (it == doc.end() || !it->is_string())
      return error_reply(
          invalid_request("'prompt' (a string) or 'messages' is required", "prompt"));
    text = it->get<std::string>();
  }
  const std::vector<int32_t> tokens = tokenizer.encode(text, add_special, /*parse_special=*/true);
  json out;
  out["count"] = tokens.size();
  out["max_model_len"] = model.max_model_len;
  out["tokens"] = tokens;
  if (return_strs) {
    json strs = json::array();
    for (int32_t t : tokens) strs.push_back(std::string(tokenizer.token_text(t)));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return JsonReply{200, dump_json(out)};
}

std::optional<ApiError> render_chat_prompt(const GenerationRequest& request,
                                           const LoadedModel& model, bool add_generation_prompt,
                                           std::string& text) {
  if (!model.chat)
    return invalid_request(
        "this model has no usable chat template (" + model.chat_unavailable + ")", "messages",
        "chat_template_missing");
  auto rendered = model.chat->render(request.messages, add_generation_prompt,
                                     request.tools.active() ? request.tools.tools : nullptr,
                                     request.chat_template_kwargs);
  if (!rendered)
    return invalid_request("the chat template failed: " + rendered.message(), "messages");
  text = std::move(*rendered);
  return std::nullopt;
}

JsonReply detokenize_reply(std::string_view body, const LoadedModel& model,
                           const std::string& served_model_name) {
  json doc;
  if (auto e = parse_object(body, doc)) return error_reply(*e);
  if (auto e = check_model(doc, served_model_name)) return error_reply(*e);
  auto it = doc.find("tokens");
  const char* kShape = "'tokens' must be an array of token ids";
  if (it == doc.end() || !it->is_array()) return error_reply(invalid_request(kShape, "tokens"));
  const int32_t n_vocab = model.engine->tokenizer().n_vocab();
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (const json& t : *it) {
    if (!t.is_number_integer()) return error_reply(invalid_request(kShape, "tokens"));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      return error_reply(invalid_request("token id " + std::to_string(id) +
                                             " is out of range (vocabulary of " +
                                             std::to_string(n_vocab) + ")",
                                         "tokens"));
    ids.push_back(int32_t(id));
  }
  json out;
  out["prompt"] = model.engine->tokenizer().decode(ids, /*skip_special=*/false);
  return JsonReply{200, dump_json(out)};
}

}  // namespace vela::server

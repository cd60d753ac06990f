#include "server/openai_response.h"

namespace vela::server {

using json = nlohmann::json;

namespace {

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(int(c));
  return out;
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& value) {
  return "data: " + dump_json(value) + "\n\n";
}

json completion_logprobs(std::span<const TokenLogprobs> tokens, int64_t& offset) {
  json texts = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    texts.push_back(t.text);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const TopLogprob& alt : t.top) top[alt.text] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += int64_t(t.text.size());
  }
  return json{{"tokens", std::move(texts)},
              {"token_logprobs", std::move(lps)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

json chat_logprobs(std::span<const TokenLogprobs> tokens) {
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    json top = json::array();
    for (const TopLogprob& alt : t.top)
      top.push_back(
          json{{"token", alt.text}, {"logprob", alt.logprob}, {"bytes", bytes_of(alt.text)}});
    content.push_back(json{{"token", t.text},
                           {"logprob", t.logprob},
                           {"bytes", bytes_of(t.text)},
                           {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json response_choice(Endpoint endpoint, int32_t index, const std::string& text, json logprobs,
                     const char* finish_reason) {
  json c = {{"index", index}};
  if (endpoint == Endpoint::kCompletions)
    c["text"] = text;
  else
    c["message"] = {{"role", "assistant"}, {"content", text}};
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = finish_reason;
  return c;
}

json full_response(const ResponseMeta& meta, json choices, json usage) {
  return json{{"id", meta.id},
              {"object", object_name(meta.endpoint, false)},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", std::move(choices)},
              {"usage", std::move(usage)}};
}

json stream_chunk(const ResponseMeta& meta, int32_t index, std::string_view text, bool role_delta,
                  json logprobs, const char* finish_reason, bool include_usage_field) {
  json choice = {{"index", index}};
  if (meta.endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    json delta = json::object();
    if (role_delta) delta["role"] = "assistant";
    if (!text.empty() || role_delta) delta["content"] = text;
    choice["delta"] = std::move(delta);
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  json chunk = {{"id", meta.id},
                {"object", object_name(meta.endpoint, true)},
                {"created", meta.created},
                {"model", meta.model},
                {"choices", json::array({std::move(choice)})}};
  // With include_usage every chunk carries "usage": null until the final usage chunk (OpenAI).
  if (include_usage_field) chunk["usage"] = nullptr;
  return chunk;
}

json usage_chunk(const ResponseMeta& meta, json usage) {
  return json{{"id", meta.id},
              {"object", object_name(meta.endpoint, true)},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", json::array()},
              {"usage", std::move(usage)}};
}

json models_list(const std::string& model_name, int64_t created, int32_t max_model_len) {
  return json{{"object", "list"},
              {"data", json::array({json{{"id", model_name},
                                         {"object", "model"},
                                         {"created", created},
                                         {"owned_by", "vela"},
                                         {"root", model_name},
                                         {"max_model_len", max_model_len}}})}};
}

}  // namespace vela::server

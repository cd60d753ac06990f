#include "server/api_dialects/api_dialect.h"

#include "server/api_dialects/anthropic_dialect.h"
#include "server/api_dialects/responses_dialect.h"
#include "server/openai_response.h"

namespace vela::server {

std::shared_ptr<ApiDialect> dialect_for_path(std::string_view path) {
  if (path == "/v1/responses") return std::make_shared<ResponsesDialect>();
  // count_tokens is answered by the session itself (not a generation); its errors take
  // Anthropic's shape too.
  if (path == "/v1/messages" || path == "/v1/messages/count_tokens")
    return std::make_shared<AnthropicDialect>();
  return nullptr;
}

std::string error_body_for_path(std::string_view path, const ApiError& error) {
  const std::string body = error_body(error);
  const std::shared_ptr<ApiDialect> dialect = dialect_for_path(path);
  if (!dialect) return body;
  return dump_json(dialect->error_json(error.status, nlohmann::json::parse(body)));
}

std::string named_sse_event(std::string_view name, const nlohmann::json& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += dump_json(data);
  out += "\n\n";
  return out;
}

}  // namespace vela::server

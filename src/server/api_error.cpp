#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace vela::server {

ApiError invalid_request(std::string message, std::string param, std::string code) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string error_body(const ApiError& error) {
  nlohmann::json inner = {
      {"message", error.message}, {"type", error.type}, {"param", nullptr}, {"code", nullptr}};
  if (!error.param.empty()) inner["param"] = error.param;
  if (!error.code.empty()) inner["code"] = error.code;
  // Messages may quote request bytes that are not valid UTF-8: replace, never throw.
  return nlohmann::json{{"error", inner}}.dump(-1, ' ', false,
                                               nlohmann::json::error_handler_t::replace);
}

}  // namespace vela::server

#pragma once
// OpenAI-shaped errors: an HTTP status plus the body
//   {"error": {"message": "...", "type": "...", "param": ... | null, "code": ... | null}}
// A plain value type; no thread-safety concerns.
#include <string>

namespace vela::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field; empty -> null
  std::string code;   // a machine-readable code; empty -> null
};

// 400 invalid_request_error naming the offending field.
ApiError invalid_request(std::string message, std::string param = "", std::string code = "");

// The JSON text of the error body.
std::string error_body(const ApiError& error);

}  // namespace vela::server

// libFuzzer target: a hostile request body through the OpenAI request parser of both endpoints.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/generation_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  (void)vela::server::json_nesting_depth(body);
  const vela::server::RequestLimits limits;
  for (const auto endpoint :
       {vela::server::Endpoint::kCompletions, vela::server::Endpoint::kChatCompletions}) {
    vela::server::GenerationRequest request;
    (void)vela::server::parse_generation_request(body, endpoint, limits, request);
  }
  return 0;
}

#pragma once
// Where a handler writes its answer: implemented by the HTTP session, and by DialectSink, which
// translates a chat-completions answer into another API's shape on its way to the session.
// Thread-safety: every call runs on the io_context thread.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_response.h"

namespace vela::server {

class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // A whole response. retry_after_seconds > 0 adds a Retry-After header (429).
  virtual void send_json(int status, std::string body, int retry_after_seconds = 0) = 0;
  // 200 with Content-Type text/event-stream, chunked; then any number of writes, then the end.
  virtual void begin_stream() = 0;
  // Queues bytes; false when the client is gone or too far behind (the session then closes
  // the connection and calls client_gone()).
  virtual bool stream_write(std::string_view data) = 0;
  virtual void end_stream() = 0;
  // One completions / chat-completions chunk (a server-sent event by default).
  virtual bool stream_json(const nlohmann::json& chunk) { return stream_write(sse_event(chunk)); }
  // The stream's terminator, before end_stream() ("data: [DONE]" by default).
  virtual bool stream_done() { return stream_write(kSseDone); }
};

}  // namespace vela::server

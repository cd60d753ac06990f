#include "server/api_dialects/dialect_sink.h"

namespace vela::server {

using json = nlohmann::json;

void DialectSink::send_json(int status, std::string body, int retry_after_seconds) {
  auto inner = inner_.lock();
  if (!inner) return;
  // The handler's bodies are its own JSON; one that does not parse is passed on unchanged.
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded())
    body = dump_json(status >= 400 ? dialect_->error_json(status, parsed)
                                   : dialect_->from_chat_response(parsed));
  inner->send_json(status, std::move(body), retry_after_seconds);
}

void DialectSink::begin_stream() {
  if (auto inner = inner_.lock()) inner->begin_stream();
}

bool DialectSink::stream_write(std::string_view data) {
  auto inner = inner_.lock();
  return inner && inner->stream_write(data);
}

void DialectSink::end_stream() {
  if (auto inner = inner_.lock()) inner->end_stream();
}

bool DialectSink::stream_json(const json& chunk) {
  const std::string events = dialect_->stream_chunk(chunk);
  return events.empty() ? bool(inner_.lock()) : stream_write(events);
}

bool DialectSink::stream_done() {
  return stream_write(dialect_->stream_end());
}

}  // namespace vela::server

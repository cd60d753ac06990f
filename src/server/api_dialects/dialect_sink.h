#pragma once
// A ResponseSink in front of the session's: what the chat handler writes (a whole response, an
// error, stream chunks) is translated by an ApiDialect into another API's shape.
// Thread-safety: io_context thread only, like every ResponseSink.
#include <memory>

#include "server/api_dialects/api_dialect.h"
#include "server/response_sink.h"

namespace vela::server {

class DialectSink : public ResponseSink {
 public:
  DialectSink(std::weak_ptr<ResponseSink> inner, std::shared_ptr<ApiDialect> dialect)
      : inner_(std::move(inner)), dialect_(std::move(dialect)) {}

  void send_json(int status, std::string body, int retry_after_seconds = 0) override;
  void begin_stream() override;
  bool stream_write(std::string_view data) override;
  void end_stream() override;
  bool stream_json(const nlohmann::json& chunk) override;
  bool stream_done() override;

 private:
  std::weak_ptr<ResponseSink> inner_;
  std::shared_ptr<ApiDialect> dialect_;
};

}  // namespace vela::server

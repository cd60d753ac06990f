#pragma once
// State shared by the HTTP sessions and generation handlers of one server: options, the loaded
// model (absent while loading), metrics, and the drain bookkeeping for graceful shutdown.
// Thread-safety: everything here is read and written on the io_context thread only, except
// `metrics` (thread-safe) and the AsyncEngine inside `model` (thread-safe by design).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/auth.h"
#include "server/chat_formatter.h"
#include "server/connection_limits.h"
#include "server/generation_request.h"
#include "server/metrics.h"
#include "server/reasoning/reasoning_parser.h"
#include "server/tool_calls.h"

namespace boost::asio {
class io_context;
}

namespace vela::server {

class AccessLogWriter;
class HttpSession;
class RequestWorkers;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0 = any free port (the log line says which)
  std::vector<std::string> api_keys;
  bool protect_metrics = false;  // /metrics and /health need the key too
  std::string served_model_name;
  size_t max_body_bytes = 8u << 20;
  double shutdown_grace_seconds = 30;
  size_t max_stream_buffer_bytes = 1u << 20;  // unsent SSE bytes before a slow client is dropped
  // From a connection's first byte of a request (or its accept) to the end of the header, and
  // again for the body: a client trickling bytes (slowloris) is cut off after this.
  double header_timeout_seconds = 30;
  double idle_timeout_seconds = 120;   // keep-alive connection waiting for its next request
  size_t max_connections = 0;          // open connections at most (0 = open-file limit - reserve)
  double write_timeout_seconds = 60;   // one write to a client that does not read
  double request_timeout_seconds = 0;  // received -> answered, at most (0 = no limit)
  int32_t request_threads = 2;         // parse/template/tokenize off the I/O thread
  Pooling embedding_pooling = Pooling::kMean;  // /v1/embeddings
  bool web_ui = true;  // GET / serves the chat page (--no-webui: a 404 like any unknown path)
  // Test hook (--test-scripted-output): a request's "vela_test_script" scripts the model's
  // output; without the flag that field is refused.
  bool test_scripted_output = false;
  RequestLimits limits;
};

// What requests need once the model is loaded.
struct LoadedModel {
  std::shared_ptr<AsyncEngine> engine;
  std::optional<ChatFormatter> chat;  // none: chat requests get a 400 saying why
  std::string chat_unavailable;       // the reason, when `chat` is empty
  int32_t max_model_len = 0;          // tokens one request can hold (context or KV budget)
  ReasoningFormat reasoning = ReasoningFormat::kNone;  // --reasoning-parser, resolved
  std::vector<int32_t> reasoning_end_tokens;           // the end marker, for the budget
  std::optional<ToolCallFormat> tool_format;           // none: requests with tools get a 400
  std::string tools_unavailable;                       // why, when tool_format is none
  int32_t block_size = 16;
};

struct ServerContext {
  ServerContext(boost::asio::io_context& io_context, const ServerOptions& server_options,
                ServerMetrics& server_metrics)
      : io(io_context), options(server_options), metrics(server_metrics) {}

  boost::asio::io_context& io;
  const ServerOptions& options;
  ServerMetrics& metrics;
  ApiKeys keys;
  std::shared_ptr<const LoadedModel> model;  // null while loading
  bool draining = false;                     // SIGTERM/SIGINT seen: refuse new work
  int64_t created = 0;                       // server start, Unix seconds (for /v1/models)
  int64_t in_flight = 0;                     // generation exchanges not yet fully answered
  std::function<void()> on_exchange_done;    // after in_flight drops (drain watcher)
  ConnectionTable connections{SIZE_MAX};     // open connections (closed on stop), the cap
  RequestWorkers* workers = nullptr;         // null: requests are prepared on this thread
  AccessLogWriter* access_log = nullptr;     // null: lines are written synchronously
  uint64_t id_counter = 0;
  uint64_t connection_serial = 0;  // connections accepted so far
  uint64_t id_salt = 0;            // random per process so ids differ between runs

  // "cmpl-…" style ids: unique within the process, unpredictable across runs.
  std::string make_id(const char* prefix);
};

}  // namespace vela::server

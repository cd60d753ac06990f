#pragma once
// The `vela serve` HTTP server: one io_context on the calling thread accepts connections and
// drives every session; the model loads on another thread and is handed over when ready
// (/health answers 503 until then). SIGTERM/SIGINT start a graceful shutdown: stop accepting,
// refuse new requests (503), let in-flight ones finish for up to the grace period (the engine
// cancels what is left), flush their responses, and return from run(). A second signal exits
// at once.
// Thread-safety: model_ready()/model_failed()/stopping() may be called from any thread; run()
// from one thread; everything else happens on the io_context thread.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "server/server_context.h"
#include "util/result.h"

namespace vela::server {

class HttpServer {
 public:
  // metrics_max_model_len bounds the token-count histogram buckets.
  HttpServer(ServerOptions options, int32_t metrics_max_model_len);
  ~HttpServer();

  // Binds and listens (options.port 0 picks a free port). Also installs the signal handlers.
  Status listen();
  uint16_t port() const { return port_; }

  // From the loading thread: the model is ready (requests are accepted from now on), or
  // loading failed (run() returns 1).
  void model_ready(std::shared_ptr<LoadedModel> model);
  void model_failed(std::string message);
  // True once a shutdown has begun (a loader can give up early).
  bool stopping() const { return stopping_.load(); }

  // Serves until shutdown completes; returns the process exit code.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stopping_{false};
  uint16_t port_ = 0;
};

}  // namespace vela::server

#include "server/http_server.h"

#include <csignal>
#include <cstdio>
#include <ctime>
#include <random>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/access_log.h"
#include "server/http_session.h"
#include "server/request_workers.h"
#include "util/trace.h"

namespace vela::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Access-log records waiting for the writer thread before new ones are dropped (~2 MB).
constexpr size_t kAccessLogPending = 8192;

struct HttpServer::Impl {
  // Declared before the io_context so they outlive it: handlers still queued when it is
  // destroyed (sessions, generation handlers) refer to them.
  ServerOptions options;
  ServerMetrics metrics;
  std::unique_ptr<ServerContext> ctx_storage;
  asio::io_context io{1};  // one thread runs it: no locking between sessions
  ServerContext& ctx;
  tcp::acceptor acceptor{io};
  asio::signal_set signals{io};
  asio::steady_timer retry_timer{io};     // accept errors (e.g. out of descriptors)
  asio::steady_timer deadline_timer{io};  // hard stop after the grace period
  std::thread engine_stopper;             // runs AsyncEngine::shutdown(grace) off the io thread
  bool shutting_down = false;
  bool engine_stopped = false;
  int exit_code = 0;
  uint64_t open_file_limit = 0;
  HttpServer* owner = nullptr;
  // Last, so they stop first: their jobs and lines refer to the context and the io_context.
  std::unique_ptr<RequestWorkers> workers;
  std::unique_ptr<AccessLogWriter> access_log;

  Impl(ServerOptions o, int32_t max_model_len)
      : options(std::move(o)),
        metrics(options.served_model_name, max_model_len),
        ctx_storage(std::make_unique<ServerContext>(io, options, metrics)),
        ctx(*ctx_storage) {
    ctx.keys = ApiKeys(options.api_keys);
    ctx.created = int64_t(std::time(nullptr));
    ctx.id_salt = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    workers = std::make_unique<RequestWorkers>(options.request_threads);
    ctx.workers = workers.get();
    access_log = std::make_unique<AccessLogWriter>(
        stderr, kAccessLogPending, [this] { metrics.count_event(ServerEvent::kAccessLogDropped); });
    ctx.access_log = access_log.get();
  }

  ~Impl() {
    // Sessions destroyed with the io_context report their end; nobody listens any more.
    ctx.on_exchange_done = nullptr;
    ctx.workers = nullptr;
    ctx.access_log = nullptr;
  }

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;  // closed for shutdown
      if (ec) {
        // EMFILE despite the cap (descriptors used elsewhere): back off instead of spinning;
        // established sessions keep working.
        std::fprintf(stderr,
                     "vela serve: accept failed: %s (%zu connections open, open-file limit %llu)\n",
                     ec.message().c_str(), ctx.connections.open(),
                     static_cast<unsigned long long>(open_file_limit));
        retry_timer.expires_after(std::chrono::milliseconds(100));
        retry_timer.async_wait([this](boost::system::error_code) { accept(); });
        return;
      }
      if (make_room()) {
        boost::system::error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);  // SSE tokens go out at once
        std::make_shared<HttpSession>(std::move(socket), ctx)->start();
      } else {
        boost::system::error_code close_ec;
        socket.close(close_ec);
      }
      accept();
    });
  }

  // Below the cap, or the longest-idle connection closed to get there: the new connection may
  // open. False when every open connection is busy with a request (the new one is refused).
  bool make_room() {
    const auto now = std::chrono::steady_clock::now();
    while (ctx.connections.full()) {
      HttpSession* idle = ctx.connections.oldest_idle();
      if (!idle) {
        metrics.count_event(ServerEvent::kConnectionRefused);
        if (auto line = ctx.connections.note_refused(now))
          std::fprintf(stderr, "%s\n", line->c_str());
        return false;
      }
      idle->shed();
      ctx.connections.remove(idle);  // whatever state it was in, it no longer counts
      metrics.count_event(ServerEvent::kConnectionShed);
      if (auto line = ctx.connections.note_shed(now)) std::fprintf(stderr, "%s\n", line->c_str());
    }
    return true;
  }

  void wait_signal() {
    signals.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (shutting_down) {
        std::fprintf(stderr, "vela serve: second signal (%d): exiting now\n", sig);
        std::fflush(stderr);
        std::_Exit(1);
      }
      begin_shutdown(sig);
      wait_signal();
    });
  }

  void begin_shutdown(int sig) {
    shutting_down = true;
    owner->stopping_.store(true);
    ctx.draining = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    const double grace = options.shutdown_grace_seconds;
    std::fprintf(stderr,
                 "vela serve: signal %d: shutting down (%lld requests in flight, grace %.1f s)\n",
                 sig, static_cast<long long>(ctx.in_flight), grace);
    ctx.on_exchange_done = [this] { maybe_stop(); };
    if (ctx.model) {
      // AsyncEngine::shutdown blocks until the engine thread ends; run it elsewhere so this
      // thread keeps streaming the last tokens to clients.
      auto engine = ctx.model->engine;
      engine_stopper = std::thread([this, engine, grace] {
        engine->shutdown(grace);
        asio::post(io, [this] {
          engine_stopped = true;
          maybe_stop();
        });
      });
    } else {
      engine_stopped = true;
    }
    // Whatever happens (a client that never reads its last bytes), stop a little after grace.
    deadline_timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(grace + 5.0)));
    deadline_timer.async_wait([this](boost::system::error_code e) {
      if (e) return;
      std::fprintf(stderr, "vela serve: shutdown deadline passed; closing remaining connections\n");
      io.stop();
    });
    maybe_stop();
  }

  void maybe_stop() {
    if (shutting_down && engine_stopped && ctx.in_flight == 0) io.stop();
  }
};

HttpServer::HttpServer(ServerOptions options, int32_t metrics_max_model_len)
    : impl_(std::make_unique<Impl>(std::move(options), metrics_max_model_len)) {
  impl_->owner = this;
}

HttpServer::~HttpServer() {
  // The engine thread posts to the io_context: end it before the io_context goes away.
  if (impl_->engine_stopper.joinable()) impl_->engine_stopper.join();
  if (impl_->ctx.model) impl_->ctx.model->engine->shutdown(0);
}

Status HttpServer::listen() {
  Impl& s = *impl_;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(s.options.host, ec);
  if (ec) return make_error("--host '" + s.options.host + "' is not an IP address");
  const tcp::endpoint endpoint(address, s.options.port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                      ": " + ec.message());
  port_ = s.acceptor.local_endpoint().port();
  // One descriptor per connection: allow as many as the hard limit permits (the soft default
  // of 1024 would cap concurrent streams well below what one io_context can serve), and cap
  // connections below it so accept() never fails for want of a descriptor.
  s.open_file_limit = raise_open_file_limit();
  const size_t cap = effective_max_connections(s.options.max_connections, s.open_file_limit);
  s.ctx.connections.set_max_open(cap);
  std::fprintf(stderr,
               "vela serve: at most %zu connections (open-file limit %llu); header timeout %.1f s, "
               "idle timeout %.1f s\n",
               cap, static_cast<unsigned long long>(s.open_file_limit),
               s.options.header_timeout_seconds, s.options.idle_timeout_seconds);
  if (s.options.max_connections > cap)
    std::fprintf(stderr,
                 "vela serve: --max-connections %zu lowered to %zu by the open-file limit\n",
                 s.options.max_connections, cap);
  s.signals.add(SIGINT);
  s.signals.add(SIGTERM);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client must not kill the process
  s.wait_signal();
  s.accept();
  return {};
}

void HttpServer::model_ready(std::shared_ptr<LoadedModel> model) {
  asio::post(impl_->io, [this, model = std::move(model)]() mutable {
    Impl& s = *impl_;
    if (s.shutting_down) return;  // too late; the model is dropped with this handler
    s.ctx.model = std::move(model);
    std::fprintf(stderr, "vela serve: ready\n");
  });
}

void HttpServer::model_failed(std::string message) {
  asio::post(impl_->io, [this, message = std::move(message)] {
    std::fprintf(stderr, "vela serve: %s\n", message.c_str());
    impl_->exit_code = 1;
    impl_->io.stop();
  });
}

int HttpServer::run() {
  trace::name_this_thread("http_io");
  impl_->io.run();
  // Break the references that keep sessions with unfinished exchanges alive (only after the
  // hard deadline), so everything is released with the io_context.
  for (HttpSession* s : impl_->ctx.connections.all())
    if (impl_->ctx.connections.contains(s)) s->force_close();
  if (impl_->engine_stopper.joinable()) impl_->engine_stopper.join();
  if (impl_->ctx.model) impl_->ctx.model->engine->shutdown(0);
  if (impl_->exit_code == 0) std::fprintf(stderr, "vela serve: stopped\n");
  return impl_->exit_code;
}

}  // namespace vela::server

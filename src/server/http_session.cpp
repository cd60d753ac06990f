#include "server/http_session.h"

#include <cctype>
#include <cstdio>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "dist/tensor_group.h"
#include "server/api_dialects/anthropic_count_tokens.h"
#include "server/api_dialects/dialect_sink.h"
#include "server/openai_response.h"
#include "server/request_workers.h"
#include "server/tokenize_handler.h"
#include "util/trace.h"

namespace vela::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::json;

namespace {

constexpr size_t kHeaderLimit = 32 * 1024;
constexpr size_t kWatchBytes = 4096;
constexpr size_t kDiscardBytes = 16384;
constexpr size_t kMaxLingerBytes = 64u << 20;
// Trace tracks of HTTP requests: one per connection, reused modulo kHttpTracks.
constexpr uint32_t kHttpTrackBase = 1u << 20;
constexpr uint64_t kHttpTracks = 4096;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// A streamed response's header and the serializer writing it (kept alive together).
struct StreamHead {
  http::response<http::empty_body> res;
  http::response_serializer<http::empty_body> sr{res};
};

// "%2F"-style escapes decoded (a model id may hold '/').
std::string percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The chat page may load and reach only its own origin, whatever text a model writes into it.
constexpr const char* kWebUiSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

HttpSession::HttpSession(asio::ip::tcp::socket socket, ServerContext& ctx)
    : stream_(std::move(socket)), ctx_(ctx), serial_(++ctx.connection_serial) {
  error_code ec;
  const auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
}

HttpSession::~HttpSession() {
  ctx_.connections.remove(this);
  end_in_flight();
}

void HttpSession::start() {
  ctx_.connections.add(this);
  read_header();
}

void HttpSession::shed() {
  if (in_exchange_) return;  // only idle connections are shed
  close_gracefully();
}

void HttpSession::force_close() {
  if (handler_) handler_->client_gone();
  handler_.reset();
  dialect_sink_.reset();
  if (embeddings_) embeddings_->client_gone();
  embeddings_.reset();
  close_gracefully();
  auto keep = std::move(self_);  // may be the last reference: release at scope end
}

void HttpSession::read_header() {
  if (closed_) return;
  ctx_.connections.mark_idle(this);
  // A kept-alive connection may wait idle_timeout for its next request; once a request's
  // first byte is here (or on a new connection, from the accept), the whole header must
  // arrive within header_timeout however slowly the bytes trickle in.
  if (served_one_ && buffer_.size() == 0) {
    stream_.expires_after(seconds(ctx_.options.idle_timeout_seconds));
    stream_.async_read_some(buffer_.prepare(kWatchBytes),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              if (ec) return self->close_gracefully();
                              self->buffer_.commit(n);
                              self->read_header_bytes();
                            });
    return;
  }
  read_header_bytes();
}

void HttpSession::read_header_bytes() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(ctx_.options.max_body_bytes);
  stream_.expires_after(seconds(ctx_.options.header_timeout_seconds));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void HttpSession::on_header(error_code ec) {
  // The connection ended or failed before a whole header: nobody to answer. Only HTTP syntax
  // errors (and the size limits) get a response.
  const bool http_error =
      ec && ec.category() == http::make_error_code(http::error::bad_method).category();
  if ((ec && !http_error) || ec == http::error::end_of_stream ||
      ec == http::error::partial_message) {
    close_gracefully();
    return;
  }
  in_exchange_ = true;
  served_one_ = true;
  ctx_.connections.mark_busy(this);
  received_ = Clock::now();
  log_ = AccessRecord{};
  log_.remote = remote_;
  const auto& req = parser_->get();
  log_.method = std::string(req.method_string());
  log_.path = std::string(req.target().substr(0, req.target().find('?')));
  version_ = req.version() == 10 ? 10 : 11;
  keep_alive_ = !ec && req.keep_alive();
  if (ec == http::error::body_limit) {
    ctx_.metrics.count_rejection(Rejection::kTooLarge);
    ApiError e{413,
               "the request body is larger than the server's limit of " +
                   std::to_string(ctx_.options.max_body_bytes) + " bytes",
               "invalid_request_error", "", "request_too_large"};
    return send_error(e, /*close_after=*/true);
  }
  if (ec == http::error::header_limit) {
    ApiError e{431, "the request header is too large", "invalid_request_error", "", ""};
    return send_error(e, true);
  }
  if (ec) {
    ApiError e{400, "malformed HTTP request: " + ec.message(), "invalid_request_error", "", ""};
    return send_error(e, true);
  }
  stream_.expires_after(seconds(ctx_.options.header_timeout_seconds));
  auto read_body = [self = shared_from_this()] {
    if (self->parser_->is_done()) return self->on_body({});
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](error_code ec, size_t) { self->on_body(ec); });
  };
  // curl and others wait for "100 Continue" before sending a large body.
  if (iequals(req[http::field::expect], "100-continue") && !parser_->is_done()) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue),
                      [self = shared_from_this(), read_body](error_code ec, size_t) {
                        if (ec) return self->abandon();
                        read_body();
                      });
    return;
  }
  read_body();
}

void HttpSession::on_body(error_code ec) {
  if (ec == http::error::body_limit) {
    ctx_.metrics.count_rejection(Rejection::kTooLarge);
    ApiError e{413,
               "the request body is larger than the server's limit of " +
                   std::to_string(ctx_.options.max_body_bytes) + " bytes",
               "invalid_request_error", "", "request_too_large"};
    return send_error(e, true);
  }
  if (ec) {
    log_.status = 400;
    log_.note = "incomplete request: " + ec.message();
    return abandon();
  }
  handle_request();
}

void HttpSession::handle_request() {
  auto& req = parser_->get();
  const std::string_view path = log_.path;
  const http::verb method = req.method();
  const bool is_api = path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
  const bool is_ops = path == "/health" || path == "/metrics";
  if (ctx_.keys.enabled() && (is_api || (is_ops && ctx_.options.protect_metrics))) {
    const std::string_view auth = req[http::field::authorization];
    // Anthropic's clients send the key as x-api-key.
    const bool anthropic = path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0;
    const std::string_view x_api_key = anthropic ? req["x-api-key"] : std::string_view();
    if (!ctx_.keys.check(auth) && !(!x_api_key.empty() && ctx_.keys.check_key(x_api_key))) {
      ctx_.metrics.count_rejection(Rejection::kUnauthorized);
      ApiError e{401,
                 auth.empty() && x_api_key.empty()
                     ? std::string("You didn't provide an API key: send 'Authorization: Bearer "
                                   "KEY'") +
                           (anthropic ? " or 'x-api-key: KEY'" : "")
                     : "Incorrect API key provided",
                 "invalid_request_error", "", "invalid_api_key"};
      return send_error(e);
    }
  }
  auto only = [&](http::verb allowed) {
    if (method == allowed) return true;
    ApiError e{405, "use " + std::string(http::to_string(allowed)) + " for " + std::string(path),
               "invalid_request_error", "", "method_not_allowed"};
    send_error(e);
    return false;
  };
  const std::shared_ptr<const LoadedModel>& model = ctx_.model;
  if (const auto asset = ctx_.options.web_ui ? find_web_asset(path) : std::nullopt) {
    if (method != http::verb::head && !only(http::verb::get)) return;
    return send_web_asset(*asset, method == http::verb::head);
  }
  if (path == "/health") {
    if (!only(http::verb::get)) return;
    if (ctx_.draining) return send(503, "application/json", R"({"status":"shutting_down"})");
    if (dist::group_failed())
      return send(503, "application/json", R"({"status":"tensor_parallel_group_failed"})");
    if (!model) return send(503, "application/json", R"({"status":"loading"})");
    return send(200, "application/json", R"({"status":"ok"})");
  }
  if (path == "/metrics") {
    if (!only(http::verb::get)) return;
    std::optional<EngineStats> stats;
    if (model) stats = model->engine->stats();
    ctx_.metrics.set_open_connections(int64_t(ctx_.connections.open()));
    return send(200, "text/plain; version=0.0.4; charset=utf-8",
                ctx_.metrics.render(stats ? &*stats : nullptr, model ? model->block_size : 16));
  }
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
    if (!only(http::verb::get)) return;
    if (!model)
      return send_error(ApiError{503, "the model is still loading", "service_unavailable", "", ""});
    const json list =
        models_list(ctx_.options.served_model_name, ctx_.created, model->max_model_len);
    if (path == "/v1/models") return send(200, "application/json", dump_json(list));
    const std::string id = percent_decoded(path.substr(std::string_view("/v1/models/").size()));
    if (id != ctx_.options.served_model_name)
      return send_error(ApiError{404,
                                 "The model '" + id + "' does not exist; this server serves '" +
                                     ctx_.options.served_model_name + "'",
                                 "invalid_request_error", "model", "model_not_found"});
    return send(200, "application/json", dump_json(list["data"][0]));
  }
  if (path == "/v1/embeddings") {
    if (!only(http::verb::post)) return;
    counted_in_flight_ = true;
    ++ctx_.in_flight;
    self_ = shared_from_this();
    embeddings_ = std::make_shared<EmbeddingsHandler>(
        ctx_,
        std::weak_ptr<ResponseSink>(std::static_pointer_cast<ResponseSink>(shared_from_this())));
    embeddings_->start(std::move(req.body()));
    if (in_exchange_ && embeddings_ && !sending_whole_) start_watch();
    return;
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!only(http::verb::post)) return;
    if (!model)
      return send_error(ApiError{503, "the model is still loading", "service_unavailable", "", ""});
    const size_t bytes = req.body().size();
    auto work = [model, tokenize = path == "/tokenize", body = std::move(req.body()),
                 name = ctx_.options.served_model_name] {
      return tokenize ? tokenize_reply(body, *model, name) : detokenize_reply(body, *model, name);
    };
    return reply_from_workers(bytes, std::move(work));
  }
  if (path == "/v1/messages/count_tokens") {
    if (!only(http::verb::post)) return;
    if (!model)
      return send_error(ApiError{503, "the model is still loading", "service_unavailable", "", ""});
    const size_t bytes = req.body().size();
    auto work = [model, body = std::move(req.body()), name = ctx_.options.served_model_name] {
      return anthropic_count_tokens_reply(body, *model, name);
    };
    return reply_from_workers(bytes, std::move(work));
  }
  std::shared_ptr<ApiDialect> dialect = dialect_for_path(path);
  if (path == "/v1/completions" || path == "/v1/chat/completions" || dialect) {
    if (!only(http::verb::post)) return;
    counted_in_flight_ = true;
    ++ctx_.in_flight;
    self_ = shared_from_this();
    std::weak_ptr<ResponseSink> sink = std::static_pointer_cast<ResponseSink>(shared_from_this());
    if (dialect) {  // the handler writes chat completions; dialect_sink_ translates them
      dialect_sink_ = std::make_shared<DialectSink>(std::move(sink), dialect);
      sink = dialect_sink_;
    }
    handler_ = std::make_shared<GenerationHandler>(ctx_, std::move(sink), received_);
    handler_->start(path == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions,
                    std::move(req.body()), std::move(dialect));
    // Until the answer is complete, watch the socket for a disconnect.
    if (in_exchange_ && handler_ && !sending_whole_) start_watch();
    return;
  }
  send_error(ApiError{404, "no such endpoint: " + std::string(path), "invalid_request_error", "",
                      "not_found"});
}

void HttpSession::reply_from_workers(size_t input_bytes, std::function<JsonReply()> work) {
  if (!ctx_.workers) {
    const JsonReply r = work();
    return send(r.status, "application/json", r.body);
  }
  // The session's last reference must drop on the IO thread (its destructor updates the
  // connection table), so the worker hands its reference over instead of copying it.
  ctx_.workers->post(input_bytes, [self = shared_from_this(), work = std::move(work)]() mutable {
    JsonReply r = work();
    auto executor = self->stream_.get_executor();
    asio::post(executor, [self = std::move(self), r = std::move(r)]() mutable {
      self->send(r.status, "application/json", std::move(r.body));
    });
  });
}

void HttpSession::send_error(const ApiError& error, bool close_after) {
  send(error.status, "application/json", error_body_for_path(log_.path, error), 0, close_after);
}

void HttpSession::send_json(int status, std::string body, int retry_after_seconds) {
  send(status, "application/json", std::move(body), retry_after_seconds);
}

void HttpSession::send(int status, std::string content_type, std::string body,
                       int retry_after_seconds, bool close_after) {
  auto res = std::make_shared<http::response<http::string_body>>(
      http::int_to_status(unsigned(status)), version_);
  res->set(http::field::content_type, content_type);
  if (retry_after_seconds > 0)
    res->set(http::field::retry_after, std::to_string(retry_after_seconds));
  if (status == 401) res->set(http::field::www_authenticate, "Bearer");
  res->body() = std::move(body);
  res->prepare_payload();
  send_response(std::move(res), close_after);
}

void HttpSession::send_web_asset(const WebAsset& asset, bool head_only) {
  auto res = std::make_shared<StringResponse>(http::status::ok, version_);
  res->set(http::field::content_type, asset.content_type);
  res->set(http::field::cache_control, "no-cache");
  res->set("Content-Security-Policy", kWebUiSecurityPolicy);
  res->set("X-Content-Type-Options", "nosniff");
  res->set("Referrer-Policy", "no-referrer");
  if (head_only) {
    res->content_length(asset.body.size());  // the length a GET would have, and no body
  } else {
    res->body() = std::string(asset.body);
    res->prepare_payload();
  }
  send_response(std::move(res), false);
}

void HttpSession::send_response(std::shared_ptr<StringResponse> res, bool close_after) {
  if (closed_ || !in_exchange_) return;
  res->set(http::field::server, "vela");
  const bool close = close_after || !keep_alive_ || ctx_.draining;
  res->keep_alive(!close);
  log_.status = int(res->result_int());
  response_ = res;
  sending_whole_ = true;
  stream_.expires_after(seconds(ctx_.options.write_timeout_seconds));
  http::async_write(
      stream_, *res,
      [self = shared_from_this(), close, linger = close_after](error_code ec, size_t) {
        self->response_.reset();
        self->sending_whole_ = false;
        if (ec) return self->abandon();
        self->finish_exchange();
        if (linger)
          self->linger_close();
        else if (close)
          self->close_gracefully();
        else if (!self->watching_)
          self->read_header();
        else  // the watch read resumes reading once cancelled
          self->stream_.socket().cancel();
      });
}

void HttpSession::begin_stream() {
  if (closed_ || !in_exchange_) return;
  streaming_ = true;
  log_.status = 200;
  auto head = std::make_shared<StreamHead>();
  head->res.result(http::status::ok);
  head->res.version(version_);
  head->res.set(http::field::server, "vela");
  head->res.set(http::field::content_type, "text/event-stream");
  head->res.set(http::field::cache_control, "no-cache");
  head->res.set("X-Accel-Buffering", "no");  // proxies: do not buffer the stream
  // HTTP/1.0 has no chunked encoding: the stream then ends when the connection closes.
  chunked_ = version_ != 10;
  if (!chunked_) keep_alive_ = false;
  head->res.keep_alive(keep_alive_ && !ctx_.draining);
  head->res.chunked(chunked_);
  response_ = head;
  writing_ = true;
  stream_.expires_after(seconds(ctx_.options.write_timeout_seconds));
  http::async_write_header(stream_, head->sr, [self = shared_from_this()](error_code ec, size_t) {
    self->response_.reset();
    self->header_sent_ = true;
    self->on_stream_written(ec);
  });
}

bool HttpSession::stream_write(std::string_view data) {
  if (closed_ || !streaming_ || !in_exchange_) return false;
  if (data.empty()) return true;  // an empty chunk would end the chunked body
  if (outbox_.size() + data.size() > ctx_.options.max_stream_buffer_bytes) {
    // The client reads slower than we generate: drop it rather than buffer without bound.
    log_.note = "slow_client_dropped";
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->abandon(); });
    return false;
  }
  if (!chunked_) {
    outbox_.append(data);
  } else {
    char size_line[24];
    const int n = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
    outbox_.append(size_line, size_t(n));
    outbox_.append(data);
    outbox_.append("\r\n");
  }
  flush_stream();
  return true;
}

void HttpSession::end_stream() {
  if (closed_ || !streaming_) return;
  if (chunked_) outbox_.append("0\r\n\r\n");
  stream_ending_ = true;
  flush_stream();
}

void HttpSession::flush_stream() {
  if (writing_ || !header_sent_ || closed_ || outbox_.empty()) return;
  inflight_.swap(outbox_);
  outbox_.clear();
  writing_ = true;
  stream_.expires_after(seconds(ctx_.options.write_timeout_seconds));
  asio::async_write(
      stream_, asio::buffer(inflight_),
      [self = shared_from_this()](error_code ec, size_t) { self->on_stream_written(ec); });
}

void HttpSession::on_stream_written(error_code ec) {
  writing_ = false;
  if (ec) return abandon();
  inflight_.clear();
  if (!outbox_.empty()) return flush_stream();
  if (!stream_ending_) return;
  const bool close = !keep_alive_ || ctx_.draining;
  finish_exchange();
  if (close)
    close_gracefully();
  else if (!watching_)
    read_header();
  else
    stream_.socket().cancel();  // on_watch resumes reading
}

void HttpSession::start_watch() {
  if (watching_ || closed_) return;
  watching_ = true;
  // No deadline while the engine works: a long generation is not an idle client.
  stream_.expires_never();
  stream_.async_read_some(
      buffer_.prepare(kWatchBytes),
      [self = shared_from_this()](error_code ec, size_t n) { self->on_watch(ec, n); });
}

void HttpSession::on_watch(error_code ec, size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);
  if (!in_exchange_) {
    // The exchange ended and cancelled this read (or it brought the next request's first bytes).
    if (closed_) return;
    if (!ec || ec == asio::error::operation_aborted)
      read_header();
    else
      close_gracefully();
    return;
  }
  if (ec) {
    if (log_.note.empty()) log_.note = "client_disconnected";
    return abandon();
  }
  // Bytes of a pipelined request: leave them in buffer_ for read_header(); stop watching.
}

void HttpSession::abandon() {
  if (!in_exchange_) {
    close_gracefully();
    return;
  }
  if (handler_) handler_->client_gone();
  if (embeddings_) embeddings_->client_gone();
  if (log_.note.empty()) log_.note = "client_disconnected";
  if (log_.status == 0) log_.status = 499;  // nginx's "client closed request"
  finish_exchange();
  close_gracefully();
}

void HttpSession::finish_exchange() {
  if (!in_exchange_) return;
  in_exchange_ = false;
  if (handler_) {
    const HandlerSummary& s = handler_->summary();
    log_.id = s.id;
    log_.stream = s.stream;
    if (s.completed) {
      log_.prompt_tokens = s.prompt_tokens;
      log_.completion_tokens = s.completion_tokens;
    }
    log_.ttft_ms = s.ttft_ms;
    log_.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - received_).count();
  }
  if (embeddings_) log_.prompt_tokens = embeddings_->prompt_tokens();
  if (trace::Recorder* recorder = trace::Recorder::active()) {
    // Requests of one I/O thread overlap: each connection gets a track of its own.
    const uint32_t track = kHttpTrackBase + uint32_t(serial_ % kHttpTracks);
    recorder->name_thread(track, "http connection " + std::to_string(serial_ % kHttpTracks));
    trace::record("http_request", "http", received_, Clock::now(), log_.method + " " + log_.path,
                  {trace::Arg{"status", log_.status}}, track);
  }
  if (ctx_.access_log)
    ctx_.access_log->write(std::move(log_));
  else
    write_access_log(log_);
  handler_.reset();
  dialect_sink_.reset();
  embeddings_.reset();
  streaming_ = header_sent_ = stream_ending_ = false;
  outbox_.clear();
  end_in_flight();
  // Pending completion handlers hold their own references; this one only bridged idle gaps.
  auto keep = std::move(self_);
}

void HttpSession::end_in_flight() {
  if (!counted_in_flight_) return;
  counted_in_flight_ = false;
  --ctx_.in_flight;
  if (ctx_.on_exchange_done) ctx_.on_exchange_done();
}

void HttpSession::close_gracefully() {
  if (closed_) return;
  closed_ = true;
  ctx_.connections.remove(this);
  error_code ec;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  stream_.close();
}

void HttpSession::linger_close() {
  // The client may still be sending a body we refused: read and drop it for a moment so the
  // kernel does not answer it with a reset that would destroy our error response in flight.
  if (closed_) return;
  closed_ = true;
  error_code ec;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(2));
  discard_ = std::make_unique<char[]>(kDiscardBytes);
  linger_read();
}

void HttpSession::linger_read() {
  stream_.async_read_some(asio::buffer(discard_.get(), kDiscardBytes),
                          [self = shared_from_this()](error_code ec, size_t n) {
                            self->lingered_ += n;
                            if (ec || self->lingered_ > kMaxLingerBytes) {
                              self->ctx_.connections.remove(self.get());
                              self->stream_.close();
                              return;
                            }
                            self->linger_read();
                          });
}

}  // namespace vela::server

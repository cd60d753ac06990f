#pragma once
// One client connection: reads HTTP/1.1 requests (keep-alive, 100-continue, body limit), routes
// them, and writes whole responses or chunked server-sent-event streams. A new connection must
// deliver its first request's header within --header-timeout-seconds; a kept-alive one may wait
// --idle-timeout-seconds for the next request's first byte, and then has the header timeout
// again. Waiting for a request, the connection is idle in the server's ConnectionTable (the cap
// may shed it); while a request is answered it is busy. While a generation
// runs, one outstanding read watches the socket so a client that disconnects is noticed at
// once (its engine requests are aborted), and streamed output waits in a bounded buffer: a
// client that falls further behind than --max-stream-buffer bytes is dropped.
// Thread-safety: lives entirely on the io_context thread (one thread runs the io_context).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/access_log.h"
#include "server/embeddings_handler.h"
#include "server/generation_handler.h"
#include "server/server_context.h"
#include "server/tokenize_handler.h"
#include "server/webui/webui_assets.h"

namespace vela::server {

class HttpSession : public ResponseSink, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~HttpSession() override;

  void start();
  // Server stop: cancel any generation, close the socket, drop self references.
  void force_close();
  // The connection cap needs room: close this connection if it is idle (no request running).
  void shed();

  // ResponseSink (called by the generation handler).
  void send_json(int status, std::string body, int retry_after_seconds = 0) override;
  void begin_stream() override;
  bool stream_write(std::string_view data) override;
  void end_stream() override;

 private:
  using error_code = boost::system::error_code;
  using StringResponse = boost::beast::http::response<boost::beast::http::string_body>;

  void read_header();        // waits (idle timeout) for a request, then reads its header
  void read_header_bytes();  // the header, within the header timeout
  void on_header(error_code ec);
  void on_body(error_code ec);
  void handle_request();
  void send(int status, std::string content_type, std::string body, int retry_after_seconds = 0,
            bool close_after = false);
  void send_error(const ApiError& error, bool close_after = false);
  // A file of the chat page, with headers that keep it on this origin.
  void send_web_asset(const WebAsset& asset, bool head_only);
  // Writes a whole response (its Server and Connection headers set here).
  void send_response(std::shared_ptr<StringResponse> res, bool close_after);
  // Runs `work` on the request workers and sends its reply from the io_context thread.
  void reply_from_workers(size_t input_bytes, std::function<JsonReply()> work);
  void on_response_written(error_code ec, bool close);
  void finish_exchange();
  void start_watch();
  void on_watch(error_code ec, size_t n);
  void flush_stream();
  void on_stream_written(error_code ec);
  void abandon();  // the client is gone: cancel generation, close
  void close_gracefully();
  void linger_close();  // after an error response with unread body bytes
  void linger_read();
  void end_in_flight();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  ServerContext& ctx_;
  std::string remote_;
  uint64_t serial_;  // this connection's number (trace track)

  // The current exchange.
  bool in_exchange_ = false;
  bool served_one_ = false;  // a request was read on this connection (keep-alive follows)
  bool keep_alive_ = true;
  bool counted_in_flight_ = false;
  Clock::time_point received_{};
  AccessRecord log_;
  std::shared_ptr<GenerationHandler> handler_;
  std::shared_ptr<ResponseSink> dialect_sink_;  // between handler_ and this, for another API
  std::shared_ptr<EmbeddingsHandler> embeddings_;
  // Keeps this session alive while a generation runs and no I/O is pending (e.g. between the
  // stream header and the first token); released when the exchange ends.
  std::shared_ptr<HttpSession> self_;
  std::shared_ptr<void> response_;  // the response (or stream header) being written
  bool sending_whole_ = false;      // a whole response is being written

  unsigned version_ = 11;  // HTTP/1.x of the request, echoed in the response

  bool watching_ = false;
  bool closed_ = false;
  std::unique_ptr<char[]> discard_;  // linger_close() read buffer
  size_t lingered_ = 0;

  // Streaming: header, then chunks from outbox_ (filling) / inflight_ (being written).
  bool streaming_ = false;
  bool chunked_ = true;
  bool header_sent_ = false;
  bool writing_ = false;
  bool stream_ending_ = false;
  std::string outbox_;
  std::string inflight_;
};

}  // namespace vela::server

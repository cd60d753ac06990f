// A streaming client that stops reading is dropped once its unsent output passes the bounded
// buffer (--max-stream-buffer-bytes), and its request is aborted so its KV blocks return.
// In-process: a real engine and HttpSession on a loopback socket whose kernel buffers are
// pinned small, so the bound is reached after a few kilobytes instead of megabytes.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "server/http_session.h"
#include "support/shared_data.h"

namespace vela::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::shared_ptr<LoadedModel> load_engine() {
  auto model = Model::load(test::shared_path("models/aidreams260K.gguf").string());
  EXPECT_TRUE(model.ok());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  EXPECT_TRUE(tok.ok());
  EngineConfig c;
  c.max_context = 1024;
  c.scheduler.max_num_seqs = 4;
  auto loaded = std::make_shared<LoadedModel>();
  loaded->engine = std::make_shared<AsyncEngine>(
      std::make_unique<Engine>(std::move(*model), std::move(*tok), c), AsyncEngineConfig{});
  loaded->max_model_len = 1024;
  return loaded;
}

TEST(SlowClient, IsDroppedAfterTheBoundedBuffer) {
  VELA_REQUIRE_SHARED();
  std::shared_ptr<LoadedModel> loaded = load_engine();
  ServerOptions options;
  options.served_model_name = "m";
  options.max_stream_buffer_bytes = 16 * 1024;
  ServerMetrics metrics("m", 1024);
  // The io_context goes first at the end: handlers it still holds refer to ctx.
  auto io_owner = std::make_unique<asio::io_context>();
  asio::io_context& io = *io_owner;
  ServerContext ctx(io, options, metrics);
  ctx.model = loaded;
  {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket client(io);
    client.open(tcp::v4());
    client.set_option(asio::socket_base::receive_buffer_size(2048));
    client.connect(acceptor.local_endpoint());
    tcp::socket accepted = acceptor.accept();
    accepted.set_option(asio::socket_base::send_buffer_size(4096));  // no autotuning
    std::make_shared<HttpSession>(std::move(accepted), ctx)->start();

    // logprobs make each event ~0.5 KB: the 16 KiB bound is passed long before max_tokens.
    const std::string body = nlohmann::json{
        {"prompt", "Once upon a time"},
        {"max_tokens", 1000},
        {"ignore_eos", true},
        {"logprobs", 5},
        {"stream", true}}.dump();
    const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    asio::write(client, asio::buffer(request));  // then never read

    const auto start = std::chrono::steady_clock::now();
    EngineStats stats;
    for (;;) {
      io.run_for(std::chrono::milliseconds(10));
      stats = loaded->engine->stats();
      if (stats.counters.finished_abort + stats.counters.finished_length > 0) break;
      ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120));
    }
    EXPECT_EQ(stats.counters.finished_abort, 1u) << "the slow client was not dropped";
    EXPECT_LT(stats.counters.generation_tokens, 1000u);
    EXPECT_EQ(stats.running, 0u);
    EXPECT_EQ(stats.kv.used, 0);
    EXPECT_EQ(ctx.in_flight, 0);
    client.close();
    io.run_for(std::chrono::milliseconds(50));
  }
  // The engine thread posts to this io_context: stop it before the io_context goes.
  loaded->engine->shutdown(0);
  io_owner.reset();
}

}  // namespace
}  // namespace vela::server

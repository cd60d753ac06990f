// The I/O thread stays free: a 100k-token prompt is tokenized on a request worker while 50 small
// streaming requests get their first token; and a request past --request-timeout is cut off
// (504, or a stream ended with finish_reason "abort") with its KV blocks returned.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "raw_socket.h"
#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

std::string http_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// One connection's response as it arrives.
struct Exchange {
  int fd = -1;
  std::string received;
  std::optional<double> first_token_s;  // since the start, for streams: the first "text"
  std::optional<double> done_s;         // the connection closed
};

TEST(ServingHygiene, LongPromptTokenizesOffTheIoThread) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path(), "--ctx-size", "2048", "--max-num-seqs", "64",
                                 "--max-body-bytes", "16M"});
  // Well over 100k tokens of varied text (the tokenizer's count is in the 400 it answers).
  std::string text;
  for (int i = 0; text.size() < 1200000; ++i)
    text += "Once upon a time, little Tim number " + std::to_string(i) + " saw a big red ball. ";
  const std::string big_body = json{{"prompt", text}, {"max_tokens", 1}}.dump();
  const std::string small_body = json{{"prompt", "Hi"}, {"max_tokens", 2}, {"stream", true}}.dump();

  const auto start = Clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<Exchange> ex(51);
  ex[0].fd = connect_loopback(s->port());
  ASSERT_GE(ex[0].fd, 0);
  ASSERT_TRUE(send_all(ex[0].fd, http_post("/v1/completions", big_body)));
  const double big_sent_s = since_start();
  for (size_t i = 1; i < ex.size(); ++i) {
    ex[i].fd = connect_loopback(s->port());
    ASSERT_GE(ex[i].fd, 0);
    ASSERT_TRUE(send_all(ex[i].fd, http_post("/v1/completions", small_body)));
  }
  while (since_start() < 120) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < ex.size(); ++i)
      if (!ex[i].done_s) {
        fds.push_back({ex[i].fd, POLLIN, 0});
        which.push_back(i);
      }
    if (fds.empty()) break;
    if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      Exchange& e = ex[which[k]];
      char buf[8192];
      const ssize_t n = ::recv(e.fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        e.done_s = since_start();
        continue;
      }
      e.received.append(buf, size_t(n));
      if (!e.first_token_s && e.received.find("\"text\":\"") != std::string::npos &&
          e.received.find("data: {") != std::string::npos)
        e.first_token_s = since_start();
    }
  }
  for (const Exchange& e : ex) ::close(e.fd);

  // The long prompt really was tokenized: its answer counts the tokens.
  ASSERT_TRUE(ex[0].done_s) << "the long request never finished";
  const size_t body_at = ex[0].received.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  const json big = json::parse(ex[0].received.substr(body_at + 4), nullptr, false);
  ASSERT_FALSE(big.is_discarded()) << ex[0].received.substr(0, 500);
  EXPECT_EQ(big["error"]["code"], "context_length_exceeded");
  const std::string message = big["error"]["message"];
  const size_t has = message.find("your prompt has ");
  ASSERT_NE(has, std::string::npos) << message;
  const long tokens = std::stol(message.substr(has + 16));
  EXPECT_GE(tokens, 100000) << message;
  const double tokenize_s = *ex[0].done_s - big_sent_s;

  std::vector<double> ttft;
  for (size_t i = 1; i < ex.size(); ++i) {
    ASSERT_TRUE(ex[i].first_token_s)
        << "small request " << i << " got no token: " << ex[i].received.substr(0, 300);
    ttft.push_back(*ex[i].first_token_s);
  }
  std::sort(ttft.begin(), ttft.end());
  const double slowest = ttft.back();
  // Bounded: every small request's first token within a few seconds (cores are shared)...
  EXPECT_LT(slowest, 15.0) << "tokenizing " << tokens << " tokens took " << tokenize_s << " s";
  // ...and before the long prompt was answered: they did not queue behind its tokenization
  // (on the I/O thread they would all have waited for it). Meaningful when tokenizing takes
  // well over a small request's first token (about 0.7 s for ~800k tokens here, against
  // ~30 ms).
  if (tokenize_s > 0.2) {
    int before = 0;
    for (double t : ttft) before += t < *ex[0].done_s;
    EXPECT_GE(before, 45) << "tokenizing " << tokens << " tokens took " << tokenize_s << " s";
  }
  std::printf(
      "long prompt: %ld tokens answered after %.2f s; small requests' first token: "
      "median %.3f s, slowest %.3f s\n",
      tokens, tokenize_s, ttft[ttft.size() / 2], slowest);
}

TEST(ServingHygiene, RequestTimeoutCutsOffLongRequests) {
  VELA_REQUIRE_SHARED();
  auto s =
      ServerProcess::start({"-m", model_path(), "--ctx-size", "4096", "--request-timeout", "0.3"});
  const std::string labels = "model_name=\"aidreams260K\"";
  const std::string long_body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}}.dump();
  const auto start = Clock::now();
  const HttpResult whole = s->post("/v1/completions", long_body);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(whole.status, 504) << whole.body;
  const json e = json::parse(whole.body, nullptr, false);
  ASSERT_FALSE(e.is_discarded());
  EXPECT_EQ(e["error"]["code"], "request_timeout");
  EXPECT_LT(took, 10.0);

  json stream_req = json::parse(long_body);
  stream_req["stream"] = true;
  const HttpResult streamed = s->post("/v1/completions", stream_req.dump(), "-N");
  EXPECT_EQ(streamed.status, 200);
  bool framing_ok = false;
  const auto events = sse_events(streamed.body, &framing_ok);
  EXPECT_TRUE(framing_ok);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_FALSE(last.is_discarded());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "abort");

  EXPECT_EQ(s->metric("vela:request_timeout_total", labels), 2);
  EXPECT_TRUE(s->wait_for_metric("vela:kv_cache_usage_perc", 0, 30));
  // Short requests are untouched.
  EXPECT_EQ(s->post("/v1/completions", R"({"prompt":"Hi","max_tokens":2})").status, 200);
}

}  // namespace
}  // namespace vela::test

// Connection hygiene of the real `vela serve`: clients that open connections and never finish
// a request (slowloris) cannot starve everyone else. The server, started with an open-file limit
// of 256 (soft and hard, so it cannot raise it), is held by 400 connections that each sent half
// a header; /health and a completion still answer well within the header timeout, because the
// connection cap sheds the longest-idle connections. A connection trickling header bytes is cut
// off after the header timeout.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "raw_socket.h"
#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(ConnectionLimits, HalfOpenConnectionsBeyondTheFileLimitDoNotStarveOthers) {
  VELA_REQUIRE_SHARED();
  constexpr double kHeaderTimeout = 10;
  auto s = ServerProcess::start(
      {"-m", model_path(), "--header-timeout-seconds", std::to_string(kHeaderTimeout)},
      /*wait_ready=*/true, {"prlimit", "--nofile=256:256", "--"});
  ASSERT_GT(s->port(), 0);
  EXPECT_NE(s->log().find("at most 192 connections (open-file limit 256)"), std::string::npos)
      << s->log();

  // 400 connections, each with half a request header, never finished.
  std::vector<int> held;
  for (int i = 0; i < 400; ++i) {
    const int fd = connect_loopback(s->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    held.push_back(fd);
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: slow\r\nContent-Type: appl");
  }
  // Let the server accept what it can of them (it sheds the oldest to stay under the cap).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  const auto health_start = Clock::now();
  const HttpResult health = s->get("/health", "-m " + std::to_string(int(kHeaderTimeout)));
  const double health_seconds = seconds_since(health_start);
  EXPECT_EQ(health.status, 200) << s->log().substr(0, 4000);
  EXPECT_LT(health_seconds, kHeaderTimeout);

  const auto completion_start = Clock::now();
  const HttpResult completion = s->post("/v1/completions", R"({"prompt":"Hi","max_tokens":4})",
                                        "-m " + std::to_string(int(kHeaderTimeout)));
  const double completion_seconds = seconds_since(completion_start);
  EXPECT_EQ(completion.status, 200) << completion.body;
  EXPECT_LT(completion_seconds, kHeaderTimeout);

  // The cap did it: idle connections were shed (400 + 2 against 192), and the log says so.
  EXPECT_GE(s->metric("vela:http_connections_shed_total", "model_name=\"aidreams260K\""), 200);
  EXPECT_LE(s->metric("vela:http_connections_open", "model_name=\"aidreams260K\""), 192);
  EXPECT_NE(s->log().find("connection limit reached"), std::string::npos);
  // The oldest half-open connections were the ones closed.
  EXPECT_TRUE(closed_by_peer(held.front(), 2000));
  for (int fd : held) ::close(fd);
}

TEST(ConnectionLimits, HeaderTimeoutCutsOffATricklingClient) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start(
      {"-m", model_path(), "--header-timeout-seconds", "1", "--idle-timeout-seconds", "60"});
  const int fd = connect_loopback(s->port());
  ASSERT_GE(fd, 0);
  // One header byte every 100 ms: never idle long, never done.
  const std::string header = "GET /health HTTP/1.1\r\nHost: slow\r\nX-Padding: ";
  const auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; !closed && seconds_since(start) < 10; ++i) {
    const char c = i < header.size() ? header[i] : 'a';
    if (!send_all(fd, std::string_view(&c, 1))) {
      closed = true;
      break;
    }
    closed = closed_by_peer(fd, 100);
  }
  const double elapsed = seconds_since(start);
  EXPECT_TRUE(closed) << "a trickling header was not cut off";
  EXPECT_GE(elapsed, 0.9);
  EXPECT_LT(elapsed, 5.0);
  ::close(fd);

  // A kept-alive connection may wait longer than the header timeout for its next request.
  const int keep = connect_loopback(s->port());
  ASSERT_GE(keep, 0);
  ASSERT_TRUE(send_all(keep, "GET /health HTTP/1.1\r\nHost: k\r\n\r\n"));
  char buf[512];
  pollfd p{keep, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ASSERT_GT(::recv(keep, buf, sizeof(buf), 0), 0);
  EXPECT_FALSE(closed_by_peer(keep, 2000)) << "idle keep-alive closed at the header timeout";
  ASSERT_TRUE(send_all(keep, "GET /health HTTP/1.1\r\nHost: k\r\n\r\n"));
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  const ssize_t n = ::recv(keep, buf, sizeof(buf), 0);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buf, size_t(n)).find("200 OK"), std::string::npos);
  ::close(keep);
}

}  // namespace
}  // namespace vela::test

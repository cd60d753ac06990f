// Protection and lifecycle of `vela serve`: API keys, the bounded queue (429), clients that
// disconnect mid-request (their KV blocks come back), and SIGTERM (in-flight requests end
// cleanly, exit status 0).
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using json = nlohmann::json;

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

// A request that runs for a while: a long context and no early stop (the model is tiny, so
// length comes from many tokens).
std::string long_request(bool stream, int max_tokens = 1800) {
  return json{{"prompt", "Once upon a time"},
              {"max_tokens", max_tokens},
              {"ignore_eos", true},
              {"stream", stream}}
      .dump();
}

std::vector<std::string> curl_post_args(const ServerProcess& s, const std::string& path,
                                        const std::string& body,
                                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"-H", "Content-Type: application/json", "--data-binary", body};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(s.url(path));
  return args;
}

const std::string kLabels = "model_name=\"aidreams260K\"";

TEST(ServerProtection, ApiKeys) {
  VELA_REQUIRE_SHARED();
  const auto key_file = temp_file("keys");
  write_file(key_file, "# team keys\n  key-two  \n\n");
  auto s = ServerProcess::start(
      {"-m", model_path(), "--api-key", "key-one", "--api-key-file", key_file.string()});
  const std::string body = R"({"prompt":"Hi","max_tokens":2})";

  const HttpResult none = s->post("/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_TRUE(none.has_header("www-authenticate: bearer"));
  EXPECT_EQ(json::parse(none.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(s->post("/v1/completions", body, "-H 'Authorization: Bearer key-on'").status, 401);
  EXPECT_EQ(s->post("/v1/completions", body, "-H 'Authorization: Bearer key-one-'").status, 401);
  EXPECT_EQ(s->post("/v1/completions", body, "-H 'Authorization: Basic key-one'").status, 401);
  EXPECT_EQ(s->get("/v1/models").status, 401);
  EXPECT_EQ(s->post("/v1/completions", body, "-H 'Authorization: Bearer key-one'").status, 200);
  EXPECT_EQ(s->post("/v1/completions", body, "-H 'Authorization: bearer key-two'").status, 200);
  EXPECT_EQ(s->get("/v1/models", "-H 'Authorization: Bearer key-two'").status, 200);
  // Operations endpoints stay open without --protect-metrics.
  EXPECT_EQ(s->get("/health").status, 200);
  EXPECT_EQ(s->get("/metrics").status, 200);
  EXPECT_GE(s->metric("vela:request_rejected_total", "reason=\"unauthorized\"," + kLabels), 5);
  std::filesystem::remove(key_file);

  auto p = ServerProcess::start({"-m", model_path(), "--api-key", "secret", "--protect-metrics"},
                                /*wait_ready=*/false);
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i)
    up = p->get("/health", "-H 'Authorization: Bearer secret'").status == 200;
  ASSERT_TRUE(up) << p->log();
  EXPECT_EQ(p->get("/health").status, 401);
  EXPECT_EQ(p->get("/metrics").status, 401);
  EXPECT_EQ(p->get("/metrics", "-H 'Authorization: Bearer secret'").status, 200);
}

TEST(ServerProtection, FullQueueAnswers429AtOnce) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path(), "--ctx-size", "2048", "--max-num-seqs", "1",
                                 "--max-queued-requests", "1"});
  // One running, one waiting: the queue is full.
  BackgroundCurl running(curl_post_args(*s, "/v1/completions", long_request(true)), 60);
  ASSERT_TRUE(running.wait_for_output("data: ", 30)) << running.output();
  BackgroundCurl waiting(curl_post_args(*s, "/v1/completions", long_request(false)), 60);
  ASSERT_TRUE(s->wait_for_metric("vela:num_requests_waiting", 1, 30));

  const HttpResult refused = s->post("/v1/completions", R"({"prompt":"Hi","max_tokens":2})");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_TRUE(refused.has_header("retry-after:"));
  const json e = json::parse(refused.body, nullptr, false);
  ASSERT_FALSE(e.is_discarded());
  EXPECT_EQ(e["error"]["code"], "queue_full");
  EXPECT_EQ(s->metric("vela:request_rejected_total", "reason=\"queue_full\"," + kLabels), 1);

  // Both clients hang up: their requests are aborted and every KV block comes back.
  running.kill();
  waiting.kill();
  EXPECT_TRUE(s->wait_for_metric("vela:num_requests_running", 0, 30));
  EXPECT_TRUE(s->wait_for_metric("vela:num_requests_waiting", 0, 30));
  EXPECT_TRUE(s->wait_for_metric("vela:kv_cache_usage_perc", 0, 30));
  EXPECT_EQ(s->post("/v1/completions", R"({"prompt":"Hi","max_tokens":2})").status, 200);
}

TEST(ServerProtection, ClientDisconnectAbortsAndFreesKv) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path(), "--ctx-size", "2048", "--max-num-seqs", "4"});
  const std::string abort_key = "finished_reason=\"abort\"," + kLabels;
  for (bool stream : {true, false}) {
    SCOPED_TRACE(stream ? "streaming" : "whole response");
    const double aborted_before = s->metric("vela:request_success_total", abort_key);
    BackgroundCurl client(curl_post_args(*s, "/v1/completions", long_request(stream)), 60);
    // The request holds KV blocks while it runs...
    bool in_use = false;
    for (int i = 0; i < 600 && !in_use; ++i) {
      const double usage = s->metric("vela:kv_cache_usage_perc", kLabels);
      in_use = usage > 0;
    }
    ASSERT_TRUE(in_use);
    client.kill();
    // ...and gives them back when its client goes away, long before it would have finished.
    EXPECT_TRUE(s->wait_for_metric("vela:num_requests_running", 0, 30));
    EXPECT_TRUE(s->wait_for_metric("vela:kv_cache_usage_perc", 0, 30));
    EXPECT_EQ(s->metric("vela:request_success_total", abort_key), aborted_before + 1);
  }
  EXPECT_NE(s->log().find("client_disconnected"), std::string::npos);
}

TEST(ServerProtection, SigtermWhenIdleExitsZero) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path()});
  s->signal(SIGTERM);
  EXPECT_EQ(s->wait_exit(30), 0) << s->log();
  EXPECT_NE(s->log().find("shutting down"), std::string::npos);
}

TEST(ServerProtection, SigtermLetsInFlightRequestsEnd) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path(), "--ctx-size", "4096", "--max-num-seqs", "2",
                                 "--shutdown-grace-seconds", "1"});
  // The stream is still running when the grace period ends: it is cut there, and its client
  // still gets a finish chunk and [DONE].
  BackgroundCurl long_stream(curl_post_args(*s, "/v1/completions", long_request(true, 4000)), 60);
  ASSERT_TRUE(long_stream.wait_for_output("data: ", 30));
  s->signal(SIGTERM);
  EXPECT_EQ(s->wait_exit(30), 0) << s->log();
  EXPECT_EQ(long_stream.wait(30), 0);
  const std::string out = long_stream.output();
  bool framing_ok = false;
  const auto events = sse_events(out, &framing_ok);
  EXPECT_TRUE(framing_ok) << out.substr(out.size() > 500 ? out.size() - 500 : 0);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_FALSE(last.is_discarded());
  EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
  // New connections are refused once shutdown began (the process is gone now).
  EXPECT_EQ(s->get("/health").status, 0);
}

}  // namespace
}  // namespace vela::test

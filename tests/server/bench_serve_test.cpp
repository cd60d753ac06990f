// `vela bench serve` against the real server: every request completes and the report has the
// latency percentiles, the ITL tail ratio and the goodput under objectives; a wrong URL or an
// unknown objective is a one-line error.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

std::string run_capture(const std::string& cmd, int& exit_code) {
  const CommandResult r = run_command(cmd);
  exit_code = r.exit_code;
  return r.out;
}

TEST(BenchServe, DrivesTheServerAndReportsPercentilesAndGoodput) {
  VELA_REQUIRE_SHARED();
  auto server = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string()});
  ASSERT_TRUE(server);
  int code = -1;
  const std::string out =
      run_capture(std::string(VELA_BINARY) + " bench serve --url " + server->url("") +
                      " -n 24 -c 8 --input-len 8 --output-len 12 --rate 200 -o json"
                      " --goodput ttft:60000 --slo-itl-ms 30000",
                  code);
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["completed"], 24);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
  for (const char* metric : {"ttft", "tpot", "itl", "e2e_latency"})
    for (const char* stat : {"mean_ms", "median_ms", "p90_ms", "p99_ms"})
      EXPECT_TRUE(j[metric].contains(stat));
  EXPECT_LE(j["ttft"]["median_ms"].get<double>(), j["e2e_latency"]["median_ms"].get<double>());
  EXPECT_GE(j["itl_p99_over_median"].get<double>(), 1.0);
  // Objectives nobody misses on this tiny model: every request is good.
  EXPECT_EQ(j["goodput"]["objectives"], "ttft <= 60000 ms, itl <= 30000 ms");
  EXPECT_EQ(j["goodput"]["good_requests"], 24);
  EXPECT_DOUBLE_EQ(j["goodput"]["share"].get<double>(), 1.0);
  EXPECT_GT(j["goodput"]["requests_per_s"].get<double>(), 0.0);

  // An objective no request can meet, and one that does not exist.
  const std::string strict =
      run_capture(std::string(VELA_BINARY) + " bench serve --url " + server->url("") +
                      " -n 4 -c 2 --input-len 8 --output-len 8 --slo-ttft-ms 0.000001 -o json",
                  code);
  ASSERT_EQ(code, 0) << strict;
  const auto s = nlohmann::json::parse(strict);
  EXPECT_EQ(s["completed"], 4);
  EXPECT_EQ(s["goodput"]["good_requests"], 0);
  run_capture(std::string(VELA_BINARY) + " bench serve --url " + server->url("") +
                  " -n 1 --goodput latency:5",
              code);
  EXPECT_EQ(code, 2);
}

TEST(BenchServe, UnreachableServerIsAnError) {
  int code = 0;
  run_capture(std::string(VELA_BINARY) + " bench serve --url http://127.0.0.1:1 -n 1", code);
  EXPECT_NE(code, 0);
  run_capture(std::string(VELA_BINARY) + " bench serve --url ftp://x -n 1", code);
  EXPECT_EQ(code, 2);
}

}  // namespace
}  // namespace vela::test

namespace vela::test {
namespace {

// Sum of every series of a metric (whatever its labels) in the /metrics text.
double metric_sum(const ServerProcess& server, const std::string& name) {
  const std::string text = server.get("/metrics").body;
  double sum = 0;
  size_t pos = 0;
  while ((pos = text.find("\n" + name, pos)) != std::string::npos) {
    pos += 1;
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    const char after = line.size() > name.size() ? line[name.size()] : ' ';
    if (after == '{' || after == ' ') sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// 256 concurrent streaming clients against the real server (bounded: 256 requests of 16 tokens,
// 120 s): each completes or gets a deliberate 429; the server's token counters equal the usage
// the clients saw; no request and no KV block is left afterwards.
TEST(ServerLoad, TwoHundredFiftySixConcurrentStreams) {
  VELA_REQUIRE_SHARED();
  auto server = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string(),
                                      "--max-num-seqs", "64", "--max-queued-requests", "128"});
  ASSERT_TRUE(server);
  const CommandResult r = run_command(
      std::string(VELA_BINARY) + " bench serve --url " + server->url("") +
      " -n 256 -c 256 --input-len 8 --output-len 16 --max-duration 120 --timeout 120 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const int64_t completed = j["completed"], rejected = j["rejected_429"], failed = j["failed"];
  EXPECT_EQ(completed + rejected, 256) << r.out;
  EXPECT_EQ(failed, rejected) << "only deliberate 429s may fail: " << r.out;
  EXPECT_GT(completed, 0);
  EXPECT_TRUE(server->wait_for_metric("vela:num_requests_running", 0, 30));
  EXPECT_DOUBLE_EQ(metric_sum(*server, "vela:generation_tokens_total"),
                   double(j["output_tokens"].get<int64_t>()));
  EXPECT_DOUBLE_EQ(metric_sum(*server, "vela:prompt_tokens_total"),
                   double(j["prompt_tokens"].get<int64_t>()));
  EXPECT_DOUBLE_EQ(metric_sum(*server, "vela:kv_cache_usage_perc"), 0.0);
  EXPECT_DOUBLE_EQ(metric_sum(*server, "vela:num_requests_waiting"), 0.0);
}

}  // namespace
}  // namespace vela::test

// `vela bench serve` against the real server: every request completes and the report has the
// latency percentiles; a wrong URL is a one-line error.
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

TEST(BenchServe, DrivesTheServerAndReportsPercentiles) {
  VELA_REQUIRE_SHARED();
  auto server = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string()});
  ASSERT_TRUE(server);
  int code = -1;
  const std::string out =
      run_capture(std::string(VELA_BINARY) + " bench serve --url " + server->url("") +
                      " -n 24 -c 8 --input-len 8 --output-len 12 --rate 200 -o json",
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

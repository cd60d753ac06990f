// Metrics as a real monitoring stack sees them: Debian's promtool parses the /metrics output,
// and a real Prometheus server scrapes the running server and answers a histogram-quantile
// query over a vela: histogram. Skips with a message when prometheus is not installed.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

bool have(const char* tool) {
  return run_command(std::string("command -v ") + tool).exit_code == 0;
}

TEST(Prometheus, PromtoolAcceptsTheExposition) {
  VELA_REQUIRE_SHARED();
  if (!have("promtool")) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  auto server = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string()});
  ASSERT_TRUE(server);
  ASSERT_EQ(
      server->post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8})").status,
      200);
  const std::string file = unique_temp_path("metrics.txt");
  write_file(file, server->get("/metrics").body);
  const CommandResult r = run_command("promtool check metrics < " + file);
  // Exit 3 = lint findings only. The one lint finding allowed is the ':' in the names, which
  // the vLLM-compatible names (vela:...) require; anything else (or exit 1: unparsable) fails.
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.out << r.err;
  std::istringstream lines(r.out + r.err);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) {
      EXPECT_NE(line.find("should not contain ':'"), std::string::npos) << line;
    }
  }
}

TEST(Prometheus, ScrapesAndAnswersAHistogramQuantile) {
  VELA_REQUIRE_SHARED();
  if (!have("prometheus")) GTEST_SKIP() << "prometheus not installed (Debian package prometheus)";
  auto server = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string()});
  ASSERT_TRUE(server);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(server->post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8})")
                  .status,
              200);

  const std::filesystem::path dir = unique_temp_path("prometheus");
  std::filesystem::create_directories(dir / "data");
  write_file(dir / "prometheus.yml",
             "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: vela\n"
             "    static_configs:\n      - targets: ['127.0.0.1:" +
                 std::to_string(server->port()) + "']\n");
  const uint16_t port = free_loopback_port();
  const std::string web = "127.0.0.1:" + std::to_string(port);
  // Bounded: the server is killed by `timeout` after 60 s whatever happens.
  const std::string start =
      "timeout 60 prometheus --config.file=" + (dir / "prometheus.yml").string() +
      " --storage.tsdb.path=" + (dir / "data").string() + " --web.listen-address=" + web + " >" +
      (dir / "log.txt").string() + " 2>&1 & echo $!";
  const CommandResult launched = run_command(start);
  const std::string pid = launched.out.substr(0, launched.out.find('\n'));
  const std::string query =
      "histogram_quantile(0.9,sum%20by%20(le)(vela:time_to_first_token_seconds_bucket))";
  double value = -1;
  for (int attempt = 0; attempt < 100 && value < 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const CommandResult r =
        run_command("curl -s -m 2 'http://" + web + "/api/v1/query?query=" + query + "'");
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") continue;
    const auto& res = j["data"]["result"];
    if (!res.empty()) value = std::stod(res[0]["value"][1].get<std::string>());
  }
  run_command("kill " + pid);
  ASSERT_GE(value, 0.0) << read_file(dir / "log.txt");
  EXPECT_LT(value, 60.0);  // a P90 time to first token, in seconds
}

}  // namespace
}  // namespace vela::test

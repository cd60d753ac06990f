// The soak of `vela bench serve --duration`: a minute of mixed traffic (streamed and whole
// completions, cancelled streams, malformed requests, 429s from a deliberately small queue)
// against a real server; every request is accounted for (client outcomes agree with the
// server's counters, the server ends idle with its KV cache empty) and the server's resident
// memory grows by less than 8 MiB after the warm-up. Under a sanitizer the server's resident
// memory also holds the runtime's quarantine and shadow pages, which fill for minutes, so there
// the bound is loose and the test checks the accounting.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

#ifdef VELA_SANITIZER_BUILD
constexpr const char* kMaxRssGrowthMib = "4096";
#else
constexpr const char* kMaxRssGrowthMib = "8";
#endif

using json = nlohmann::json;

TEST(Soak, MixedTrafficIsAccountedForAndMemoryStaysFlat) {
  VELA_REQUIRE_SHARED();
  auto s =
      ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string(), "--ctx-size",
                            "1024", "--max-num-seqs", "4", "--max-queued-requests", "2"});
  const CommandResult run = run_command(
      "timeout 170 " + std::string(VELA_BINARY) + " bench serve --url " + shell_quote(s->url("")) +
      " --duration 60 --concurrency 12 --max-rss-growth-mib " + kMaxRssGrowthMib +
      " --server-pid " + std::to_string(s->pid()) + " -o json");
  const std::string& out = run.out;
  const json r = json::parse(out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << out << run.err;
  std::printf("soak: %s\n", r.dump().substr(0, 1500).c_str());
  EXPECT_EQ(run.exit_code, 0) << out << run.err;
  EXPECT_TRUE(r["accounted"].get<bool>()) << r.dump(2);
  EXPECT_TRUE(r["memory_flat"].get<bool>()) << r["rss_mib"].dump(2);
  EXPECT_EQ(r["outcomes"]["failed"], 0);
  // The mix really was mixed.
  for (const char* outcome : {"completed", "cancelled", "bad_request_400", "busy_429"})
    EXPECT_GT(r["outcomes"][outcome].get<int>(), 0) << outcome << ": " << r["outcomes"].dump();
  EXPECT_GT(r["by_kind"]["stream"]["completed"].get<int>(), 0);
  EXPECT_GT(r["by_kind"]["whole"]["completed"].get<int>(), 0);
  EXPECT_GE(r["rss_mib"]["samples"].size(), 30u);
  // The server still answers.
  EXPECT_EQ(s->post("/v1/completions", R"({"prompt":"Hi","max_tokens":2})").status, 200);
}

}  // namespace
}  // namespace vela::test

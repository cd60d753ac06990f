// `vela serve` on the command line: --help documents every option; bad options, a missing
// model file and a busy port are one-line errors with a non-zero exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CliRun run_vela(const std::string& args) {
  CliRun r;
  const std::string cmd = "timeout 60 " + std::string(VELA_BINARY) + " " + args + " 2>&1";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
    const int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return r;
}

TEST(ServeCli, HelpListsEveryOption) {
  const CliRun r = run_vela("serve --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--model",
                           "--host",
                           "--port",
                           "--threads",
                           "--ctx-size",
                           "--max-num-seqs",
                           "--max-num-batched-tokens",
                           "--kv-cache-bytes",
                           "--kv-cache-fraction",
                           "--kv-type",
                           "--no-prefix-caching",
                           "--max-wait-ms",
                           "--max-queued-requests",
                           "--api-key",
                           "--api-key-file",
                           "--protect-metrics",
                           "--chat-template",
                           "--served-model-name",
                           "--max-body-bytes",
                           "--shutdown-grace-seconds",
                           "--max-connections",
                           "--header-timeout-seconds",
                           "--idle-timeout-seconds",
                           "--request-timeout",
                           "--request-threads"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(ServeCli, BadOptionsAreOneLineErrors) {
  for (const char* args :
       {"serve", "serve -m x.gguf --port 70000", "serve -m x.gguf --kv-cache-bytes 5X",
        "serve -m x.gguf --kv-cache-bytes 1G --kv-cache-fraction 0.5",
        "serve -m x.gguf --kv-cache-fraction 2", "serve -m x.gguf --max-num-seqs 0",
        "serve -m x.gguf --api-key-file /nonexistent/keys", "serve -m x.gguf --host not-an-ip",
        "serve -m x.gguf --no-such-flag"}) {
    const CliRun r = run_vela(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.exit_code, -1) << args << " did not exit";
    EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << ": " << r.output;
  }
}

TEST(ServeCli, MissingModelAndBusyPortExitWithStatusOne) {
  const CliRun missing = run_vela("serve -m /nonexistent/model.gguf --port 0");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent/model.gguf"), std::string::npos);

  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string()});
  const CliRun busy = run_vela("serve -m " + shared_path("models/aidreams260K.gguf").string() +
                               " --port " + std::to_string(s->port()));
  EXPECT_EQ(busy.exit_code, 1) << busy.output;
  EXPECT_NE(busy.output.find("cannot listen"), std::string::npos) << busy.output;
}

TEST(ServeCli, KvBudgetBeyondMemoryIsRefusedWithTheNumbers) {
  VELA_REQUIRE_SHARED();
  // 64 TiB of KV cache: more than any test machine has, so the guard refuses before allocating.
  const CliRun r = run_vela("serve -m " + shared_path("models/aidreams260K.gguf").string() +
                            " --port 0 --kv-cache-bytes 64T");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("not enough memory: the KV cache ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("plus the weights ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" bytes); lower --kv-cache-bytes"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace vela::test

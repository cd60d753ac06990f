// The chat page in a real browser: tests/server/webui/chat_page_test.mjs drives Debian's
// Chromium (/usr/bin/chromium) with playwright-core against `vela serve` (a Qwen3.5 chat
// template, the qwen3 reasoning parser, scripted output): a streamed answer with its reasoning
// folded, a second turn, Stop, and no request leaving the server's origin. Its screenshots are
// kept in the build tree (tests/server/webui-screenshots). Skipped when Chromium, Node.js or
// playwright-core (`npm ci --prefix tests/server/webui`) is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

TEST(WebUiServer, ChromiumChatsStreamsAndStops) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path chromium = "/usr/bin/chromium";
  const std::filesystem::path dir = VELA_WEBUI_TEST_DIR;
  if (!std::filesystem::exists(chromium))
    GTEST_SKIP() << "Debian's Chromium is not installed (apt-get install chromium, or run "
                    "scripts/install-deps.sh)";
  if (!std::filesystem::exists(dir / "node_modules" / "playwright-core"))
    GTEST_SKIP() << "playwright-core not installed (run: npm ci --prefix tests/server/webui)";
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found";

  // A byte-level BPE model, so each scripted piece decodes back exactly; a long context, so the
  // generation that the test stops would run for seconds (16000 tokens) if Stop did nothing.
  auto s = ServerProcess::start({"-m", shared_path("models/tiny-qwen2-bpe-F16.gguf").string(), "-c",
                                 "16384", "--max-num-seqs", "4", "--chat-template",
                                 shared_path("chat-templates/templates/Qwen3.5-4B.jinja").string(),
                                 "--reasoning-parser", "qwen3", "--served-model-name", "tiny-chat",
                                 "--test-scripted-output"});
  const std::filesystem::path shots = VELA_WEBUI_SCREENSHOT_DIR;
  std::filesystem::remove_all(shots);
  const std::string cmd = "timeout 240 node " + shell_quote((dir / "chat_page_test.mjs").string()) +
                          " " + shell_quote(s->url("/")) + " tiny-chat " +
                          shell_quote(shots.string()) + " 2>&1";
  const test::CommandResult run = test::run_command(cmd);  // its stderr is in cmd's 2>&1
  const std::string& out = run.out;
  EXPECT_EQ(run.exit_code, 0) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  for (const char* shot : {"answer.png", "stopped.png", "phone.png"}) {
    SCOPED_TRACE(shot);
    ASSERT_TRUE(std::filesystem::exists(shots / shot));
    EXPECT_GT(std::filesystem::file_size(shots / shot), 1000u);
  }
  // The Stop button closed the stream: the server saw the client go.
  EXPECT_NE(s->log().find("client_disconnected"), std::string::npos);
}

}  // namespace
}  // namespace vela::test

// The official `openai` npm client (tests/server/node) against `vela serve`: completions and
// chat completions, whole and streamed, embeddings, echo / logit_bias / best_of, with an API
// key. Skipped when Node.js or the client's node_modules (`npm ci --prefix tests/server/node`)
// are absent.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

constexpr const char* kChatMl =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(OpenAiNodeClient, CompletionsAndChat) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path dir = VELA_SERVER_NODE_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "openai"))
    GTEST_SKIP() << "openai npm client not installed (run: npm ci --prefix tests/server/node)";
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found";

  const auto template_path = temp_file("chatml");
  write_file(template_path, kChatMl);
  auto s = ServerProcess::start({"-m", shared_path("models/aidreams260K.gguf").string(),
                                 "--chat-template", template_path.string(), "--api-key", "k-123"});
  const std::string cmd = "timeout 120 node " +
                          shell_quote((dir / "openai_client_test.mjs").string()) + " " +
                          shell_quote(s->url("/v1")) + " aidreams260K k-123 2>&1";
  const test::CommandResult run = test::run_command(cmd);  // its stderr is in cmd's 2>&1
  const std::string& out = run.out;
  EXPECT_EQ(run.exit_code, 0) << out << "\nserver log:\n" << s->log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  std::filesystem::remove(template_path);
}

}  // namespace
}  // namespace vela::test

// Structured output through the real `vela serve`: 200 JSON-schema requests (50, and smaller
// hostile schemas, under a sanitizer, which checks the same paths at many times the cost) at
// temperature 1 on a random-weight model with the 32k Llama vocabulary, each output checked by
// python3-jsonschema (an independent validator); regex, choice and grammar constraints; schema
// errors as 400s; hostile schemas answered in bounded time while the server keeps serving.
// The checks themselves live in structured_output_check.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

// Requests, and the scale of the hostile schemas.
#ifdef VELA_SANITIZER_BUILD
constexpr const char* kCheckArgs = " tiny 50 0.125";
#else
constexpr const char* kCheckArgs = " tiny 200 1";
#endif

TEST(StructuredOutputServer, OutputsValidateAgainstTheirSchemas) {
  VELA_REQUIRE_SHARED();
  if (run_command("python3 -c 'import jsonschema' 2>&1").exit_code != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (scripts/install-deps.sh)";
  auto server = ServerProcess::start(
      {"-m", shared_path("models/tiny-llama-gqa.gguf").string(), "--served-model-name", "tiny"});
  ASSERT_TRUE(server);
  const auto r = run_command(std::string("python3 " VELA_STRUCTURED_CHECK " ") + server->url("") +
                             kCheckArgs + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::cout << r.out.substr(0, 2000) << "\n";
}

// A Hermes-style template that lists the tools and shows earlier calls and their results.
constexpr const char* kToolTemplate =
    "{%- if tools %}<|im_start|>system\n<tools>\n{%- for tool in tools %}{{ tool | tojson }}\n"
    "{%- endfor %}</tools>\nCall one as <tool_call>{\"name\": ..., \"arguments\": ...}"
    "</tool_call><|im_end|>\n{%- endif %}"
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{%- if message.content %}{{ message.content }}{% endif %}"
    "{%- if message.tool_calls %}{% for tc in message.tool_calls %}<tool_call>{\"name\": "
    "{{ tc.function.name | tojson }}, \"arguments\": {{ tc.function.arguments | tojson }}}"
    "</tool_call>{% endfor %}{% endif %}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST(StructuredOutputServer, OpenAiClientToolsAndResponseFormat) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path dir = VELA_SERVER_NODE_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "openai"))
    GTEST_SKIP() << "openai npm client not installed (run: npm ci --prefix tests/server/node)";
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found";
  const auto tmpl = temp_file("tools-template");
  write_file(tmpl, kToolTemplate);
  auto server =
      ServerProcess::start({"-m", shared_path("models/tiny-llama-gqa.gguf").string(),
                            "--served-model-name", "tiny", "--chat-template", tmpl.string()});
  ASSERT_TRUE(server);
  const auto r = run_command("node " + (dir / "tools_client_test.mjs").string() + " " +
                             server->url("/v1") + " tiny 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::filesystem::remove(tmpl);
}

}  // namespace
}  // namespace vela::test

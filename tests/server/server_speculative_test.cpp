// `vela serve` with speculative decoding, through curl: n-gram and draft-model servers give the
// greedy completions (whole and streamed) of a plain server, count proposals (and the draft's
// acceptances) in /metrics, list the flags in --help, and refuse bad speculative options.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

std::string completion(const ServerProcess& s, const std::string& prompt, bool stream) {
  const nlohmann::json body = {{"prompt", prompt},
                               {"max_tokens", 40},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"stream", stream}};
  const HttpResult r = s.post("/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (!stream) return nlohmann::json::parse(r.body)["choices"][0]["text"];
  std::string text;
  size_t at = 0;
  while ((at = r.body.find("data: {", at)) != std::string::npos) {
    const size_t end = r.body.find("\n", at);
    const auto event = nlohmann::json::parse(r.body.substr(at + 6, end - at - 6));
    if (!event["choices"].empty()) text += event["choices"][0]["text"].get<std::string>();
    at = end;
  }
  return text;
}

TEST(ServeSpeculative, CompletionsEqualAPlainServers) {
  VELA_REQUIRE_SHARED();
  const std::string model = shared_path("models/tiny-qwen3-Q8_0.gguf").string();
  const std::string draft = shared_path("models/tiny-qwen3-Q4_K_M.gguf").string();
  const std::vector<std::string> prompts = {"one two three one two three one two",
                                            "Once upon a time"};
  auto plain = ServerProcess::start({"-m", model});
  ASSERT_TRUE(plain);
  std::vector<std::string> want;
  for (const auto& p : prompts) want.push_back(completion(*plain, p, false));
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--speculative-method", "ngram", "--no-spec-adaptive"},
        std::vector<std::string>{"--draft-model", draft, "--num-speculative-tokens", "3",
                                 "--no-spec-adaptive"}}) {
    std::vector<std::string> args = {"-m", model};
    args.insert(args.end(), flags.begin(), flags.end());
    auto s = ServerProcess::start(args);
    ASSERT_TRUE(s);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(completion(*s, prompts[i], false), want[i]) << flags[1] << ", prompt " << i;
      EXPECT_EQ(completion(*s, prompts[i], true), want[i]) << flags[1] << " streamed, prompt " << i;
    }
    EXPECT_GT(s->metric("vela:spec_decode_num_drafts_total", "model_name=\"tiny-qwen3-Q8_0\""), 0)
        << flags[1];
    // Proposals are accepted by the draft here; the engine tests cover n-gram acceptance.
    if (flags[0] == "--draft-model") {
      EXPECT_GT(
          s->metric("vela:spec_decode_num_accepted_tokens_total", "model_name=\"tiny-qwen3-Q8_0\""),
          0);
    }
  }
}

// What the command printed, stdout then stderr.
std::string run_output(const std::string& args, int* exit_status = nullptr) {
  const CommandResult r = run_command("timeout 60 " + std::string(VELA_BINARY) + " " + args);
  if (exit_status) *exit_status = r.exit_code;
  return r.out + r.err;
}

TEST(ServeSpeculative, HelpListsTheFlags) {
  for (const char* command : {"serve", "generate", "bench spec"}) {
    const std::string help = run_output(std::string(command) + " --help");
    for (const char* flag : {"--speculative-method", "--draft-model", "--num-speculative-tokens",
                             "--prompt-lookup-min", "--prompt-lookup-max", "--no-spec-adaptive",
                             "--speculative-draft-vocab"})
      EXPECT_NE(help.find(flag), std::string::npos) << command << " " << flag;
  }
}

// `vela bench spec --replay-acceptance A` proposes the plain run's own output, each token right
// with probability A: all of it accepted at 1, none at 0, the output the plain run's either way,
// and an A outside [0, 1] a one-line error.
TEST(ServeSpeculative, BenchSpecReplaysAProposerOfAGivenAcceptance) {
  VELA_REQUIRE_SHARED();
  const std::string bench = "bench spec -m " +
                            shared_path("models/tiny-llama-256-Q8_0.gguf").string() +
                            " -t 1 -r 1 -n 24 --no-spec-adaptive --replay-acceptance ";
  int status = -1;
  std::string out = run_output(bench + "1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("each token right with probability 1.00"), std::string::npos) << out;
  EXPECT_NE(out.find("(acceptance 1.000"), std::string::npos) << out;
  EXPECT_NE(out.find("outputs identical"), std::string::npos) << out;
  out = run_output(bench + "0", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find(" 0 accepted (acceptance 0.000"), std::string::npos) << out;
  EXPECT_NE(out.find("outputs identical"), std::string::npos) << out;
  out = run_output(bench + "1.5", &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("--replay-acceptance must be a number in [0"), std::string::npos) << out;
}

TEST(ServeSpeculative, BadOptionsAreOneLineErrors) {
  VELA_REQUIRE_SHARED();
  const std::string model = shared_path("models/tiny-llama-256-F32.gguf").string();
  for (const std::string& flags :
       {std::string("--speculative-method ngram --num-speculative-tokens 0"),
        std::string("--speculative-method ngram --num-speculative-tokens 17"),
        std::string("--speculative-method medusa"), std::string("--speculative-method draft"),
        "--draft-model " + shared_path("models/tiny-qwen2-bpe-F16.gguf").string(),
        std::string("--speculative-method ngram --prompt-lookup-min 4 --prompt-lookup-max 2"),
        std::string("--speculative-method ngram --speculative-draft-vocab 64")}) {
    int status = -1;
    const std::string out = run_output("serve --port 0 -m " + model + " " + flags, &status);
    EXPECT_GT(status, 0) << flags;
    // The error is the last line (the server may log the model it loaded before).
    EXPECT_TRUE(out.find("speculative") != std::string::npos ||
                out.find("draft") != std::string::npos || out.find("lookup") != std::string::npos)
        << flags << ": " << out;
  }
}

}  // namespace
}  // namespace vela::test

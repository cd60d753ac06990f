// The `vela` binary as a user runs it: output on stdout, logs on stderr, one-line errors and
// non-zero exit codes for wrong flags and missing files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "support/run_command.h"
#include "support/shared_data.h"

namespace {

using CliRun = vela::test::CommandResult;

CliRun run(const std::string& args) {
  return vela::test::run_command(std::string(VELA_BINARY) + " " + args);
}

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, HelpForEveryCommand) {
  for (const char* cmd : {"", "generate ", "info ", "tokenize "}) {
    const CliRun r = run(std::string(cmd) + "--help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("usage: vela"), std::string::npos) << cmd;
  }
}

TEST(Cli, WrongFlagsAndMissingFilesAreOneLineErrors) {
  const CliRun unknown_cmd = run("frobnicate");
  EXPECT_NE(unknown_cmd.exit_code, 0);
  EXPECT_EQ(count_lines(unknown_cmd.err), 1u) << unknown_cmd.err;

  const CliRun bad_flag = run("generate -m x.gguf -p hi --no-such-flag");
  EXPECT_NE(bad_flag.exit_code, 0);
  EXPECT_EQ(count_lines(bad_flag.err), 1u) << bad_flag.err;
  EXPECT_NE(bad_flag.err.find("--no-such-flag"), std::string::npos);

  const CliRun bad_value = run("generate -m x.gguf -p hi --temp hot");
  EXPECT_NE(bad_value.exit_code, 0);
  EXPECT_EQ(count_lines(bad_value.err), 1u) << bad_value.err;
  EXPECT_NE(bad_value.err.find("--temp"), std::string::npos);

  const CliRun missing = run("generate -m /nonexistent/model.gguf -p hi");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_EQ(count_lines(missing.err), 1u) << missing.err;
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos);

  const CliRun info_missing = run("info /nonexistent/model.gguf");
  EXPECT_NE(info_missing.exit_code, 0);
  EXPECT_EQ(count_lines(info_missing.err), 1u) << info_missing.err;

  const CliRun no_model = run("tokenize hello");
  EXPECT_NE(no_model.exit_code, 0);
  EXPECT_EQ(count_lines(no_model.err), 1u) << no_model.err;
}

TEST(Cli, InfoListsMetadataAndTensors) {
  VELA_REQUIRE_SHARED();
  const CliRun r =
      run("info " + quote(vela::test::shared_path("models/tiny-llama-gqa.gguf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF version: 3"), std::string::npos);
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("tokenizer.ggml.tokens"), std::string::npos);
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(r.out.find("n_head 8, n_head_kv 2"), std::string::npos) << r.out;
}

TEST(Cli, InfoSumsUpEachTensorTypeOfAMixedFile) {
  VELA_REQUIRE_SHARED();
  const CliRun r =
      run("info " + quote(vela::test::shared_path("models/tiny-qwen3-Q4_K_M.gguf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A Q4_K_M file mixes Q4_K with Q6_K (and keeps the norms in F32): one line per type, with
  // the bits per weight of its blocks (4.5 for Q4_K, 6.5625 for Q6_K, 32 for F32).
  EXPECT_NE(r.out.find("bits per weight"), std::string::npos) << r.out;
  for (const char* line : {"Q4_K ", "Q6_K ", "F32 "}) {
    const size_t at = r.out.find(std::string("\n  ") + line);
    ASSERT_NE(at, std::string::npos) << line << "\n" << r.out;
    const std::string row = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    const char* bits = std::string(line) == "Q4_K "   ? "4.500 bits"
                       : std::string(line) == "Q6_K " ? "6.562 bits"
                                                      : "32.000 bits";
    EXPECT_NE(row.find(bits), std::string::npos) << row;
  }
}

TEST(Cli, TokenizePrintsIds) {
  VELA_REQUIRE_SHARED();
  const CliRun r =
      run("tokenize -m " + quote(vela::test::shared_path("models/aidreams260K.gguf").string()) +
          " 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The reference's prompt_tokens for this prompt.
  EXPECT_EQ(r.out, "1 429 491 433 295 429 444 445 265 262 263 342 430\n");
}

TEST(Cli, GenerateStreamsTextAndReportsSpeedOnStderr) {
  VELA_REQUIRE_SHARED();
  const CliRun r =
      run("generate -m " + quote(vela::test::shared_path("models/aidreams260K.gguf").string()) +
          " -p 'Once upon a time' -n 16 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.out.size(), 10u);
  EXPECT_EQ(r.out.find("vela:"), std::string::npos);  // no logs on stdout
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
  // Greedy output is deterministic.
  const CliRun again =
      run("generate -m " + quote(vela::test::shared_path("models/aidreams260K.gguf").string()) +
          " -p 'Once upon a time' -n 16 --temp 0");
  EXPECT_EQ(r.out, again.out);
}

}  // namespace

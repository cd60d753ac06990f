// `vela synth`, `vela quantize` and `vela bench` as a user runs them: help, one-line errors for
// bad flags, and an end-to-end synth -> quantize -> bench run whose JSON has every field.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/run_command.h"
#include "support/shared_data.h"

namespace {

using CliRun = vela::test::CommandResult;

CliRun run(const std::string& args) {
  return vela::test::run_command(std::string(VELA_BINARY) + " " + args);
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(ToolsCli, Help) {
  for (const char* cmd : {"synth", "quantize", "bench"}) {
    const CliRun r = run(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("usage: vela " + std::string(cmd)), std::string::npos) << cmd;
  }
  EXPECT_NE(run("synth --help").out.find("tinyllama-1.1b"), std::string::npos);
  EXPECT_NE(run("synth --help").out.find("olmoe-1b-7b"), std::string::npos);
  EXPECT_NE(run("--help").out.find("bench"), std::string::npos);
}

TEST(ToolsCli, BadFlagsAreOneLineErrors) {
  const std::string out = vela::test::unique_temp_path("vela_cli_never.gguf");
  const std::vector<std::string> cases = {
      "synth -o " + out + " --shape nope --type Q4_0 --vocab-from x.gguf",
      "synth -o " + out + " --shape tiny --type Q9_9 --vocab-from x.gguf",
      "synth -o " + out + " --shape tiny --type Q4_0",
      "synth -o " + out + " --shape tiny --type Q4_0 --vocab-from /nonexistent/v.gguf",
      "synth -o " + out + " --shape tiny --type Q4_0 --vocab-from x.gguf --seed -3",
      "synth --frobnicate",
      "quantize a.gguf b.gguf",
      "quantize /nonexistent/a.gguf " + out + " Q4_0",
      "quantize a.gguf " + out + " Q4_X",
      "bench",
      "bench -m x.gguf -t 0",
      "bench -m x.gguf -t 1,two",
      "bench -m x.gguf -o xml",
      "bench -m x.gguf -r 0",
      "bench -m x.gguf -p 0 -n 0",
      "bench -m /nonexistent/model.gguf -p 1 -n 1 --no-roofline",
      "bench -m x.gguf --what"};
  for (const std::string& args : cases) {
    const CliRun r = run(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(count_lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_NE(run("synth -o x --shape nope --type Q4_0 --vocab-from v").err.find("tinyllama-1.1b"),
            std::string::npos);
}

TEST(ToolsCli, SynthQuantizeBenchEndToEnd) {
  VELA_REQUIRE_SHARED();
  const std::string f32 = vela::test::unique_temp_path("vela_cli_tiny_f32.gguf");
  const std::string q4 = vela::test::unique_temp_path("vela_cli_tiny_q4km.gguf");
  const std::string vocab = vela::test::shared_path("models/aidreams260K.gguf").string();
  CliRun r =
      run("synth -o " + f32 + " --shape tiny --type F32 --vocab-from " + vocab + " --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("token_embd.weight"), std::string::npos);  // progress
  r = run("quantize -q " + f32 + " " + q4 + " q4_k_m");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;

  r = run("bench -m " + q4 + " -p 8 -n 4 -b 4 -t 1,2 -r 2 -o json --bw-mib 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["type"], "Q4_K_M");
  ASSERT_EQ(j["machine"]["roofline"].size(), 2u);
  EXPECT_GT(j["machine"]["roofline"][1]["read_bandwidth_bytes_per_s"].get<double>(), 0);
  ASSERT_EQ(j["results"].size(), 4u);  // (pp8, tg4) x (1, 2 threads)
  EXPECT_EQ(j["results"][0]["test"], "pp8");
  EXPECT_EQ(j["results"][1]["test"], "tg4");
  EXPECT_EQ(j["results"][3]["threads"], 2);
  for (const auto& t : j["results"]) {
    EXPECT_EQ(t["samples_ts"].size(), 2u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0);
    EXPECT_GE(t["stddev_ts"].get<double>(), 0);
    EXPECT_GT(t["roofline_fraction"].get<double>(), 0);
  }

  r = run("bench -m " + q4 + " -p 4 -n 2 -r 1 --no-roofline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| model | size | params | type | threads | test | t/s | roofline |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| tg2 |"), std::string::npos) << r.out;
}

// A Qwen3.5 shape from the builtin vocabulary (no test data needed), benchmarked from position 0
// and after a context (-d): each depth runs every test, named as llama-bench names them; the
// profile counts the timed passes alone (not the warm-up's, nor the context's).
TEST(ToolsCli, SynthQwen35AndBenchAfterAContext) {
  const std::string model = vela::test::unique_temp_path("vela_cli_tiny_qwen35.gguf");
  CliRun r = run("synth -o " + model +
                 " --shape tiny-qwen35 --type Q8_0 --vocab-from builtin --pad-vocab -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("bench -m " + model + " -p 8 -n 4 -d 0,16 -t 1 -r 1 --no-roofline -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 4u);
  EXPECT_EQ(j["results"][0]["test"], "pp8");
  EXPECT_EQ(j["results"][1]["test"], "tg4");
  EXPECT_EQ(j["results"][2]["test"], "pp8 @ d16");
  EXPECT_EQ(j["results"][3]["test"], "tg4 @ d16");
  EXPECT_EQ(j["results"][0]["n_depth"], 0);
  EXPECT_EQ(j["results"][3]["n_depth"], 16);
  for (const auto& t : j["results"]) EXPECT_GT(t["avg_ts"].get<double>(), 0);
  // The hybrid's cache: one attention layer's f16 K/V per position, three DeltaNet states.
  EXPECT_EQ(j["model"]["kv_bytes_per_position"], 512);
  EXPECT_GT(j["model"]["state_bytes"].get<double>(), 0);

  r = run("bench -m " + model + " -p 0 -n 3 -d 16 -t 1 -r 1 --no-roofline --profile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| tg3 @ d16 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("### Profile: 3 forward passes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| delta_net |"), std::string::npos) << r.out;
  std::filesystem::remove(model);
}

// `vela bench matmul`: every type x layout x token count in the JSON, the single-row case as the
// unit of cost, and one-line errors for a shape the kernels cannot tile.
TEST(ToolsCli, BenchMatmul) {
  CliRun r =
      run("bench matmul --type Q4_0,Q6_K --rows 32 --cols 256 --tokens 1,3 -t 1 -r 1 "
          "--working-set-mib 1 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rows"], 32);
  std::set<std::string> layouts;
  for (const auto& c : j["results"]) {
    layouts.insert(c["layout"].get<std::string>());
    EXPECT_GT(c["gmac_per_s"].get<double>(), 0);
    if (c["tokens"] == 1) {
      EXPECT_DOUBLE_EQ(c["cost_vs_one_row"].get<double>(), 1.0);
    }
  }
  EXPECT_TRUE(layouts.count("row-major"));
  // Two row-major cases per type, plus two interleaved ones where the CPU has the kernels.
  EXPECT_EQ(j["results"].size() % 2, 0u);
  EXPECT_GE(j["results"].size(), 4u);

  r = run("bench matmul --rows 17");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  r = run("bench matmul --type Q9_9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Q9_9"), std::string::npos) << r.err;
  // A tensor type by its own name, though IQ2_S also names a mix (of IQ2_XS tensors); a mix
  // itself is refused.
  r =
      run("bench matmul --type IQ2_S --rows 16 --cols 256 --tokens 1 -t 1 -r 1 "
          "--working-set-mib 1 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["results"][0]["type"], "IQ2_S") << r.out;
  r = run("bench matmul --type Q4_K_M");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace

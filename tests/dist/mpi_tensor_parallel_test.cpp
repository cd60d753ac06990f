// Tensor parallelism across processes: `mpirun -np N vela generate|serve --tensor-parallel-size
// N` against the same command in one process, and `vela bench` of a split model. Greedy output is
// token for token the same (the in-process test in tests/model bounds the logits themselves); bad
// setups fail with one clear line and a non-zero exit, never a hang.
#include <gtest/gtest.h>

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

namespace vela {
namespace {

// mpirun as CI runs it: as root, with more ranks than cores, a bounded run.
// Open MPI's session directories in a directory of this test process's own: a job's directory is
// named by a 16-bit hash of its launcher's pid, and one left by a killed job (this suite kills
// ranks) made a later job's daemon fail to start ("mkdir ... File exists").
void use_own_session_directory() {
  static const std::string dir = [] {
    const std::string d = test::unique_temp_path("ompi-sessions");
    std::filesystem::create_directories(d);
    return d;
  }();
  setenv("OMPI_MCA_orte_tmpdir_base", dir.c_str(), 1);
}

std::string mpirun(int n_ranks) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  use_own_session_directory();
  return std::string("timeout 120 ") + VELA_MPIRUN + " -np " + std::to_string(n_ranks) +
         " --oversubscribe ";
}

// The process of `rank` among mpirun's children (by the rank Open MPI puts in its environment).
pid_t rank_of(pid_t launcher, int rank) {
  const std::string wanted = "\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n";
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = test::read_file(entry.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) != 2 || ppid != launcher)
      continue;
    std::string env = "\n" + test::read_file(entry.path() / "environ");
    for (char& ch : env)
      if (ch == '\0') ch = '\n';
    if (env.find(wanted) != std::string::npos) return std::stoi(name);
  }
  return -1;
}

std::string model_path(const std::string& name) {
  return test::shared_path("models/" + name + ".gguf").string();
}

// A prompt long enough (146 tokens for the 512-token vocabularies, over 128) that a two-stage
// pipeline runs its prefill as two micro-batches.
std::string long_prompt() {
  std::string p;
  for (int i = 0; i < 12; ++i) p += "Once upon a time ";
  return p;
}

// Greedy generation under mpirun with n_ranks tensor-parallel ranks in each of n_stages
// pipeline stages (one process without mpirun when both are 1).
std::string generate_command(const std::string& model, int n_ranks, int n_tokens = 24,
                             int n_stages = 1, const std::string& prompt = "Once upon a time") {
  std::string cmd = std::string(VELA_BINARY) + " generate -m " + model + " -p '" + prompt +
                    "' -n " + std::to_string(n_tokens) + " --temp 0 -t 1 --ignore-eos";
  if (n_ranks * n_stages > 1)
    cmd = mpirun(n_ranks * n_stages) + cmd + " --tensor-parallel-size " + std::to_string(n_ranks) +
          " --pipeline-parallel-size " + std::to_string(n_stages);
  return cmd;
}

struct Case {
  const char* model;
  int n_ranks;
  // Greedy tokens compared: fewer where a random model's near-ties (a MoE router's top-k) flip
  // within float rounding of the reordered sums; tests/model bounds the logits themselves.
  int n_tokens = 24;
  int n_stages = 1;
  bool long_prompt = false;  // within the model's context
};

class MpiGenerate : public ::testing::TestWithParam<Case> {};

TEST_P(MpiGenerate, GreedyOutputEqualsOneProcess) {
  VELA_REQUIRE_SHARED();
  const std::string model = model_path(GetParam().model);
  const int n = GetParam().n_tokens;
  const std::string prompt = GetParam().long_prompt ? long_prompt() : "Once upon a time";
  const test::CommandResult one = test::run_command(generate_command(model, 1, n, 1, prompt));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const test::CommandResult split = test::run_command(
      generate_command(model, GetParam().n_ranks, n, GetParam().n_stages, prompt));
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_FALSE(one.out.empty());
  EXPECT_EQ(split.out, one.out);
  // Only rank 0 writes: the text once, the load line once.
  size_t loads = 0;
  for (size_t at = split.err.find("vela: loaded"); at != std::string::npos;
       at = split.err.find("vela: loaded", at + 1))
    ++loads;
  EXPECT_EQ(loads, 1u) << split.err;
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, MpiGenerate,
    ::testing::Values(Case{"aidreams260K", 2},           // trained, MHA
                      Case{"tiny-llama-256-Q8_0", 2},    // packed int8 slices
                      Case{"tiny-llama-256-Q4_K_M", 2},  // columns kept whole (256-blocks)
                      Case{"tiny-llama-256-F16", 4},     // 2 KV heads over 4 ranks
                      Case{"tiny-llama-gqa", 2},         // tied output head
                      Case{"tiny-qwen3-Q8_0", 2},        // per-head Q/K norms
                      Case{"tiny-qwen3moe-Q8_0", 2, 8},  // experts split over the ranks
                      // Latent attention: heads split, the latent cache row whole on each rank
                      // (24 tokens measured equal to one process, also over 4 ranks)
                      Case{"tiny-deepseek2-F32", 2},
                      // Pipelines (whole layers: the same values as one process), alone and
                      // with tensor parallelism in each stage.
                      Case{"aidreams260K", 1, 24, 2}, Case{"tiny-llama-256-Q4_K_M", 1, 24, 2, true},
                      Case{"tiny-qwen3moe-Q8_0", 1, 24, 3, true},  // stages of 1 and 2 layers
                      Case{"tiny-deepseek2-F32", 1, 24, 3, true},  // dense, then MoE stages
                      Case{"aidreams260K", 2, 24, 2}, Case{"tiny-llama-256-Q8_0", 2, 24, 2, true},
                      Case{"tiny-deepseek2-F32", 2, 24, 2, true},
                      // Gated DeltaNet by key heads, each rank with its part of every state;
                      // ssm_out kept whole on the Q4_K_M file (heads of 32 columns)
                      Case{"tiny-qwen35-F32", 2}, Case{"tiny-qwen35moe-Q4_K_M", 2, 8},
                      Case{"tiny-qwen35-Q8_0", 1, 24, 3, true},
                      Case{"tiny-qwen35-F32", 2, 24, 2, true}),
    [](const auto& info) {
      std::string name = std::string(info.param.model) + "_x" + std::to_string(info.param.n_ranks);
      if (info.param.n_stages > 1) name += "_pp" + std::to_string(info.param.n_stages);
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// The model's MTP block proposes on rank 0 from the hidden states the group's passes return (the
// block runs whole there): greedy output with MTP speculation over two tensor-parallel ranks and
// over two pipeline stages equals one process without it, and rank 0's trace shows the block
// following every pass.
TEST(MpiTensorParallel, MtpSpeculationEqualsOneProcess) {
  VELA_REQUIRE_SHARED();
  // A hybrid model's ranks also keep the state after the last accepted proposal (a state copy
  // in the next batch).
  for (const char* name : {"tiny-glm4moe-F32", "tiny-qwen35-F32"}) {
    SCOPED_TRACE(name);
    const std::string model = model_path(name);
    const test::CommandResult one = test::run_command(generate_command(model, 1, 16));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const std::string trace =
        (std::filesystem::temp_directory_path() / "vela-mtp-tp.json").string();
    const std::string mtp = " --speculative-method mtp --num-speculative-tokens 3 --trace " + trace;
    for (const auto& [ranks, stages] : {std::pair{2, 1}, std::pair{1, 2}}) {
      const test::CommandResult split =
          test::run_command(generate_command(model, ranks, 16, stages) + mtp);
      ASSERT_EQ(split.exit_code, 0) << split.err;
      EXPECT_EQ(split.out, one.out) << ranks << " ranks, " << stages << " stages";
      EXPECT_NE(test::read_file(trace).find("\"follow\""), std::string::npos)
          << "no MTP follow pass in rank 0's trace";
      std::filesystem::remove(trace);
    }
  }
}

// Without mpirun, the command spawns its worker processes itself.
TEST(MpiTensorParallel, WithoutMpirunSpawnsItsWorkers) {
  VELA_REQUIRE_SHARED();
  const std::string model = model_path("tiny-llama-256-Q8_0");
  const test::CommandResult one = test::run_command(generate_command(model, 1));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const test::CommandResult spawned =
      test::run_command("timeout 120 " + generate_command(model, 1) + " --tensor-parallel-size 2");
  ASSERT_EQ(spawned.exit_code, 0) << spawned.err;
  EXPECT_EQ(spawned.out, one.out);
  // Two stages of two ranks: the spawned ranks learn the layout from rank 0.
  const test::CommandResult hybrid =
      test::run_command("timeout 120 " + generate_command(model, 1) +
                        " --tensor-parallel-size 2 --pipeline-parallel-size 2");
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.err;
  EXPECT_EQ(hybrid.out, one.out);
}

TEST(MpiTensorParallel, BadSetupsAreOneLineErrors) {
  VELA_REQUIRE_SHARED();
  const std::string model = model_path("tiny-llama-256-Q8_0");
  const std::string gen = std::string(VELA_BINARY) + " generate -m " + model + " -p hi -n 2";
  // 8 heads over 3 ranks: rank 0 names the dimension, the others are told to stop.
  test::CommandResult r = test::run_command(mpirun(3) + gen + " --tensor-parallel-size 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_NE(r.err.find("8 attention heads do not split over 3 ranks"), std::string::npos) << r.err;
  // A size that is not the number of ranks.
  r = test::run_command(mpirun(2) + gen + " --tensor-parallel-size 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_NE(r.err.find("--tensor-parallel-size 4 needs 4 ranks, but mpirun started 2"),
            std::string::npos)
      << r.err;
  // More pipeline stages than layers.
  r = test::run_command(mpirun(4) + std::string(VELA_BINARY) + " generate -m " +
                        model_path("tiny-llama-gqa") + " -p hi -n 2 --pipeline-parallel-size 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_NE(r.err.find("3 layers do not split over 4 pipeline stages"), std::string::npos) << r.err;
  // A Q/K norm over all heads at once does not split by heads.
  r = test::run_command(mpirun(2) + std::string(VELA_BINARY) + " generate -m " +
                        model_path("tiny-olmoe-F32") + " -p hi -n 2 --tensor-parallel-size 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_NE(r.err.find("does not split a Q/K norm over all heads"), std::string::npos) << r.err;
}

// Experts left in the file mapping (--moe-experts mapped) on every rank: each rank's own experts,
// read row-major from its mapping, give the one process's greedy text.
TEST(MpiTensorParallel, MappedExpertsOnEveryRank) {
  VELA_REQUIRE_SHARED();
  const std::string model = model_path("tiny-qwen3moe-Q8_0");
  const test::CommandResult one =
      test::run_command(generate_command(model, 1, 8) + " --moe-experts mapped");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const test::CommandResult split =
      test::run_command(generate_command(model, 2, 8) + " --moe-experts mapped");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, one.out);
}

// Ranks check each other before serving: each host opens the path rank 0 was given, so two
// working directories with another file under the same relative path stand for two hosts whose
// copies differ. The job stops with a line naming the rank, its host and what differs; a rank on
// another kernel level runs and says so.
TEST(MpiTensorParallel, RanksWithAnotherFileOrKernelLevelAreNamed) {
  VELA_REQUIRE_SHARED();
  const auto base =
      std::filesystem::temp_directory_path() / ("vela-ranks-" + std::to_string(getpid()));
  const auto host0 = base / "host0", host1 = base / "host1";
  std::filesystem::create_directories(host0);
  std::filesystem::create_directories(host1);
  std::filesystem::create_symlink(model_path("tiny-llama-256-Q8_0"), host0 / "model.gguf");
  std::filesystem::create_symlink(model_path("tiny-llama-256-Q4_K_M"), host1 / "model.gguf");
  mpirun(2);  // the environment for running as root
  const std::string gen =
      std::string(VELA_BINARY) + " generate -m model.gguf -p hi -n 2 --tensor-parallel-size 2";
  const auto run_on = [&](const std::filesystem::path& rank1_dir, const std::string& rank1_env) {
    return test::run_command(std::string("timeout 120 ") + VELA_MPIRUN +
                             " --oversubscribe -np 1 -wdir " + host0.string() + " " + gen +
                             " : -np 1 -wdir " + rank1_dir.string() + rank1_env + " " + gen);
  };
  test::CommandResult r = run_on(host1, "");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_NE(r.err.find("rank 1 (host "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its model file has "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("every host needs the same file at the path"), std::string::npos) << r.err;

  // The same file, rank 1 on the scalar kernels.
  r = run_on(host0, " -x VELA_ISA=scalar");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1 (host "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs the scalar kernels"), std::string::npos) << r.err;
  std::filesystem::remove_all(base);
}

// `vela bench` on a split model: spawned workers (Markdown, with the roofline) and mpirun's
// ranks (JSON) measure pp and tg, with rank 0's communication share and each rank's bytes sent
// per token.
TEST(MpiTensorParallel, BenchMeasuresASplitModel) {
  VELA_REQUIRE_SHARED();
  const std::string bench = std::string(VELA_BINARY) + " bench -m " +
                            model_path("tiny-llama-256-Q8_0") + " -t 1 -p 32 -n 8 -r 2";
  const test::CommandResult md =
      test::run_command("timeout 120 " + bench + " --bw-mib 16 --tensor-parallel-size 2");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("model split over 2 x 1 ranks"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("roofline per rank"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| roofline | comm | sent/token/rank |"), std::string::npos) << md.out;
  for (const char* test : {"| pp32 |", "| tg8 |"}) {
    const size_t at = md.out.find(test);
    ASSERT_NE(at, std::string::npos) << test << "\n" << md.out;
    const std::string row = md.out.substr(at, md.out.find('\n', at) - at);
    // t/s, the roofline fraction, the communication share, and two ranks' bytes per token.
    EXPECT_NE(row.find(" ± "), std::string::npos) << row;
    EXPECT_NE(row.find("% of "), std::string::npos) << row;
    EXPECT_NE(row.find("B / "), std::string::npos) << row;
    EXPECT_EQ(row.find(" 0.00 B"), std::string::npos) << "a rank sent nothing: " << row;
  }
  const test::CommandResult js =
      test::run_command(mpirun(2) + bench + " --no-roofline --tensor-parallel-size 2 -o json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto j = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << js.out;
  EXPECT_EQ(j["parallel"]["tensor_parallel_size"], 2);
  EXPECT_EQ(j["parallel"]["pipeline_parallel_size"], 1);
  EXPECT_LT(j["parallel"]["rank_decode_bytes_per_token"].get<double>(),
            j["model"]["decode_bytes_per_token"].get<double>());
  ASSERT_EQ(j["results"].size(), 2u) << js.out;
  EXPECT_EQ(j["results"][0]["test"], "pp32");
  EXPECT_EQ(j["results"][1]["test"], "tg8");
  for (const auto& r : j["results"]) {
    EXPECT_GT(r["avg_ts"].get<double>(), 0.0);
    const double share = r["communication_share"].get<double>();
    EXPECT_GT(share, 0.0);
    EXPECT_LE(share, 1.0);
    ASSERT_EQ(r["ranks"].size(), 2u);
    for (const auto& rank : r["ranks"]) EXPECT_GT(rank["bytes_sent_per_token"].get<double>(), 0.0);
  }
}

// A size the model does not split by: one line naming the dimension, a non-zero exit, no hang.
TEST(MpiTensorParallel, BenchOfABadSplitIsOneLineError) {
  VELA_REQUIRE_SHARED();
  const std::string bench = std::string(VELA_BINARY) + " bench -m " +
                            model_path("tiny-llama-256-Q8_0") + " -t 1 -p 32 -n 8 -r 1";
  const test::CommandResult spawned =
      test::run_command("timeout 60 " + bench + " --tensor-parallel-size 3");
  EXPECT_NE(spawned.exit_code, 0);
  EXPECT_NE(spawned.exit_code, 124) << "timed out";
  EXPECT_TRUE(spawned.out.empty()) << spawned.out;
  EXPECT_NE(spawned.err.find("8 attention heads do not split over 3 ranks\n"), std::string::npos)
      << spawned.err;
  EXPECT_EQ(spawned.err.find('\n'), spawned.err.size() - 1) << "more than one line:\n"
                                                            << spawned.err;
  const test::CommandResult launched =
      test::run_command(mpirun(3) + bench + " --tensor-parallel-size 3");
  EXPECT_NE(launched.exit_code, 0);
  EXPECT_NE(launched.exit_code, 124) << "timed out";
  EXPECT_NE(launched.err.find("8 attention heads do not split over 3 ranks"), std::string::npos)
      << launched.err;
}

// The server on rank 0 of two: completions equal a one-process server's, concurrent requests
// batch, and SIGTERM stops every rank.
TEST(MpiTensorParallel, ServerAnswersAsOneProcessDoes) {
  const std::string kLabels = "model_name=\"tiny-llama-256-Q8_0\"";
  VELA_REQUIRE_SHARED();
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string model = model_path("tiny-llama-256-Q8_0");
  const std::vector<std::string> args = {"-m", model, "-t", "1", "--max-num-seqs", "4"};
  const auto completion = [](const test::ServerProcess& s, int i) {
    const nlohmann::json body = {{"prompt", "Story number " + std::to_string(i)},
                                 {"max_tokens", 12},
                                 {"temperature", 0},
                                 {"ignore_eos", true}};
    const test::HttpResult r = s.post("/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_discarded() ? std::string() : j["choices"][0]["text"].get<std::string>();
  };
  std::vector<std::string> expected;
  {
    auto one = test::ServerProcess::start(args);
    ASSERT_TRUE(one);
    for (int i = 0; i < 3; ++i) expected.push_back(completion(*one, i));
    EXPECT_EQ(one->metric("vela:tensor_parallel_bytes_sent_total", kLabels), 0.0);
  }
  std::vector<std::string> tp_args = args;
  tp_args.insert(tp_args.end(), {"--tensor-parallel-size", "2"});
  auto split =
      test::ServerProcess::start(tp_args, true, {VELA_MPIRUN, "-np", "2", "--oversubscribe"});
  ASSERT_TRUE(split);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(completion(*split, i), expected[size_t(i)]) << i;
  // Concurrent requests share the split passes.
  std::vector<std::unique_ptr<test::BackgroundCurl>> streams;
  for (int i = 0; i < 3; ++i) {
    const nlohmann::json body = {{"prompt", "Story number " + std::to_string(i)},
                                 {"max_tokens", 12},
                                 {"temperature", 0},
                                 {"ignore_eos", true}};
    streams.push_back(std::make_unique<test::BackgroundCurl>(
        std::vector<std::string>{"-H", "Content-Type: application/json", "-d", body.dump(),
                                 split->url("/v1/completions")},
        60));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(streams[size_t(i)]->wait(60), 0);
    auto j = nlohmann::json::parse(streams[size_t(i)]->output(), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << streams[size_t(i)]->output();
    EXPECT_EQ(j["choices"][0]["text"].get<std::string>(), expected[size_t(i)]) << i;
  }
  // Rank 0 counts what it sent and the time its passes spent communicating.
  const double sent = split->metric("vela:tensor_parallel_bytes_sent_total", kLabels);
  const double comm = split->metric("vela:tensor_parallel_communication_seconds_total", kLabels);
  const double forward = split->metric("vela:forward_pass_seconds_total", kLabels);
  EXPECT_GT(sent, 0.0);
  EXPECT_GT(comm, 0.0);
  EXPECT_LE(comm, forward);
  // Every rank's figures, with a rank label: rank 0's the unlabeled ones, rank 1's gathered once
  // the engine is idle (polled: the last answer can reach curl before the gather).
  const auto ranked = [&](const char* name, int rank) {
    return split->metric(name, "rank=\"" + std::to_string(rank) + "\"," + kLabels);
  };
  for (int i = 0; i < 100 && !(ranked("vela:tensor_parallel_bytes_sent_total", 1) > 0.0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int rank : {0, 1}) {
    EXPECT_GT(ranked("vela:tensor_parallel_bytes_sent_total", rank), 0.0) << rank;
    EXPECT_GT(ranked("vela:tensor_parallel_communication_seconds_total", rank), 0.0) << rank;
  }
  EXPECT_EQ(ranked("vela:tensor_parallel_bytes_sent_total", 0),
            split->metric("vela:tensor_parallel_bytes_sent_total", kLabels));
  EXPECT_TRUE(std::isnan(ranked("vela:tensor_parallel_bytes_sent_total", 2)));
  // SIGTERM on rank 0 drains as one process does, then closes the group: every rank exits 0.
  const pid_t rank0 = rank_of(split->pid(), 0);
  ASSERT_GT(rank0, 0);
  ::kill(rank0, SIGTERM);
  EXPECT_EQ(split->wait_exit(60), 0) << split->log();
}

// A pipeline server keeps a pass per stage in flight, each of other requests: concurrent
// requests get one process's answers, alone (two stages, whole layers) and with split stages
// (2 x 2), and SIGTERM still drains and closes the group.
TEST(MpiTensorParallel, APipelineServesConcurrentRequestsAsOneProcessDoes) {
  VELA_REQUIRE_SHARED();
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::vector<std::string> args = {
      "-m", model_path("tiny-llama-256-Q8_0"), "-t", "1", "--max-num-seqs", "8"};
  constexpr int kRequests = 6;
  const auto body = [](int i) {
    return nlohmann::json{{"prompt", "Story number " + std::to_string(i)},
                          {"max_tokens", 16},
                          {"temperature", 0},
                          {"ignore_eos", true}}
        .dump();
  };
  const auto text = [](const std::string& response) {
    auto j = nlohmann::json::parse(response, nullptr, false);
    return j.is_discarded() ? response : j["choices"][0]["text"].get<std::string>();
  };
  std::vector<std::string> expected;
  {
    auto one = test::ServerProcess::start(args);
    ASSERT_TRUE(one);
    for (int i = 0; i < kRequests; ++i) {
      const test::HttpResult r = one->post("/v1/completions", body(i));
      ASSERT_EQ(r.status, 200) << r.body;
      expected.push_back(text(r.body));
    }
  }
  for (const auto& [tensor, pipeline] : {std::pair{1, 2}, std::pair{2, 2}}) {
    SCOPED_TRACE("tensor " + std::to_string(tensor) + " x pipeline " + std::to_string(pipeline));
    std::vector<std::string> split_args = args;
    split_args.insert(split_args.end(), {"--tensor-parallel-size", std::to_string(tensor),
                                         "--pipeline-parallel-size", std::to_string(pipeline)});
    auto split = test::ServerProcess::start(
        split_args, true,
        {VELA_MPIRUN, "-np", std::to_string(tensor * pipeline), "--oversubscribe"});
    ASSERT_TRUE(split);
    std::vector<std::unique_ptr<test::BackgroundCurl>> clients;
    for (int i = 0; i < kRequests; ++i)
      clients.push_back(std::make_unique<test::BackgroundCurl>(
          std::vector<std::string>{"-H", "Content-Type: application/json", "-d", body(i),
                                   split->url("/v1/completions")},
          60));
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_EQ(clients[size_t(i)]->wait(60), 0);
      EXPECT_EQ(text(clients[size_t(i)]->output()), expected[size_t(i)]) << i;
    }
    EXPECT_GT(split->metric("vela:pipeline_overlapped_passes_total",
                            "model_name=\"tiny-llama-256-Q8_0\""),
              0.0);
    const pid_t rank0 = rank_of(split->pid(), 0);
    ASSERT_GT(rank0, 0);
    ::kill(rank0, SIGTERM);
    EXPECT_EQ(split->wait_exit(60), 0) << split->log();
  }
}

// A worker that dies (kill -9) or hangs (SIGSTOP) in the middle of serving ends the whole job
// with a non-zero exit within a bounded time: mpirun notices a death, the collectives' watchdog
// a hang, and names the rank that noticed and the rank that does not answer its ping.
TEST(MpiTensorParallel, ADeadOrHungRankStopsTheJob) {
  VELA_REQUIRE_SHARED();
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("VELA_TENSOR_PARALLEL_TIMEOUT", "3", 1);
  const std::vector<std::string> args = {"-m", model_path("tiny-llama-256-Q8_0"), "-t",
                                         "1",  "--tensor-parallel-size",          "2"};
  const nlohmann::json body = {{"prompt", "Hello"}, {"max_tokens", 8}, {"temperature", 0}};
  for (int sig : {SIGKILL, SIGSTOP}) {
    auto server =
        test::ServerProcess::start(args, true, {VELA_MPIRUN, "-np", "2", "--oversubscribe"});
    ASSERT_TRUE(server);
    EXPECT_EQ(server->post("/v1/completions", body.dump()).status, 200);
    const pid_t worker = rank_of(server->pid(), 1);
    ASSERT_GT(worker, 0);
    ::kill(worker, sig);
    // The next request's pass needs the worker (answered or not: the job goes down).
    test::BackgroundCurl request(
        {"-H", "Content-Type: application/json", "-d", body.dump(), server->url("/v1/completions")},
        30);
    if (sig == SIGSTOP) {  // the watchdog's notice: /health says 503 before the job goes
      bool saw_503 = false;
      for (int i = 0; i < 200 && !saw_503; ++i) {
        const test::HttpResult health = server->get("/health", "-m 1");
        saw_503 = health.status == 503 && health.body.find("tensor_parallel") != std::string::npos;
        if (!saw_503) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      EXPECT_TRUE(saw_503) << server->log();
    }
    const int status = server->wait_exit(40);
    EXPECT_NE(status, 0) << "signal " << sig << "\n" << server->log();
    EXPECT_NE(status, -1) << "signal " << sig << ": still running\n" << server->log();
    if (sig == SIGSTOP) {
      EXPECT_NE(server->log().find("tensor-parallel rank 0: "), std::string::npos) << server->log();
      EXPECT_NE(server->log().find("got no answer from the other ranks within 3 s"),
                std::string::npos)
          << server->log();
      EXPECT_NE(server->log().find("rank 1 did not answer a ping within 2 s (it died or hangs)"),
                std::string::npos)
          << server->log();
    }
    ::kill(worker, SIGKILL);
  }
  unsetenv("VELA_TENSOR_PARALLEL_TIMEOUT");
}

// Among four ranks, the watchdog's line names the one stopped rank alone: the live ones answer
// its ping while they wait.
TEST(MpiTensorParallel, TheWatchdogNamesTheStoppedRankAmongFour) {
  VELA_REQUIRE_SHARED();
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("VELA_TENSOR_PARALLEL_TIMEOUT", "3", 1);
  const std::vector<std::string> args = {"-m", model_path("tiny-llama-256-F16"), "-t",
                                         "1",  "--tensor-parallel-size",         "4"};
  const nlohmann::json body = {{"prompt", "Hello"}, {"max_tokens", 8}, {"temperature", 0}};
  auto server =
      test::ServerProcess::start(args, true, {VELA_MPIRUN, "-np", "4", "--oversubscribe"});
  ASSERT_TRUE(server);
  EXPECT_EQ(server->post("/v1/completions", body.dump()).status, 200);
  const pid_t worker = rank_of(server->pid(), 2);
  ASSERT_GT(worker, 0);
  ::kill(worker, SIGSTOP);
  test::BackgroundCurl request(
      {"-H", "Content-Type: application/json", "-d", body.dump(), server->url("/v1/completions")},
      30);
  const int status = server->wait_exit(40);
  EXPECT_NE(status, 0) << server->log();
  EXPECT_NE(status, -1) << "still running\n" << server->log();
  const std::string log = server->log();
  const size_t at = log.find("vela: tensor-parallel rank 0: ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  EXPECT_NE(line.find("; rank 2 did not answer a ping within 2 s (it died or hangs); stopping"),
            std::string::npos)
      << line;
  ::kill(worker, SIGKILL);
  unsetenv("VELA_TENSOR_PARALLEL_TIMEOUT");
}

// Two hosts made of network namespaces joined by a veth pair, each with its own address: mpirun
// runs in the first and starts the second's daemon through an rsh agent that enters the
// namespace, and the ranks talk over TCP (shared memory is turned off).
class NamespaceHosts {
 public:
  NamespaceHosts() {
    const std::string id = std::to_string(getpid() % 100000);
    hosts_ = {"vela" + id + "a", "vela" + id + "b"};
    subnet_ = "10.213." + std::to_string(getpid() % 250) + ".";
    const std::string veth_a = "vv" + id + "a", veth_b = "vv" + id + "b";
    const std::string setup =
        "ip netns add " + hosts_[0] + " && ip netns add " + hosts_[1] + " && ip link add " +
        veth_a + " type veth peer name " + veth_b + " && ip link set " + veth_a + " netns " +
        hosts_[0] + " && ip link set " + veth_b + " netns " + hosts_[1] + " && ip -n " + hosts_[0] +
        " addr add " + subnet_ + "1/24 dev " + veth_a + " && ip -n " + hosts_[1] + " addr add " +
        subnet_ + "2/24 dev " + veth_b + " && ip -n " + hosts_[0] + " link set " + veth_a +
        " up && ip -n " + hosts_[1] + " link set " + veth_b + " up && ip -n " + hosts_[0] +
        " link set lo up && ip -n " + hosts_[1] + " link set lo up";
    const test::CommandResult r = test::run_command(setup);
    ok_ = r.exit_code == 0;
    error_ = r.err;
    agent_ = test::temp_file("netns-agent");
    test::write_file(agent_,
                     "#!/bin/sh\nhost=\"$1\"; shift\nexec ip netns exec \"$host\" sh -c \"$*\"\n");
    std::filesystem::permissions(agent_, std::filesystem::perms::owner_all);
  }
  ~NamespaceHosts() {
    test::run_command("ip netns del " + hosts_[0] + "; ip netns del " + hosts_[1]);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& names() const { return hosts_; }
  std::string subnet() const { return subnet_ + "0/24"; }
  // What the namespace hosts need beyond a documented command, as Open MPI's environment
  // parameters: the rsh agent that enters a namespace, and no hwloc topology in shared memory.
  std::string environment() const {
    use_own_session_directory();
    return "OMPI_MCA_plm_rsh_agent=" + agent_.string() + " OMPI_MCA_rtc=^hwloc ";
  }
  // Runs `command` from the first host.
  std::string from_first_host(const std::string& command) const {
    return "timeout 120 env " + environment() + "ip netns exec " + hosts_[0] + " " + command;
  }
  // mpirun, one rank per host, ranks over TCP on the hosts' link only.
  // (rtc ^hwloc: the two daemons share this machine, and each writing its hwloc topology to
  // shared memory makes one of them crash now and then.)
  std::string mpirun() const {
    use_own_session_directory();
    const std::string net = subnet_ + "0/24";
    return "timeout 120 ip netns exec " + hosts_[0] + " " + VELA_MPIRUN + " --host " + hosts_[0] +
           "," + hosts_[1] + " -np 2 --mca plm_rsh_agent " + agent_.string() +
           " --mca rtc ^hwloc --mca btl tcp,self --mca btl_tcp_if_include " + net +
           " --mca oob_tcp_if_include " + net + " ";
  }

 private:
  std::vector<std::string> hosts_;
  std::string subnet_;
  std::filesystem::path agent_;
  bool ok_ = false;
  std::string error_;
};

TEST(MpiTensorParallel, RanksInTwoNetworkNamespacesOverTcp) {
  VELA_REQUIRE_SHARED();
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  if (test::run_command("command -v ip").exit_code != 0) GTEST_SKIP() << "iproute2 (ip) missing";
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  NamespaceHosts hosts;
  if (!hosts.ok()) GTEST_SKIP() << "cannot make network namespaces here: " << hosts.error();
  // Each rank in its own network stack, on its own address.
  const test::CommandResult where = test::run_command(
      hosts.mpirun() + "sh -c 'echo $(readlink /proc/self/ns/net) $(ip -br addr | grep -c UP)'");
  ASSERT_EQ(where.exit_code, 0) << where.err;
  const size_t newline = where.out.find('\n');
  ASSERT_NE(newline, std::string::npos) << where.out;
  EXPECT_NE(where.out.substr(0, newline), where.out.substr(newline + 1)) << where.out;
  for (const char* name : {"tiny-llama-256-Q8_0", "tiny-llama-gqa"}) {
    const std::string model = std::filesystem::absolute(model_path(name)).string();
    const test::CommandResult one = test::run_command(generate_command(model, 1));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const test::CommandResult split = test::run_command(
        hosts.mpirun() + generate_command(model, 1) + " --tensor-parallel-size 2");
    ASSERT_EQ(split.exit_code, 0) << split.err << "\n---\n" << split.out;
    EXPECT_EQ(split.out, one.out) << name;
    // A stage a host: the hidden states cross the link.
    const test::CommandResult staged = test::run_command(
        hosts.mpirun() + generate_command(model, 1) + " --pipeline-parallel-size 2");
    ASSERT_EQ(staged.exit_code, 0) << staged.err << "\n---\n" << staged.out;
    EXPECT_EQ(staged.out, one.out) << name;
  }
}

// The multi-host command of docs/parallelism.md, run as written: only the hostfile, subnet,
// model path and binary are this test's own.
TEST(MpiTensorParallel, TheDocumentedMultiHostCommandRuns) {
  VELA_REQUIRE_SHARED();
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  if (test::run_command("command -v ip").exit_code != 0) GTEST_SKIP() << "iproute2 (ip) missing";
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string doc = test::read_file(std::string(VELA_DOCS_DIR) + "/parallelism.md");
  size_t at = doc.find("\nmpirun --hostfile hosts.txt");
  ASSERT_NE(at, std::string::npos) << "no multi-host command in docs/parallelism.md";
  std::string command;
  for (++at;;) {  // the command's lines, joined where they end in a backslash
    const size_t end = doc.find('\n', at);
    std::string line = doc.substr(at, end - at);
    const bool continued = !line.empty() && line.back() == '\\';
    if (continued) line.pop_back();
    command += line;
    at = end + 1;
    if (!continued || end == std::string::npos) break;
  }
  const auto replace = [&](const std::string& from, const std::string& to) {
    const size_t i = command.find(from);
    ASSERT_NE(i, std::string::npos) << "'" << from << "' not in: " << command;
    command.replace(i, from.size(), to);
  };
  NamespaceHosts hosts;
  if (!hosts.ok()) GTEST_SKIP() << "cannot make network namespaces here: " << hosts.error();
  const auto hostfile = test::temp_file("hosts");
  test::write_file(hostfile, hosts.names()[0] + " slots=1\n" + hosts.names()[1] + " slots=1\n");
  const std::string model = std::filesystem::absolute(model_path("tiny-llama-256-Q8_0")).string();
  replace("mpirun ", std::string(VELA_MPIRUN) + " ");
  replace("hosts.txt", hostfile.string());
  for (int i = 0; i < 2; ++i) replace("10.0.0.0/24", hosts.subnet());
  replace("vela generate", std::string(VELA_BINARY) + " generate");
  replace("/models/model.gguf", model);
  const size_t program = command.find(VELA_BINARY);
  std::string alone = command.substr(program);
  alone.erase(alone.find(" --tensor-parallel-size 2"));
  const test::CommandResult one = test::run_command(alone);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const test::CommandResult split = test::run_command(hosts.from_first_host(command));
  ASSERT_EQ(split.exit_code, 0) << command << "\n" << split.err;
  EXPECT_EQ(split.out, one.out);
  std::filesystem::remove(hostfile);
}

}  // namespace
}  // namespace vela

// The benchmark's pieces: the roofline measurements return plausible positive rates, a model
// bench runs prompt and generation passes, the FLOP and byte accounting follows the model's
// shapes, and the report formats (Markdown, JSON) carry every field.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "kernels/packed/packed_gemm.h"
#include "model/model.h"
#include "support/shared_data.h"
#include "tools_support/bench/bench_report.h"
#include "tools_support/bench/model_bench.h"
#include "tools_support/bench/roofline.h"
#include "tools_support/builtin_vocab.h"
#include "tools_support/synth.h"

namespace vela::bench {
namespace {

TEST(Roofline, MeasuresPositiveRatesOnEveryIsaThisCpuHas) {
  for (KernelIsa isa : supported_kernel_isas()) {
    const Roofline r = measure_roofline(1, isa, size_t(4) << 20, 0.01);
    EXPECT_GT(r.read_bytes_per_s, 1e8) << kernel_isa_name(isa);
    EXPECT_GT(r.fp32_flops, 1e8) << kernel_isa_name(isa);
    EXPECT_GT(r.int8_ops, 1e8) << kernel_isa_name(isa);
    if (isa == KernelIsa::kAvx512 && cpu_features().avx512_bf16)
      EXPECT_GT(r.bf16_flops, 1e8);
    else
      EXPECT_EQ(r.bf16_flops, 0.0) << kernel_isa_name(isa) << ": no bf16 dot instruction";
  }
  EXPECT_GE(default_bandwidth_buffer_bytes(), size_t(1) << 20);
}

// One ceiling at a time, each as measure_roofline measures it, named; no bandwidth buffer, no
// bandwidth figure.
TEST(Roofline, MeasuresOneCeilingAtATime) {
  const KernelIsa isa = selected_kernel_isa();
  for (int i = 0; i < 2; ++i) {  // again: a measurement leaves nothing behind that the next needs
    EXPECT_GT(measure_ceiling(CeilingKind::kReadBandwidth, 2, isa, size_t(4) << 20), 1e8);
    EXPECT_GT(measure_ceiling(CeilingKind::kFp32Peak, 2, isa, 0, 0.01), 1e8);
    EXPECT_GT(measure_ceiling(CeilingKind::kInt8Peak, 2, isa, 0, 0.01), 1e8);
  }
  EXPECT_EQ(measure_ceiling(CeilingKind::kReadBandwidth, 1, isa, 0), 0.0);
  EXPECT_EQ(measure_ceiling(CeilingKind::kBf16Peak, 1, isa, 0, 0.01) > 0,
            isa == KernelIsa::kAvx512 && cpu_features().avx512_bf16);
  EXPECT_STREQ(ceiling_name(CeilingKind::kReadBandwidth), "read bandwidth");
  EXPECT_STREQ(ceiling_name(CeilingKind::kFp32Peak), "fp32 peak");
  EXPECT_STREQ(ceiling_name(CeilingKind::kInt8Peak), "int8 peak");
  EXPECT_STREQ(ceiling_name(CeilingKind::kBf16Peak), "bf16 peak");
}

// Quantized weights meet the int8 peak; BF16 weights the bf16 peak where their kernel is the bf16
// dot instruction (else the fp32 peak their widened form runs at); F16 / F32 the fp32 peak.
TEST(Roofline, PromptCeilingFollowsTheWeightType) {
  Roofline r;
  ModelProfile quantized, bf16, f16;
  quantized.int8_activations = true;
  bf16.bf16_weights = true;
  EXPECT_EQ(prompt_ceiling(quantized, r), CeilingKind::kInt8Peak);
  EXPECT_EQ(prompt_ceiling(bf16, r), CeilingKind::kFp32Peak);
  r.bf16_flops = 2e11;
  const bool dot = selected_bf16_kernel() == Bf16Kernel::kDot;
  EXPECT_EQ(prompt_ceiling(bf16, r), dot ? CeilingKind::kBf16Peak : CeilingKind::kFp32Peak);
  EXPECT_EQ(prompt_ceiling(f16, r), CeilingKind::kFp32Peak);
}

TEST(TestResult, StatisticsAndRooflineFraction) {
  TestResult r;
  r.n_prompt = 100;
  r.seconds = {1.0, 0.5};
  r.work_per_run = 1e9;
  r.ceilings = {4e9, 4e9};
  EXPECT_DOUBLE_EQ(r.mean_tps(), 150.0);
  EXPECT_NEAR(r.stddev_tps(), std::sqrt(2.0 * 50 * 50), 1e-9);
  EXPECT_DOUBLE_EQ(r.achieved(), 1e9 / 0.75);
  EXPECT_DOUBLE_EQ(r.mean_ceiling(), 4e9);
  EXPECT_DOUBLE_EQ(r.fraction(), (0.25 + 0.5) / 2);  // two runs: the mean of both
  r.ceilings.clear();
  EXPECT_EQ(r.fraction(), 0.0);
  EXPECT_TRUE(r.fractions().empty());
}

// Each run is taken against its own ceiling, and the median run is reported: a slow run during
// a slow moment of the host counts as the share it had then.
TEST(TestResult, EachRunAgainstItsOwnCeiling) {
  TestResult r;
  r.n_gen = 10;
  r.work_per_run = 1e9;
  r.seconds = {0.1, 0.2, 0.1};      // 10, 5 and 10 GB/s
  r.ceilings = {2e10, 1e10, 1e10};  // the middle run ran while the ceiling had halved
  const std::vector<double> f = r.fractions();
  ASSERT_EQ(f.size(), 3u);
  EXPECT_DOUBLE_EQ(f[0], 0.5);
  EXPECT_DOUBLE_EQ(f[1], 0.5);
  EXPECT_DOUBLE_EQ(f[2], 1.0);
  EXPECT_DOUBLE_EQ(r.fraction(), 0.5);
  r.ceilings.pop_back();  // not one per run: not a share
  EXPECT_EQ(r.fraction(), 0.0);
}

// A tg run's steps: the median shows the pass's own speed; steps over 1.5x the median are
// stalls, counted with their time beyond the median.
TEST(TestResult, StepsSeparateStallsFromTheMedianStep) {
  TestResult r;
  r.n_gen = 4;
  r.work_per_run = 4e8;  // 1e8 bytes a step
  r.seconds = {0.5, 0.5};
  r.ceilings = {1e10, 1e10};
  EXPECT_EQ(r.median_step_seconds(), 0.0);
  EXPECT_EQ(r.stalled_steps(), 0);
  EXPECT_EQ(r.stall_share(), 0.0);
  EXPECT_EQ(r.median_step_fraction(), 0.0);
  r.step_seconds = {0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.05, 0.03};  // median 0.02
  EXPECT_DOUBLE_EQ(r.median_step_seconds(), 0.02);
  EXPECT_EQ(r.stalled_steps(), 1);  // 0.03 is exactly 1.5x: not a stall
  EXPECT_DOUBLE_EQ(r.stall_share(), 0.03 / 0.2);
  EXPECT_DOUBLE_EQ(r.median_step_fraction(), 1e8 / 0.02 / 1e10);
  r.ceilings.clear();
  EXPECT_EQ(r.median_step_fraction(), 0.0);
}

class ModelBenchTest : public testing::Test {
 protected:
  void SetUp() override {
    if (test::shared_dir().empty()) GTEST_SKIP() << "shared test data not found";
    SynthOptions o;
    o.output_path = vela::test::unique_temp_path("vela_bench_tiny.gguf");
    o.shape = *find_shape("tiny");
    o.target = *parse_quant_target("Q4_0");
    o.vocab_path = test::shared_path("models/aidreams260K.gguf").string();
    ASSERT_TRUE(synthesize_model(o).ok());
    auto m = Model::load(o.output_path);
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = *m;
    path_ = o.output_path;
  }
  std::shared_ptr<const Model> model_;
  std::string path_;
};

TEST_F(ModelBenchTest, ProfileCountsTheWeightsEveryTokenUses) {
  const ModelProfile p = profile_model(*model_, path_, model_->gguf().file_size());
  // tiny: 2 blocks of q, o [256 x 256], k, v [128 x 256], gate, up, down [512 x 256].
  const uint64_t block = 2 * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256);
  EXPECT_EQ(p.block_matrix_params, block);
  EXPECT_EQ(p.output_params, 512u * 256u);
  // Q4_0: 18 bytes per 32 weights; the output matrix is Q6_K (210 bytes per 256).
  EXPECT_EQ(p.decode_bytes, block / 32 * 18 + 512u * 256u / 256 * 210);
  EXPECT_EQ(p.type_name, "Q4_0");
  EXPECT_TRUE(p.int8_activations);
  EXPECT_EQ(p.name, "synthetic tiny");
  EXPECT_DOUBLE_EQ(prompt_flops(p, 10, 4), 2.0 * (double(block) * 10 + 512.0 * 256 * 3));
}

TEST_F(ModelBenchTest, RunsPromptAndGenerationInBatches) {
  ModelBench b(model_, 1, 4, 10, 5);
  ASSERT_TRUE(b.warmup().ok());
  for (int rep = 0; rep < 2; ++rep) {  // repetitions restart at position 0
    auto pp = b.run_prompt(10);        // passes of 4, 4, 2 tokens
    ASSERT_TRUE(pp.ok()) << pp.message();
    EXPECT_GT(*pp, 0.0);
    std::vector<double> steps = {1.0};  // appended to
    auto tg = b.run_generation(5, &steps);
    ASSERT_TRUE(tg.ok()) << tg.message();
    EXPECT_GT(*tg, 0.0);
    ASSERT_EQ(steps.size(), 6u);
    double sum = 0;
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_GT(steps[i], 0.0);
      sum += steps[i];
    }
    EXPECT_LE(sum, *tg);
  }
  EXPECT_FALSE(b.run_prompt(11).ok());  // beyond what it was sized for
}

TEST_F(ModelBenchTest, ReportsCarryEveryField) {
  BenchReport r;
  r.model_path = path_;
  r.model = profile_model(*model_, path_, model_->gguf().file_size());
  r.cpu = "test cpu";
  r.isa = "scalar";
  r.rooflines.push_back({2, 1e10, 1e11, 4e11});
  TestResult pp;
  pp.test = "pp10";
  pp.n_prompt = 10;
  pp.n_batch = 4;
  pp.n_threads = 2;
  pp.seconds = {0.1, 0.2};
  pp.work_per_run = 1e8;
  pp.ceilings = {4e11, 2e11};
  pp.ceiling_name = "int8 peak";
  r.results.push_back(pp);
  TestResult tg;
  tg.test = "tg4";
  tg.n_gen = 4;
  tg.n_threads = 2;
  tg.seconds = {0.1};
  tg.work_per_run = 4e8;
  tg.ceilings = {1e10};
  tg.ceiling_name = "read bandwidth";
  tg.step_seconds = {0.02, 0.02, 0.02, 0.04};
  r.results.push_back(tg);
  const auto j = nlohmann::json::parse(format_json(r));
  EXPECT_FALSE(j["results"][0].contains("step_median_s"));  // pp has no steps
  const auto& g = j["results"][1];
  EXPECT_EQ(g["step_samples_s"].size(), 4u);
  EXPECT_DOUBLE_EQ(g["step_median_s"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(g["step_median_roofline_fraction"].get<double>(), 0.5);
  EXPECT_EQ(g["stalled_steps"].get<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(g["stall_share"].get<double>(), 0.02 / 0.1);
  EXPECT_EQ(j["model"]["type"], "Q4_0");
  EXPECT_EQ(j["machine"]["roofline"][0]["read_bandwidth_bytes_per_s"], 1e10);
  const auto& t = j["results"][0];
  for (const char* key : {"test", "n_prompt", "n_gen", "threads", "samples_ts", "avg_ts",
                          "stddev_ts", "roofline_fraction", "roofline_ceiling_name"})
    EXPECT_TRUE(t.contains(key)) << key;
  EXPECT_DOUBLE_EQ(t["avg_ts"].get<double>(), 75.0);
  // Each run against its own ceiling: 1e8 FLOPs in 0.1 s of 4e11, and in 0.2 s of 2e11.
  ASSERT_EQ(t["roofline_fractions"].size(), 2u);
  EXPECT_DOUBLE_EQ(t["roofline_fractions"][0].get<double>(), 2.5e-3);
  EXPECT_DOUBLE_EQ(t["roofline_fractions"][1].get<double>(), 2.5e-3);
  EXPECT_DOUBLE_EQ(t["roofline_fraction"].get<double>(), 2.5e-3);
  EXPECT_EQ(t["roofline_ceilings"].size(), 2u);
  EXPECT_DOUBLE_EQ(t["roofline_ceiling"].get<double>(), 3e11);
  const std::string md = format_markdown(r);
  EXPECT_NE(md.find("% of int8 peak (666.67 MFLOP/s of 300.00 GFLOP/s)"), std::string::npos) << md;
  EXPECT_NE(md.find("| synthetic tiny |"), std::string::npos) << md;
  EXPECT_NE(md.find("pp10"), std::string::npos);
  EXPECT_NE(md.find("75.00 ± 35.36"), std::string::npos) << md;
  EXPECT_NE(md.find("tg4, 2 threads: median step 20.00 ms (5.00 GB/s, 50.0% of read bandwidth); "
                    "1 of 4 steps stalled (over 1.5x the median), 20.0% of the time beyond the "
                    "median"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("% of int8 peak"), std::string::npos) << md;
  EXPECT_EQ(md.find("bf16 peak"), std::string::npos) << "printed although not measured: " << md;
  EXPECT_EQ(j["machine"]["roofline"][0]["peak_bf16_flops"], 0.0);
  r.rooflines[0].bf16_flops = 2e11;
  EXPECT_NE(format_markdown(r).find(", bf16 peak 200.00 GFLOP/s"), std::string::npos)
      << format_markdown(r);
}

TEST(BenchReport, TestNamesCarryTheContextDepth) {
  EXPECT_EQ(test_name(512, 0, 0), "pp512");
  EXPECT_EQ(test_name(0, 128, 0), "tg128");
  EXPECT_EQ(test_name(0, 32, 8192), "tg32 @ d8192");
  EXPECT_EQ(test_name(512, 0, 4096), "pp512 @ d4096");
  BenchReport r;
  TestResult tg;
  tg.test = test_name(0, 4, 100);
  tg.n_gen = 4;
  tg.n_depth = 100;
  tg.seconds = {0.5};
  r.results.push_back(tg);
  EXPECT_NE(format_markdown(r).find("| tg4 @ d100 | 8.00 ± 0.00 |"), std::string::npos)
      << format_markdown(r);
  EXPECT_EQ(nlohmann::json::parse(format_json(r))["results"][0]["n_depth"], 100);
}

// A decode step reads the weights and the recurrent state once, and the K/V of every position it
// attends: after 100 tokens, 4 steps attend 101 + 102 + 103 + 104 positions.
TEST(ModelProfile, GenerationBytesCountTheCacheItReads) {
  ModelProfile p;
  p.decode_bytes = 1000;
  p.state_bytes = 50;
  p.kv_bytes_per_position = 2;
  EXPECT_DOUBLE_EQ(generation_bytes(p, 100, 4), 4 * 1050.0 + 2.0 * (101 + 102 + 103 + 104));
  EXPECT_DOUBLE_EQ(generation_bytes(p, 0, 1), 1050.0 + 2.0);
}

// The Qwen3.5 shapes, written with the builtin vocabulary (no test data needed).
class Qwen35BenchTest : public testing::Test {
 protected:
  std::shared_ptr<const Model> load(const std::string& shape) {
    const std::string vocab = vela::test::unique_temp_path("vela_bench_q35_vocab.gguf");
    EXPECT_TRUE(write_builtin_vocab(vocab).ok());
    SynthOptions o;
    o.output_path = vela::test::unique_temp_path("vela_bench_" + shape + ".gguf");
    o.shape = *find_shape(shape);
    o.target = *parse_quant_target("F32");
    o.vocab_path = vocab;
    o.pad_vocab = true;
    o.n_threads = 2;
    EXPECT_TRUE(synthesize_model(o).ok());
    std::filesystem::remove(vocab);
    auto m = Model::load(o.output_path);
    EXPECT_TRUE(m.ok()) << m.message();
    paths_.push_back(o.output_path);
    return m.ok() ? *m : nullptr;
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::filesystem::remove(p);
  }
  std::vector<std::string> paths_;
};

// Every token reads the DeltaNet layers' projections and the shared expert too; a decode step
// reads the attention layer's K/V and the DeltaNet layers' state.
TEST_F(Qwen35BenchTest, ProfileCountsTheDeltaNetAndSharedExpertWeights) {
  // tiny-qwen35: 3 DeltaNet layers of attn_qkv [256 x 256], attn_gate [128 x 256], ssm_beta and
  // ssm_alpha [4 x 256], ssm_out [256 x 128]; one attention layer of q [512 x 256] (query and
  // gate), k, v [128 x 256], o [256 x 256]; each with gate, up, down [512 x 256].
  const uint64_t delta_net = 256 * 256 + 128 * 256 + 2 * 4 * 256 + 256 * 128;
  const uint64_t attention = 512 * 256 + 2 * 128 * 256 + 256 * 256;
  const uint64_t ffn = 3 * 512 * 256;
  auto dense = load("tiny-qwen35");
  ASSERT_NE(dense, nullptr);
  const ModelProfile p = profile_model(*dense, paths_.back(), dense->gguf().file_size());
  EXPECT_EQ(p.block_matrix_params, 3 * delta_net + attention + 4 * ffn);
  EXPECT_EQ(p.output_params, 512u * 256u);                  // tied
  EXPECT_EQ(p.kv_bytes_per_position, 1u * 2 * 2 * 64 * 2);  // 1 layer, K and V, 2 heads, f16
  // Per DeltaNet layer: 3 convolution inputs of 256 channels, 4 heads of [32 x 32].
  EXPECT_EQ(p.state_bytes, 3u * (3 * 256 + 4 * 32 * 32) * 4);

  // tiny-qwen35moe: router [8 x 256], 2 of 8 experts of 3 x [256 x 256], the shared expert's 3.
  auto moe = load("tiny-qwen35moe");
  ASSERT_NE(moe, nullptr);
  const ModelProfile m = profile_model(*moe, paths_.back(), moe->gguf().file_size());
  const uint64_t moe_ffn = 8 * 256 + 2 * 3 * 256 * 256 + 3 * 256 * 256;
  EXPECT_EQ(m.block_matrix_params, 3 * delta_net + attention + 4 * moe_ffn);
}

// Runs after a context start where the context ends, every time: the K/V of the attention layer
// stay, the DeltaNet state is put back. Decoding after a context of 12 gives the logits that 16
// decode steps from position 0 give; so does a 4-token prompt after it; a context extended from
// a shorter one is the same context.
TEST_F(Qwen35BenchTest, RunsAfterAContextStartWhereItEnds) {
  auto model = load("tiny-qwen35");
  ASSERT_NE(model, nullptr);
  ModelBench reference(model, 1, 16, 4, 16);
  ASSERT_TRUE(reference.run_generation(16).ok());
  const std::vector<float> want = reference.logits();
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  const auto expect_near = [&](const std::vector<float>& got, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LT(worst, 1e-3f * (1 + scale)) << what;
  };

  ModelBench b(model, 1, 16, 4, 4, 1234, nullptr, /*max_depth=*/12);
  EXPECT_FALSE(b.set_depth(13).ok());
  ASSERT_TRUE(b.warmup().ok());
  ASSERT_TRUE(b.set_depth(12).ok());
  EXPECT_EQ(b.depth(), 12);
  ASSERT_TRUE(b.run_generation(4).ok());
  expect_near(b.logits(), "tg4 @ d12");
  const std::vector<float> first = b.logits();
  ASSERT_TRUE(b.run_generation(4).ok());
  EXPECT_EQ(b.logits(), first) << "a second run did not start from the same context";
  ASSERT_TRUE(b.run_prompt(4).ok());
  expect_near(b.logits(), "pp4 @ d12");
  EXPECT_FALSE(b.run_generation(5).ok());  // past the context it was sized for

  ASSERT_TRUE(b.set_depth(8).ok());   // shorter: computed again from position 0
  ASSERT_TRUE(b.set_depth(12).ok());  // longer: extends it
  ASSERT_TRUE(b.run_generation(4).ok());
  expect_near(b.logits(), "tg4 @ d12, extended from d8");
  ASSERT_TRUE(b.set_depth(0).ok());  // back to position 0
  ASSERT_TRUE(b.run_generation(4).ok());
  ModelBench four(model, 1, 16, 4, 4);
  ASSERT_TRUE(four.run_generation(4).ok());
  EXPECT_EQ(b.logits(), four.logits());
}

TEST(BenchReport, ASplitModelReportsItsRanksAndCommunication) {
  // Rank 0 of 2 x 2: half of stage 0's two layers of four, no output head (the last stage's).
  ModelProfile whole;
  whole.block_matrix_params = 4000;
  whole.output_params = 600;
  whole.output_bytes = 300;
  whole.decode_bytes = 2300;
  ModelProfile rank0;
  rank0.block_matrix_params = 1000;
  rank0.decode_bytes = 500;
  const ModelProfile p = per_rank_profile(rank0, whole, 2, 4, 2);
  EXPECT_EQ(p.block_matrix_params, 2000u);
  EXPECT_EQ(p.output_params, 300u);
  EXPECT_EQ(p.decode_bytes, 1000u + 150u);
  // One stage: rank 0's slice as it is.
  EXPECT_EQ(per_rank_profile(whole, whole, 4, 4, 2).decode_bytes, whole.decode_bytes);

  BenchReport r;
  r.model.name = "m";
  r.model.decode_bytes = 2300;
  r.rank_model = p;
  r.tensor_parallel = 2;
  r.pipeline_parallel = 2;
  TestResult tg;
  tg.test = "tg4";
  tg.n_gen = 4;
  tg.seconds = {0.5, 0.5};
  tg.forward_seconds = 1.0;
  tg.communication_seconds = 0.25;
  tg.ranks = {{8000, 0.25}, {4000, 0.1}, {800, 0.1}, {80, 0.1}};
  r.results.push_back(tg);
  EXPECT_DOUBLE_EQ(tg.communication_share(), 0.25);
  EXPECT_DOUBLE_EQ(tg.bytes_sent_per_token(0), 1000.0);  // 8 tokens in two runs
  EXPECT_EQ(tg.bytes_sent_per_token(4), 0.0);
  const std::string md = format_markdown(r);
  EXPECT_NE(md.find("model split over 2 x 2 ranks"), std::string::npos) << md;
  EXPECT_NE(md.find("| 25.0% | 1.00 KB / 500.00 B / 100.00 B / 10.00 B |"), std::string::npos)
      << md;
  const auto j = nlohmann::json::parse(format_json(r));
  EXPECT_EQ(j["parallel"]["ranks"], 4);
  EXPECT_EQ(j["parallel"]["rank_decode_bytes_per_token"], 1150);
  EXPECT_DOUBLE_EQ(j["results"][0]["communication_share"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["results"][0]["ranks"][1]["bytes_sent_per_token"].get<double>(), 500.0);
  // One process: none of it.
  r.tensor_parallel = r.pipeline_parallel = 1;
  EXPECT_EQ(format_markdown(r).find("comm"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(format_json(r)).contains("parallel"));
}

}  // namespace
}  // namespace vela::bench

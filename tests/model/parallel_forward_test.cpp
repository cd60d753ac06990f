// The multi-threaded forward pass gives bit-identical logits for any thread count: every output
// value is computed by one thread in a fixed order, however the work is split. Every step is
// forced onto the pool (min_parallel_work = 0) so that the small shared models exercise the
// split matmuls, attention runs and element-wise ranges, not just the inline fallbacks.
#include <gtest/gtest.h>

#include <cstring>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "support/shared_data.h"
#include "two_sequence_passes.h"

namespace vela {
namespace {

std::vector<float> run_passes(const std::shared_ptr<const Model>& model, KvType kv_type,
                              int32_t n_threads, std::shared_ptr<ThreadPool> pool = nullptr) {
  ForwardOptions options{64, 64, test::kTwoSeqBlock * test::kTwoSeqMaxBlocks, n_threads,
                         /*min_parallel_work=*/0};
  DecoderForward fwd(model, options, std::move(pool));
  KvCache cache(model_cache_config(model->config(), test::kTwoSeqBlock, test::kTwoSeqBlocks,
                                   kv_type, test::kTwoSeqStateSlots));
  return test::run_two_sequence_passes(fwd, cache);
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b,
                          const char* what) {
  ASSERT_EQ(a.size(), b.size());
  size_t first_diff = a.size();
  for (size_t i = 0; i < a.size() && first_diff == a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) first_diff = i;
  EXPECT_EQ(first_diff, a.size()) << what << ": first difference at logit " << first_diff << " ("
                                  << a[first_diff % a.size()] << " vs " << b[first_diff % a.size()]
                                  << ")";
}

class ParallelForward : public ::testing::TestWithParam<const char*> {};

TEST_P(ParallelForward, LogitsAreBitIdenticalForAnyThreadCount) {
  VELA_REQUIRE_SHARED();
  auto model =
      Model::load(test::shared_path(std::string("models/") + GetParam() + ".gguf").string());
  ASSERT_TRUE(model.ok()) << model.message();
  for (KvType kv : {KvType::kF16, KvType::kQ8_0}) {
    const auto one = run_passes(*model, kv, 1);
    for (int32_t n_threads : {2, 3, 5}) {
      const std::string what =
          std::string(kv_type_name(kv)) + ", " + std::to_string(n_threads) + " threads";
      expect_bit_identical(one, run_passes(*model, kv, n_threads), what.c_str());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, ParallelForward,
    ::testing::Values("aidreams260K",           // multi-head, untied output
                      "tiny-llama-gqa",         // grouped-query heads, f32
                      "tiny-qwen2-bpe-F16",     // Q/K/V biases, neox rope
                      "tiny-llama-256-Q4_K_M",  // mixed types, Q8_K activations
                      "tiny-deepseek2-F32",     // latent attention, grouped sigmoid routing
                      "tiny-openai-moe-F32",    // sinks, output and expert biases
                      "tiny-qwen35-Q8_0"),      // DeltaNet: a checkpoint, then its restore
    [](const auto& info) {
      std::string n = info.param;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// One pool can serve two forward passes (used one after another, as an engine would).
TEST(ParallelForwardPool, SharedPoolGivesTheSameLogits) {
  VELA_REQUIRE_SHARED();
  auto model = Model::load(test::shared_path("models/tiny-llama-gqa.gguf").string());
  ASSERT_TRUE(model.ok()) << model.message();
  auto pool = std::make_shared<ThreadPool>(3);
  const auto own = run_passes(*model, KvType::kF16, 1);
  expect_bit_identical(own, run_passes(*model, KvType::kF16, 0, pool), "shared pool, first user");
  expect_bit_identical(own, run_passes(*model, KvType::kF16, 0, pool), "shared pool, second user");
  DecoderForward fwd(*model, ForwardOptions{}, pool);
  EXPECT_EQ(fwd.n_threads(), 3);
  EXPECT_EQ(fwd.options().n_threads, 3);
}

}  // namespace
}  // namespace vela

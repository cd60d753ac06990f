// Tensor parallelism in one process: each rank is a thread with its own slice of the model, KV
// cache and forward pass, meeting through an in-memory group. The sharded logits match the
// whole model's within float rounding (the partial products add in another order) and pick the
// same tokens; the MPI group (src/dist/) runs the same passes across processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/tensor_parallel.h"
#include "support/shared_data.h"
#include "support/thread_group.h"
#include "two_sequence_passes.h"

namespace vela {
namespace {

// Pipelines split the test's 43-token pass into micro-batches.
constexpr int32_t kMicroBatchTokens = 16;

ForwardOptions options(std::shared_ptr<TensorParallel> group = nullptr) {
  ForwardOptions o{64, 64, test::kTwoSeqBlock * test::kTwoSeqMaxBlocks, 1, 0};
  o.tensor_parallel = std::move(group);
  o.micro_batch_tokens = kMicroBatchTokens;
  return o;
}

KvCache make_cache(const Model& m) {
  const ModelConfig& c = m.config();
  return KvCache(KvCacheConfig{c.n_layer, c.n_head_kv, c.head_dim, test::kTwoSeqBlock,
                               test::kTwoSeqBlocks, KvType::kF16});
}

// The logits of run_two_sequence_passes with the model split over n_stages pipeline stages of
// n_ranks threads each.
std::vector<float> sharded_logits(const std::string& path, int32_t n_ranks, int32_t n_stages) {
  test::ThreadGroup group(n_ranks, n_stages);
  std::vector<float> logits;
  std::vector<std::thread> workers;
  for (int32_t w = 0; w < n_ranks * n_stages; ++w) {
    workers.emplace_back([&, w] {
      ModelLoadOptions lo;
      lo.shard = {w % n_ranks, n_ranks, w / n_ranks, n_stages};
      auto model = Model::load(path, lo);
      if (!model) {
        ADD_FAILURE() << "rank " << w << ": " << model.message();
        std::abort();  // the other ranks would wait at the barrier for ever
      }
      auto rank = std::make_shared<test::ThreadGroup::Rank>(group, w);
      DecoderForward fwd(*model, options(rank));
      KvCache cache = make_cache(**model);
      if (w == 0) {
        logits = test::run_two_sequence_passes(fwd, cache);
        rank->close();
      } else {
        const Status st = run_tensor_parallel_worker(fwd, cache, *rank);
        EXPECT_TRUE(st.ok()) << st.message();
      }
    });
  }
  for (std::thread& t : workers) t.join();
  return logits;
}

struct TpCase {
  const char* model;
  int32_t n_ranks;
  int32_t n_stages = 1;
};

class TensorParallelForward : public ::testing::TestWithParam<TpCase> {};

TEST_P(TensorParallelForward, MatchesTheWholeModel) {
  VELA_REQUIRE_SHARED();
  const std::string path =
      test::shared_path(std::string("models/") + GetParam().model + ".gguf").string();
  auto whole = Model::load(path);
  ASSERT_TRUE(whole.ok()) << whole.message();
  DecoderForward fwd(*whole, options());
  KvCache cache = make_cache(**whole);
  const std::vector<float> expected = test::run_two_sequence_passes(fwd, cache);
  const std::vector<float> got = sharded_logits(path, GetParam().n_ranks, GetParam().n_stages);
  ASSERT_EQ(got.size(), expected.size());
  if (GetParam().n_ranks == 1) {
    // Whole layers in stages compute every value as one process does (micro-batches included:
    // a token's values do not depend on the rest of its batch).
    EXPECT_EQ(got, expected);
    return;
  }
  const int32_t V = (*whole)->config().n_vocab;
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(expected[i]));
    max_diff = std::max(max_diff, std::fabs(expected[i] - got[i]));
  }
  // The reordered sums differ in the last bits, and where activations are quantized (Q8_0 and
  // Q4_0 weights take int8 activations) such a difference can flip the rounding of an
  // activation, a step of up to half a quantum, which a random-weight model's layers then grow:
  // measured up to 1.1e-3 of the largest logit with the packed int8 kernels and 1.3e-2 with the
  // scalar row-major ones (Q8_0). A wrong slice is off by more than the logits' scale (21-27
  // against a largest logit of 17, checked).
  const float bound = 3e-2f * max_abs;
  EXPECT_LE(max_diff, bound) << "largest logit " << max_abs;
  // Each row's pick is the whole model's best, or within the bound of it (a near-tie).
  for (size_t row = 0; row < got.size() / size_t(V); ++row) {
    const auto first = got.begin() + int64_t(row) * V;
    const size_t pick = size_t(std::max_element(first, first + V) - got.begin());
    const float best = *std::max_element(expected.begin() + int64_t(row) * V,
                                         expected.begin() + int64_t(row + 1) * V);
    EXPECT_GE(expected[pick], best - bound) << "row " << row;
  }
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, TensorParallelForward,
    ::testing::Values(TpCase{"tiny-llama-256-F32", 2}, TpCase{"tiny-llama-256-Q8_0", 2},
                      TpCase{"tiny-llama-256-Q4_0", 2},
                      TpCase{"tiny-llama-256-Q4_K_M", 2},  // columns kept whole (256-blocks)
                      TpCase{"tiny-llama-256-F16", 4},     // 2 KV heads over 4 ranks: replicated
                      TpCase{"tiny-llama-gqa", 2},         // tied output head
                      TpCase{"tiny-qwen2-bpe-F16", 2},     // Q/K/V biases
                      TpCase{"tiny-qwen3-Q8_0", 2},        // per-head Q/K norms
                      TpCase{"tiny-gemma2-F32", 2},        // post-norms, soft-caps, windows
                      TpCase{"tiny-phi3-F32", 2},          // fused QKV and gate/up
                      TpCase{"tiny-qwen3moe-Q8_0", 2},     // experts split over the ranks
                      TpCase{"tiny-qwen3moe-F32", 4},      // 2 experts a rank, KV replicated
                      TpCase{"tiny-mixtral-Q4_0", 2},      // 4 experts, 2 chosen per token
                      // Pipelines, alone and with tensor parallelism in each stage.
                      TpCase{"tiny-llama-256-Q8_0", 1, 2}, TpCase{"tiny-llama-gqa", 1, 2},
                      TpCase{"tiny-gemma3-Q4_0", 1, 3},  // one layer a stage
                      TpCase{"tiny-phi3-F32", 1, 2}, TpCase{"tiny-qwen3moe-Q8_0", 1, 2},
                      TpCase{"tiny-llama-256-Q4_K_M", 2, 2}, TpCase{"tiny-llama-gqa", 2, 2},
                      TpCase{"tiny-qwen3moe-F32", 2, 2}),
    [](const auto& info) {
      std::string name = std::string(info.param.model) + "_x" + std::to_string(info.param.n_ranks);
      if (info.param.n_stages > 1) name += "_pp" + std::to_string(info.param.n_stages);
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(TensorShard, StagesSplitLayersLaterStagesTakingTheExtra) {
  const std::vector<std::pair<int32_t, int32_t>> want = {{0, 7}, {7, 7}, {14, 8}};
  for (int32_t s = 0; s < 3; ++s) {
    const auto layers = stage_layers(22, s, 3);
    ASSERT_TRUE(layers) << layers.message();
    EXPECT_EQ(layers->begin, want[size_t(s)].first) << "stage " << s;
    EXPECT_EQ(layers->count, want[size_t(s)].second) << "stage " << s;
  }
  EXPECT_EQ(most_stage_layers(22, 3), 8);
  EXPECT_EQ(most_stage_layers(22, 1), 22);
  EXPECT_EQ(most_stage_layers(3, 2), 2);
  EXPECT_EQ(most_stage_layers(4, 2), 2);
  EXPECT_FALSE(stage_layers(3, 0, 4));
  EXPECT_FALSE(stage_layers(8, 2, 2));
  EXPECT_EQ(most_stage_layers(3, 4), 3);  // no split: the whole model
}

TEST(TensorShard, RangesSplitHeadsFfnAndVocabulary) {
  ModelConfig c;
  static const ArchDescription arch{};
  c.arch = &arch;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.head_dim = 32;
  c.n_ff = 768;
  c.n_vocab = 1000;
  c.n_layer = 4;
  auto r = shard_ranges(c, {1, 2}, 32, 256);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->head_begin, 4);
  EXPECT_EQ(r->n_head, 4);
  EXPECT_EQ(r->kv_head_begin, 1);
  EXPECT_EQ(r->n_head_kv, 1);
  EXPECT_EQ(r->ff_begin, 384);
  EXPECT_FALSE(r->replicated_attn_output);
  EXPECT_TRUE(r->replicated_ffn_down);  // 384 columns are not whole 256-column blocks
  EXPECT_EQ(r->vocab_begin, 496);       // 63 groups of 16 split 31 / 32
  EXPECT_EQ(r->n_vocab, 504);
  // Four ranks over two KV heads: ranks 0-1 share KV head 0, ranks 2-3 KV head 1.
  for (int32_t rank = 0; rank < 4; ++rank) {
    auto q = shard_ranges(c, {rank, 4}, 32, 32);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->kv_head_begin, rank / 2);
    EXPECT_EQ(q->n_head_kv, 1);
    EXPECT_EQ(q->head_begin / (c.n_head / c.n_head_kv), q->kv_head_begin);
  }
  const auto error = [&](const TensorShard& s) {
    auto e = shard_ranges(c, s, 32, 32);
    return e.ok() ? std::string() : e.message();
  };
  EXPECT_NE(error({0, 3}).find("8 attention heads do not split over 3 ranks"), std::string::npos);
  // Pipeline stages: contiguous layers; of 5 layers, stage 1 of 2 holds layers 2-4.
  c.n_layer = 5;
  c.layers.resize(5);
  auto stage = shard_ranges(c, {1, 2, 1, 2}, 32, 32);
  ASSERT_TRUE(stage.ok()) << stage.message();
  EXPECT_EQ(stage->layer_begin, 2);
  EXPECT_EQ(stage->n_layer, 3);
  EXPECT_EQ(shard_config(c, *stage).n_layer, 3);
  EXPECT_NE(error({0, 1, 0, 6}).find("5 layers do not split over 6 pipeline stages"),
            std::string::npos);
  EXPECT_NE(error({2, 2}).find("outside"), std::string::npos);
  c.n_head_kv = 3;
  c.n_head = 12;
  EXPECT_NE(error({0, 2}).find("KV heads"), std::string::npos);
}

TEST(BatchMessage, RoundTripsAndRejectsMalformedMessages) {
  const std::vector<int32_t> ids = {3, 4, 5}, pos = {0, 1, 0}, seq = {0, 0, 1};
  const std::vector<int32_t> table = {1, -1, 2, -1}, logits = {1, 2};
  BatchMessage m;
  const std::vector<int32_t> hidden = {0};
  m.encode(ForwardBatch{ids, pos, seq, table, 2, logits, hidden});
  auto b = BatchMessage::decode(m.words());
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(std::vector<int32_t>(b->token_ids.begin(), b->token_ids.end()), ids);
  EXPECT_EQ(std::vector<int32_t>(b->block_tables.begin(), b->block_tables.end()), table);
  EXPECT_EQ(b->max_blocks_per_seq, 2);
  EXPECT_EQ(std::vector<int32_t>(b->logits_indices.begin(), b->logits_indices.end()), logits);
  EXPECT_EQ(std::vector<int32_t>(b->hidden_indices.begin(), b->hidden_indices.end()), hidden);
  std::vector<int32_t> words = m.words();
  words.pop_back();
  EXPECT_FALSE(BatchMessage::decode(words).ok());
  words = m.words();
  words[0] = -1;
  EXPECT_FALSE(BatchMessage::decode(words).ok());
  EXPECT_FALSE(BatchMessage::decode(std::span<const int32_t>(words.data(), 2)).ok());
}

}  // namespace
}  // namespace vela

// Tensor parallelism in one process: each rank is a thread with its own slice of the model, KV
// cache and forward pass, meeting through an in-memory group. The sharded logits match the
// whole model's within float rounding (the partial products add in another order) and pick the
// same tokens; the MPI group (src/dist/) runs the same passes across processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "io/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/tensor_parallel.h"
#include "quant/quantize.h"
#include "qwen3next_copy.h"
#include "support/shared_data.h"
#include "support/thread_group.h"
#include "two_sequence_passes.h"

namespace vela {
namespace {

// Pipelines split the test's 43-token pass into micro-batches.
constexpr int32_t kMicroBatchTokens = 16;

// expanded: latent attention's expanded form (the passes with each sequence's tokens together)
// for the first pass's 37-token run of A from
// position 0 (37 >= 2 * 15), not for B's 6 tokens, nor for either part of A's run a pipeline's
// micro-batches would hold (21 tokens from 0, 16 from 21): a run keeps its whole pass's form.
ForwardOptions options(std::shared_ptr<TensorParallel> group = nullptr, bool expanded = false) {
  ForwardOptions o{64, 64, test::kTwoSeqBlock * test::kTwoSeqMaxBlocks, 1, 0};
  o.tensor_parallel = std::move(group);
  if (expanded) o.latent_expanded_min_tokens = 15;
  o.micro_batch_tokens = kMicroBatchTokens;
  return o;
}

// The cache of one rank: its stage's layers, its KV heads (latent attention: the whole
// compressed row, K only, on every rank).
KvCache make_cache(const Model& m) {
  return KvCache(model_cache_config(m.config(), test::kTwoSeqBlock, test::kTwoSeqBlocks,
                                    KvType::kF16, test::kTwoSeqStateSlots));
}

// The logits of run_two_sequence_passes with the model split over n_stages pipeline stages of
// n_ranks threads each.
std::vector<float> sharded_logits(const std::string& path, int32_t n_ranks, int32_t n_stages,
                                  bool expanded) {
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
      DecoderForward fwd(*model, options(rank, expanded));
      KvCache cache = make_cache(**model);
      if (w == 0) {
        logits = test::run_two_sequence_passes(fwd, cache, expanded);
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
  bool expanded = false;  // latent attention's expanded form (options())
};

class TensorParallelForward : public ::testing::TestWithParam<TpCase> {};

// The logits of the model at `path` split over n_ranks ranks in each of n_stages stages against
// one process's.
void expect_matches_whole_model(const std::string& path, int32_t n_ranks, int32_t n_stages,
                                bool expanded = false) {
  auto whole = Model::load(path);
  ASSERT_TRUE(whole.ok()) << whole.message();
  DecoderForward fwd(*whole, options(nullptr, expanded));
  KvCache cache = make_cache(**whole);
  const std::vector<float> expected = test::run_two_sequence_passes(fwd, cache, expanded);
  const std::vector<float> got = sharded_logits(path, n_ranks, n_stages, expanded);
  ASSERT_EQ(got.size(), expected.size());
  if (n_ranks == 1) {
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

TEST_P(TensorParallelForward, MatchesTheWholeModel) {
  VELA_REQUIRE_SHARED();
  expect_matches_whole_model(
      test::shared_path(std::string("models/") + GetParam().model + ".gguf").string(),
      GetParam().n_ranks, GetParam().n_stages, GetParam().expanded);
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
                      // Latent attention (2 heads a rank; the latent row computed and cached
                      // whole on each), a leading dense layer, shared expert split by columns,
                      // 4 experts a rank routed by sigmoid scores in groups.
                      TpCase{"tiny-deepseek2-F32", 2},
                      TpCase{"tiny-deepseek2-F32", 4},  // one head, two experts a rank
                      // Sinks of a rank's heads, the output bias added once after the sum,
                      // expert biases with their experts.
                      TpCase{"tiny-openai-moe-F32", 2},
                      TpCase{"tiny-qwen2moe-F32", 2},  // shared expert gated by sigmoid
                      // Partial RoPE, Q/K norms and biases, a dense layer, an ungated shared
                      // expert; the next-token-prediction layer's tensors are never read.
                      TpCase{"tiny-glm4moe-F32", 2}, TpCase{"tiny-glm4moe-F32", 1, 3},
                      // Pipelines, alone and with tensor parallelism in each stage.
                      TpCase{"tiny-llama-256-Q8_0", 1, 2}, TpCase{"tiny-llama-gqa", 1, 2},
                      TpCase{"tiny-gemma3-Q4_0", 1, 3},  // one layer a stage
                      TpCase{"tiny-phi3-F32", 1, 2}, TpCase{"tiny-qwen3moe-Q8_0", 1, 2},
                      TpCase{"tiny-deepseek2-F32", 1, 3},  // the dense layer, then MoE ones
                      TpCase{"tiny-llama-256-Q4_K_M", 2, 2}, TpCase{"tiny-llama-gqa", 2, 2},
                      TpCase{"tiny-qwen3moe-F32", 2, 2},
                      TpCase{"tiny-deepseek2-F32", 2, 2},  // a dense stage, an MoE one
                      // The expanded form beside the absorbed one: each rank's heads of k_b_t;
                      // a run cut into two micro-batches keeps the form of its whole pass.
                      TpCase{"tiny-deepseek2-F32", 2, 1, true},
                      TpCase{"tiny-deepseek2-F32", 1, 3, true},
                      // Gated DeltaNet by key heads: states, checkpoints and copies on each rank
                      TpCase{"tiny-qwen35-F32", 2}, TpCase{"tiny-qwen35-Q8_0", 1, 3},
                      TpCase{"tiny-qwen35-Q8_0", 2, 2},
                      TpCase{"tiny-qwen35moe-Q4_K_M", 2}),  // ssm_out kept whole (256-blocks)
    [](const auto& info) {
      std::string name = std::string(info.param.model) + "_x" + std::to_string(info.param.n_ranks);
      if (info.param.n_stages > 1) name += "_pp" + std::to_string(info.param.n_stages);
      if (info.param.expanded) name += "_expanded";
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
  auto r = shard_ranges(c, {1, 2}, 32, 256, 1);
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
    auto q = shard_ranges(c, {rank, 4}, 32, 32, 1);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->kv_head_begin, rank / 2);
    EXPECT_EQ(q->n_head_kv, 1);
    EXPECT_EQ(q->head_begin / (c.n_head / c.n_head_kv), q->kv_head_begin);
  }
  const auto error = [&](const TensorShard& s) {
    auto e = shard_ranges(c, s, 32, 32, 1);
    return e.ok() ? std::string() : e.message();
  };
  EXPECT_NE(error({0, 3}).find("8 attention heads do not split over 3 ranks"), std::string::npos);
  // Pipeline stages: contiguous layers; of 5 layers, stage 1 of 2 holds layers 2-4.
  c.n_layer = 5;
  c.layers.resize(5);
  auto stage = shard_ranges(c, {1, 2, 1, 2}, 32, 32, 1);
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

// deepseek2's shape: latent attention (one shared KV row), a leading dense layer, then
// mixtures of experts beside a shared expert.
ModelConfig latent_moe_config() {
  ModelConfig c;
  static const ArchDescription arch{};
  c.arch = &arch;
  c.arch_name = "deepseek2";
  c.n_head = 4;
  c.n_head_kv = 1;
  c.mla.kv_lora_rank = 64;
  c.mla.rope_dim = 16;
  c.mla.nope_dim = 32;
  c.mla.v_head_dim = 32;
  c.head_dim = c.mla.cache_dim();
  c.n_ff = 256;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_expert = 64;
  c.n_ff_shared_expert = 64;
  c.n_vocab = 512;
  c.n_layer = 3;
  c.layers.resize(3);
  c.layers[1].moe = c.layers[2].moe = true;
  return c;
}

TEST(TensorShard, LatentMoeSplitsHeadsDenseLayersExpertsAndTheSharedExpert) {
  const ModelConfig c = latent_moe_config();
  auto r = shard_ranges(c, {1, 2}, 32, 32, 32);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->head_begin, 2);
  EXPECT_EQ(r->n_head, 2);
  EXPECT_EQ(r->kv_head_begin, 0);  // the one latent row, on every rank
  EXPECT_EQ(r->n_head_kv, 1);
  EXPECT_EQ(r->ff_begin, 128);  // the leading dense layer's FFN
  EXPECT_EQ(r->n_ff, 128);
  EXPECT_EQ(r->expert_begin, 4);
  EXPECT_EQ(r->n_expert, 4);
  EXPECT_EQ(r->shared_ff_begin, 32);
  EXPECT_EQ(r->n_shared_ff, 32);
  EXPECT_FALSE(r->replicated_shared_expert);
  // Two heads' values (2 * 32 columns) are whole 32-column blocks; the cache row's width (2 * 80)
  // would not be.
  EXPECT_FALSE(r->replicated_attn_output);
  const ModelConfig local = shard_config(c, *r);
  EXPECT_EQ(local.n_head, 2);
  EXPECT_EQ(local.n_head_kv, 1);
  EXPECT_EQ(local.head_dim, c.head_dim);
  EXPECT_EQ(local.n_ff, 128);
  EXPECT_EQ(local.n_ff_shared_expert, 32);
  EXPECT_EQ(local.n_ff_expert, 64);
  // Over 4 ranks, 16 shared-expert columns a rank are not whole 32-column blocks: the shared
  // expert stays whole on every rank; one head's 32 value columns still split.
  auto q = shard_ranges(c, {3, 4}, 32, 32, 32);
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_TRUE(q->replicated_shared_expert);
  EXPECT_EQ(q->shared_ff_begin, 0);
  EXPECT_EQ(q->n_shared_ff, 64);
  EXPECT_EQ(shard_config(c, *q).n_ff_shared_expert, 64);
  EXPECT_FALSE(q->replicated_attn_output);
  EXPECT_FALSE(q->replicated_ffn_down);
  EXPECT_TRUE(shard_ranges(c, {3, 4}, 64, 32, 1)->replicated_attn_output);
  // A shared-expert width that does not divide stays whole too, rather than refusing.
  ModelConfig odd = c;
  odd.n_ff_shared_expert = 90;
  auto o = shard_ranges(odd, {0, 4}, 1, 1, 1);
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_TRUE(o->replicated_shared_expert);
  // A dense layer whose width does not divide still refuses.
  ModelConfig narrow = c;
  narrow.n_ff = 250;
  auto n = shard_ranges(narrow, {0, 4}, 1, 1, 1);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.message().find("FFN width 250"), std::string::npos) << n.message();
  // Without dense layers, the FFN width is not split (nor checked).
  ModelConfig all_moe = narrow;
  for (LayerConfig& l : all_moe.layers) l.moe = true;
  auto m = shard_ranges(all_moe, {0, 4}, 1, 1, 1);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->n_ff, 0);
  EXPECT_EQ(shard_config(all_moe, *m).n_ff, 250);
  // Pipeline stages of latent attention: the stage's layers, whole.
  auto stage = shard_ranges(c, {0, 1, 1, 2}, 32, 32, 32);
  ASSERT_TRUE(stage.ok()) << stage.message();
  EXPECT_EQ(stage->layer_begin, 1);
  EXPECT_EQ(stage->n_layer, 2);
  EXPECT_EQ(stage->n_head, 4);
  EXPECT_EQ(stage->n_shared_ff, 64);
}

// Gated DeltaNet splits by key heads, each rank taking the value heads that read its own (value
// head h reads key head h % n_k_heads): a rank's value heads are a run per j of h = j * n_k + k.
TEST(TensorShard, RecurrentLayersSplitByKeyHeads) {
  ModelConfig c = latent_moe_config();
  c.mla = {};
  c.head_dim = 32;
  c.arch_name = "qwen35moe";
  c.n_state_layers = 1;
  c.layers[0].mixer = MixerKind::kGatedDeltaNet;
  c.delta_net = {
      .n_k_heads = 4, .n_v_heads = 8, .head_k_dim = 32, .head_v_dim = 64, .conv_kernel = 4};
  auto r = shard_ranges(c, {1, 2}, 1, 1, 1, 32);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->delta_k_head_begin, 2);
  EXPECT_EQ(r->n_delta_k_heads, 2);
  EXPECT_EQ(r->n_delta_v_heads, 4);
  EXPECT_FALSE(r->replicated_delta_out);  // runs of 2 heads of 64 columns: whole 32-blocks
  const std::vector<IndexRun> runs = delta_value_head_runs(c.delta_net, *r);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].begin, 2);  // global heads 2, 3 read key heads 2, 3; so do 6, 7
  EXPECT_EQ(runs[0].count, 2);
  EXPECT_EQ(runs[1].begin, 6);
  EXPECT_EQ(runs[1].count, 2);
  const ModelConfig local = shard_config(c, *r);
  EXPECT_EQ(local.delta_net.n_k_heads, 2);
  EXPECT_EQ(local.delta_net.n_v_heads, 4);
  EXPECT_EQ(local.delta_net.state_floats() * 2, c.delta_net.state_floats());
  // 4 ranks: one key head's 64 columns are not a whole 256-column block.
  auto four = shard_ranges(c, {3, 4}, 1, 1, 1, 256);
  ASSERT_TRUE(four.ok()) << four.message();
  EXPECT_TRUE(four->replicated_delta_out);
  EXPECT_EQ(delta_value_head_runs(c.delta_net, *four)[1].begin, 7);
  // Key heads that do not divide among the ranks, and whole layers in pipeline stages.
  c.n_expert = 8;
  c.delta_net.n_k_heads = 2;
  c.delta_net.n_v_heads = 4;
  auto bad = shard_ranges(c, {0, 4}, 1, 1, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("2 DeltaNet key heads (serving 4 value heads) do not split over 4"),
            std::string::npos)
      << bad.message();
  auto stage = shard_ranges(c, {0, 1, 1, 2}, 1, 1, 1);
  ASSERT_TRUE(stage.ok()) << stage.message();
  EXPECT_EQ(stage->n_delta_v_heads, 4);
}

// A copy of tiny-deepseek2 (all F32) written to `path`, in one of two forms:
// - q8_0: its matrices in Q8_0 (the router and the 1-D tensors stay f32), so that the per-head
//   stacks, q_b and the output head are repacked after slicing and the column slices are whole
//   32-column blocks;
// - lite: DeepSeek-V2-Lite's query, one random attn_q [n_head * key_dim, n_embd] instead of
//   attn_q_a, its norm and attn_q_b.
void write_deepseek2_copy(const GgufFile& src, const std::string& path, bool q8_0, bool lite) {
  const std::string q_lora_key = "deepseek2.attention.q_lora_rank";
  GgufWriter w;
  for (const auto& [key, value] : src.metadata())
    if (key != "general.file_type" && !(lite && key == q_lora_key)) w.add_value(key, value);
  w.add_u32("general.file_type", q8_0 ? 7 : 0);  // MOSTLY_Q8_0 or ALL_F32
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.35f);  // about 4 / sqrt(n_embd)
  for (const GgufTensorInfo& t : src.tensors()) {
    const std::string_view name = t.name;
    ASSERT_EQ(t.ggml_type(), GgmlType::F32) << name;
    const bool q_lora_tensor = name.find(".attn_q_a") != std::string_view::npos ||
                               name.find(".attn_q_b.") != std::string_view::npos;
    if (lite && q_lora_tensor) {
      if (name.ends_with("attn_q_b.weight")) {  // [q_lora_rank, n_head * key_dim]
        const std::string q_name =
            std::string(name.substr(0, name.size() - std::string_view("attn_q_b.weight").size())) +
            "attn_q.weight";
        const std::vector<int64_t> ne = {128, t.ne[1]};  // [n_embd, n_head * key_dim]
        std::vector<float> q(size_t(ne[0] * ne[1]));
        for (float& x : q) x = normal(rng);
        const auto* bytes = reinterpret_cast<const uint8_t*>(q.data());
        ASSERT_TRUE(
            w.add_tensor(q_name, GgmlType::F32, ne, {bytes, bytes + q.size() * sizeof(float)})
                .ok());
      }
      continue;
    }
    const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    const bool keep = !q8_0 || t.n_dims < 2 || name.find("ffn_gate_inp") != std::string_view::npos;
    if (keep) {
      ASSERT_TRUE(w.add_tensor(name, t.ggml_type(), ne, {t.data, t.data + t.n_bytes}).ok());
      continue;
    }
    ASSERT_EQ(t.ne[0] % 32, 0) << name;
    const int64_t rows = t.n_elements() / t.ne[0];
    const int64_t row_q = t.ne[0] / 32 * 34;
    std::vector<uint8_t> q(size_t(rows * row_q));
    const auto* f = reinterpret_cast<const float*>(t.data);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(GgmlType::Q8_0, f + r * t.ne[0], q.data() + r * row_q, t.ne[0]);
    ASSERT_TRUE(w.add_tensor(name, GgmlType::Q8_0, ne, q).ok());
  }
  ASSERT_TRUE(w.write_file(path).ok());
}

TEST(TensorParallelLatentAttention, QuantizedSplitsOrKeepsTheSharedExpertWhole) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/tiny-deepseek2-F32.gguf").string());
  ASSERT_TRUE(src.ok()) << src.message();
  const std::string path = test::unique_temp_path("tiny-deepseek2-Q8_0.gguf");
  write_deepseek2_copy(*src, path, /*q8_0=*/true, /*lite=*/false);
  if (HasFatalFailure()) return;
  for (const int32_t n_ranks : {2, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(n_ranks));
    // 32 shared-expert columns a rank of 2 are one Q8_0 block; 16 of 4 are not: kept whole.
    ModelLoadOptions lo;
    lo.shard = {n_ranks - 1, n_ranks};
    auto rank = Model::load(path, lo);
    ASSERT_TRUE(rank.ok()) << rank.message();
    const ShardRanges& r = (*rank)->weights().shard;
    EXPECT_EQ(r.replicated_shared_expert, n_ranks == 4);
    EXPECT_FALSE(r.replicated_attn_output);
    EXPECT_FALSE(r.replicated_ffn_down);
    const LayerWeights& moe_layer = (*rank)->weights().layers[1];
    EXPECT_EQ(moe_layer.shared_expert.down.n_cols, n_ranks == 4 ? 64 : 32);
    EXPECT_EQ(moe_layer.mla.k_b.n_rows, 4 / n_ranks * 64);
    EXPECT_EQ(moe_layer.wo.n_cols, 4 / n_ranks * 32);
    expect_matches_whole_model(path, n_ranks, 1);
  }
}

// Qwen3-Next's value heads are grouped by key head: a rank's are one run (delta_value_head_runs),
// its rows of the fused projections the same heads' rows.
TEST(TensorParallelQwen3Next, GroupedValueHeadsSplitByKeyHeads) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/tiny-qwen35moe-F32.gguf").string());
  ASSERT_TRUE(src.ok()) << src.message();
  const std::string path = test::unique_temp_path("tiny-qwen3next-F32.gguf");
  {
    const std::vector<uint8_t> image = test::qwen3next_copy(*src);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(image.data(), 1, image.size(), f), image.size());
    std::fclose(f);
  }
  ModelLoadOptions lo;
  lo.shard = {1, 2};
  auto rank = Model::load(path, lo);
  ASSERT_TRUE(rank.ok()) << rank.message();
  const std::vector<IndexRun> runs =
      delta_value_head_runs((*rank)->whole_config().delta_net, (*rank)->weights().shard);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].begin, 2);  // key head 1 of 2 serves value heads 2 and 3
  EXPECT_EQ(runs[0].count, 2);
  expect_matches_whole_model(path, 2, 1);
  expect_matches_whole_model(path, 1, 2);
}

TEST(BatchMessage, RoundTripsAndRejectsMalformedMessages) {
  const std::vector<int32_t> ids = {3, 4, 5}, pos = {0, 1, 0}, seq = {0, 0, 1};
  const std::vector<int32_t> table = {1, -1, 2, -1}, logits = {1, 2};
  const std::vector<int32_t> hidden = {0}, slots = {4, 2};
  const std::vector<StateCheckpointWrite> checkpoints = {{0, 1, 7}, {1, 1, 8}};
  const std::vector<StateCopy> copies = {{6, 4}};
  BatchMessage m;
  ForwardBatch sent{ids, pos, seq, table, 2, logits, hidden, slots, checkpoints};
  sent.state_copies = copies;
  m.encode(sent);
  BatchMessage received;
  auto b = received.decode(m.words());
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(std::vector<int32_t>(b->token_ids.begin(), b->token_ids.end()), ids);
  EXPECT_EQ(std::vector<int32_t>(b->block_tables.begin(), b->block_tables.end()), table);
  EXPECT_EQ(b->max_blocks_per_seq, 2);
  EXPECT_EQ(std::vector<int32_t>(b->logits_indices.begin(), b->logits_indices.end()), logits);
  EXPECT_EQ(std::vector<int32_t>(b->hidden_indices.begin(), b->hidden_indices.end()), hidden);
  EXPECT_EQ(std::vector<int32_t>(b->state_slots.begin(), b->state_slots.end()), slots);
  ASSERT_EQ(b->state_checkpoints.size(), 2u);
  EXPECT_EQ(b->state_checkpoints[1].seq, 1);
  EXPECT_EQ(b->state_checkpoints[1].position, 1);
  EXPECT_EQ(b->state_checkpoints[1].slot, 8);
  ASSERT_EQ(b->state_copies.size(), 1u);
  EXPECT_EQ(b->state_copies[0].from, 6);
  EXPECT_EQ(b->state_copies[0].to, 4);
  std::vector<int32_t> words = m.words();
  words.pop_back();
  EXPECT_FALSE(received.decode(words).ok());
  words = m.words();
  words[0] = -1;
  EXPECT_FALSE(received.decode(words).ok());
  words = m.words();
  words[7] = 2;  // a second copy the message does not hold
  EXPECT_FALSE(received.decode(words).ok());
  EXPECT_FALSE(received.decode(std::span<const int32_t>(words.data(), 2)).ok());
}

// The Lite form's attn_q splits by heads as attn_q_b does.
TEST(TensorParallelLatentAttention, LiteFormSplitsItsQueryByHeads) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/tiny-deepseek2-F32.gguf").string());
  ASSERT_TRUE(src.ok()) << src.message();
  const std::string path = test::unique_temp_path("tiny-deepseek2-lite-F32.gguf");
  write_deepseek2_copy(*src, path, /*q8_0=*/false, /*lite=*/true);
  if (HasFatalFailure()) return;
  ModelLoadOptions lo;
  lo.shard = {1, 2};
  auto rank = Model::load(path, lo);
  ASSERT_TRUE(rank.ok()) << rank.message();
  const LatentAttentionWeights& mw = (*rank)->weights().layers[0].mla;
  EXPECT_EQ((*rank)->config().mla.q_lora_rank, 0);
  EXPECT_EQ(mw.q_b.data, nullptr);
  EXPECT_EQ(mw.q.n_rows, 2 * 48);
  EXPECT_EQ(mw.q.n_cols, 128);
  for (const int32_t n_ranks : {2, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(n_ranks));
    expect_matches_whole_model(path, n_ranks, 1);
  }
}

}  // namespace
}  // namespace vela

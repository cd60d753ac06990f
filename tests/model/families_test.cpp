// The newer model families through the one forward pass: batched and chunked prefill give each
// sequence the logits it gets alone (bit for bit, windowed layers and mixtures of experts
// included), experts no token chooses are never multiplied, and malformed files of these
// families are clear errors.
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model_rewrite.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr int32_t kBlock = 16;
constexpr int32_t kMaxBlocks = 8;

std::shared_ptr<const Model> load_shared(const std::string& name) {
  auto m = Model::load(test::shared_path("models/" + name + ".gguf").string());
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

KvCache make_cache(const Model& m) {
  return KvCache(model_cache_config(m.config(), kBlock, 32, KvType::kF16));
}

// One forward call: tokens [first, first + n) of each listed sequence, in turn or interleaved.
struct Piece {
  int32_t seq;  // row of the block table
  const std::vector<int32_t>* tokens;
  int32_t first, n;
};

// Logits of every token of the pieces, keyed by (seq, position).
std::map<std::pair<int32_t, int32_t>, std::vector<float>> run(DecoderForward& fwd, KvCache& cache,
                                                              const std::vector<int32_t>& table,
                                                              const std::vector<Piece>& pieces,
                                                              bool interleave) {
  std::vector<int32_t> ids, pos, seq;
  std::vector<int32_t> taken(pieces.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t p = 0; p < pieces.size(); ++p) {
      const int32_t take = interleave ? 1 : pieces[p].n;
      for (int32_t k = 0; k < take && taken[p] < pieces[p].n; ++k, ++taken[p]) {
        const int32_t at = pieces[p].first + taken[p];
        ids.push_back((*pieces[p].tokens)[size_t(at)]);
        pos.push_back(at);
        seq.push_back(pieces[p].seq);
      }
      more |= taken[p] < pieces[p].n;
    }
  }
  std::vector<int32_t> want(ids.size());
  std::iota(want.begin(), want.end(), 0);
  const size_t V = size_t(fwd.model().config().n_vocab);
  std::vector<float> logits(ids.size() * V);
  const Status st =
      fwd.forward(ForwardBatch{ids, pos, seq, table, kMaxBlocks, want}, cache, logits);
  EXPECT_TRUE(st.ok()) << st.message();
  std::map<std::pair<int32_t, int32_t>, std::vector<float>> out;
  for (size_t i = 0; i < ids.size(); ++i)
    out[{seq[i], pos[i]}] =
        std::vector<float>(logits.begin() + long(i * V), logits.begin() + long((i + 1) * V));
  return out;
}

std::vector<int32_t> prompt(size_t n, int32_t salt) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int32_t(3 + (i * 37 + size_t(salt) * 101) % 500);
  return t;
}

class Families : public ::testing::TestWithParam<const char*> {};

// 30 tokens cross the 8-position windows of the gemma files several times; the MoE files route
// the tokens of the two sequences to overlapping and to disjoint experts alike; deepseek2 runs
// its latent attention over a K-only cache, per-head products of every batch size.
TEST_P(Families, BatchedAndChunkedPrefillMatchEachSequenceAlone) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared(GetParam());
  ASSERT_TRUE(model);
  DecoderForward fwd(model, ForwardOptions{64, 64, kBlock * kMaxBlocks, 2, 0});
  const std::vector<int32_t> a = prompt(30, 1), b = prompt(22, 2);
  // Alone: one pass each, blocks in order.
  std::vector<int32_t> table(2 * kMaxBlocks, -1);
  for (int32_t i = 0; i < kMaxBlocks; ++i) table[size_t(i)] = i;
  KvCache alone_cache = make_cache(*model);
  auto alone_a = run(fwd, alone_cache, table, {{0, &a, 0, 30}}, false);
  alone_cache = make_cache(*model);
  auto alone_b = run(fwd, alone_cache, table, {{0, &b, 0, 22}}, false);

  // Together, chunked 11 + 19 and 9 + 13, interleaved, in scattered blocks.
  std::vector<int32_t> scattered(2 * kMaxBlocks, -1);
  const int32_t blocks_a[] = {9, 3}, blocks_b[] = {14, 6};
  for (int i = 0; i < 2; ++i) {
    scattered[size_t(i)] = blocks_a[i];
    scattered[size_t(kMaxBlocks + i)] = blocks_b[i];
  }
  KvCache cache = make_cache(*model);
  auto first = run(fwd, cache, scattered, {{0, &a, 0, 11}, {1, &b, 0, 9}}, true);
  auto second = run(fwd, cache, scattered, {{1, &b, 9, 13}, {0, &a, 11, 19}}, false);
  first.merge(second);
  for (const auto& [key, logits] : first) {
    const auto& ref = key.first == 0 ? alone_a.at({0, key.second}) : alone_b.at({0, key.second});
    ASSERT_EQ(logits, ref) << GetParam() << " seq " << key.first << " position " << key.second;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, Families,
                         ::testing::Values("tiny-qwen3-Q8_0", "tiny-qwen3-yarn-F32",
                                           "tiny-qwen3moe-Q4_K_M", "tiny-mixtral-Q4_0",
                                           "tiny-olmoe-F32", "tiny-gemma2-F32", "tiny-gemma3-Q4_0",
                                           "tiny-phi3-F32", "tiny-deepseek2-F32",
                                           "tiny-qwen2moe-F32", "tiny-glm4moe-F32",
                                           "tiny-openai-moe-F32", "tiny-gemma4-Q4_0",
                                           "tiny-gemma4moe-F32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(MixtureOfExperts, ExpertsNoTokenChoosesAreNeverMultiplied) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared("tiny-qwen3moe-Q8_0");
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.n_expert, 8);
  ASSERT_EQ(c.n_expert_used, 2);
  DecoderForward fwd(model, ForwardOptions{64, 64, kBlock * kMaxBlocks, 2, 0});
  ASSERT_NE(fwd.moe(), nullptr);
  std::vector<int32_t> table(kMaxBlocks, -1);
  for (int32_t i = 0; i < kMaxBlocks; ++i) table[size_t(i)] = i;
  KvCache cache = make_cache(*model);
  const std::vector<int32_t> tokens = prompt(6, 3);
  const size_t n_counters = size_t(c.n_layer) * size_t(c.n_expert);
  for (int32_t t = 0; t < 6; ++t) {
    const std::vector<int64_t> runs_before(fwd.moe()->expert_runs().begin(),
                                           fwd.moe()->expert_runs().end());
    const std::vector<int64_t> tokens_before(fwd.moe()->expert_tokens().begin(),
                                             fwd.moe()->expert_tokens().end());
    run(fwd, cache, table, {{0, &tokens, t, 1}}, false);  // one decode token
    for (int32_t l = 0; l < c.n_layer; ++l) {
      int n_run = 0, n_routed = 0;
      for (int32_t e = 0; e < c.n_expert; ++e) {
        const size_t i = size_t(l * c.n_expert + e);
        const int64_t ran = fwd.moe()->expert_runs()[i] - runs_before[i];
        const int64_t routed = fwd.moe()->expert_tokens()[i] - tokens_before[i];
        EXPECT_EQ(ran, routed > 0 ? 1 : 0) << "layer " << l << " expert " << e;
        n_run += int(ran);
        n_routed += int(routed);
      }
      EXPECT_EQ(n_run, 2) << "one token reads exactly its two experts, layer " << l;
      EXPECT_EQ(n_routed, 2);
    }
  }
  // A 6-token prefill runs each chosen expert once for all of its tokens.
  KvCache cache2 = make_cache(*model);
  const std::vector<int64_t> runs_before(fwd.moe()->expert_runs().begin(),
                                         fwd.moe()->expert_runs().end());
  run(fwd, cache2, table, {{0, &tokens, 0, 6}}, false);
  for (size_t i = 0; i < n_counters; ++i)
    EXPECT_LE(fwd.moe()->expert_runs()[i] - runs_before[i], 1);
}

TEST(ModelLoad, ClearErrorsForBadFilesOfTheNewFamilies) {
  VELA_REQUIRE_SHARED();
  const auto load = [](const std::string& name,
                       const std::vector<std::pair<std::string, int64_t>>& set,
                       const std::vector<std::string>& drop = {}) -> std::string {
    auto src = GgufFile::open(test::shared_path("models/" + name + ".gguf").string());
    EXPECT_TRUE(src.ok());
    auto g = GgufFile::from_bytes(test::rewrite_model(*src, set, drop));
    if (!g) return g.message();
    auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
    return m ? "" : m.message();
  };
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  std::string e = load("tiny-qwen3moe-Q8_0", {{"qwen3moe.expert_used_count", 9}});
  EXPECT_TRUE(has(e, "expert_used_count' = 9 must be in [1, expert_count = 8]")) << e;
  e = load("tiny-qwen3moe-Q8_0", {}, {"blk.1.ffn_up_exps.weight"});
  EXPECT_TRUE(has(e, "missing tensor 'blk.1.ffn_up_exps.weight'")) << e;
  e = load("tiny-qwen3moe-Q8_0", {}, {"qwen3moe.expert_count"});
  EXPECT_TRUE(has(e, "missing metadata 'qwen3moe.expert_count'")) << e;
  e = load("tiny-mixtral-F32", {{"llama.expert_count", 6}});  // tensors hold 4 experts
  EXPECT_TRUE(has(e, "blk.0.ffn_gate_inp.weight' has shape")) << e;
  e = load("tiny-qwen3-F32", {{"qwen3.expert_count", 4}, {"qwen3.expert_used_count", 2}});
  EXPECT_TRUE(has(e, "has no mixture-of-experts layers")) << e;
  e = load("tiny-gemma2-F32", {{"gemma2.attention.sliding_window_pattern", 5}});
  EXPECT_TRUE(has(e, "longer than the model's 4 layers")) << e;
  e = load("tiny-qwen3-F32", {{"qwen3.attention.head_count_kv", 3}});
  EXPECT_TRUE(has(e, "not a multiple of head_count_kv")) << e;
  e = load("tiny-phi3-F32", {{"phi3.embedding_length", 250}}, {"phi3.attention.key_length"});
  EXPECT_TRUE(has(e, "not a multiple of attention.head_count")) << e;
  e = load("tiny-qwen3-F32", {}, {"blk.2.attn_k_norm.weight"});
  EXPECT_TRUE(has(e, "missing tensor 'blk.2.attn_k_norm.weight'")) << e;
  e = load("tiny-gemma3-F32", {}, {"blk.0.post_ffw_norm.weight"});
  EXPECT_TRUE(has(e, "missing tensor 'blk.0.post_ffw_norm.weight'")) << e;
  e = load("tiny-phi3-F32", {{"phi3.feed_forward_length", 384}});
  EXPECT_TRUE(has(e, "blk.0.ffn_up.weight' has shape")) << e;
}

TEST(ModelConfig, WindowedLayersAndRopeOfEachFamily) {
  VELA_REQUIRE_SHARED();
  const auto config = [](const std::string& name) { return load_shared(name)->config(); };
  const ModelConfig g2 = config("tiny-gemma2-F32");
  ASSERT_EQ(g2.n_layer, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g2.layers[size_t(i)].sliding_window, i % 2 == 0 ? 8 : 0);
  EXPECT_FLOAT_EQ(g2.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(g2.final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(g2.embed_scale, 16.0f);
  const ModelConfig g3 = config("tiny-gemma3-F32");
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(g3.layers[size_t(i)].sliding_window, i < 5 ? 8 : 0);
    EXPECT_EQ(g3.layers[size_t(i)].local_rope, i < 5);
  }
  EXPECT_FLOAT_EQ(g3.rope.freq_base, 1e6f);
  EXPECT_FLOAT_EQ(g3.rope_local.freq_base, 1e4f);
  const ModelConfig yarn = config("tiny-qwen3-yarn-F32");
  EXPECT_EQ(yarn.rope.scaling, RopeScaling::kYarn);
  EXPECT_FLOAT_EQ(yarn.rope.freq_scale, 0.25f);
  EXPECT_EQ(yarn.rope.original_context, 64);
  EXPECT_EQ(yarn.head_dim, 64);
  const ModelConfig olmoe = config("tiny-olmoe-F32");
  EXPECT_EQ(olmoe.n_expert, 16);
  EXPECT_EQ(olmoe.n_expert_used, 4);
  EXPECT_FALSE(olmoe.renormalize_experts);
  EXPECT_TRUE(config("tiny-mixtral-F32").renormalize_experts);
  EXPECT_EQ(config("tiny-mixtral-F32").rope_style, RopeStyle::kNormal);
}

}  // namespace
}  // namespace vela

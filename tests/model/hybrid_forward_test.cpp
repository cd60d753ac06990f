// Models whose layers differ in kind (Qwen3.5: Gated DeltaNet beside attention): the layer
// layout read from the file, a batch mixing prefill chunks and decodes of several sequences
// giving each its logits as if alone (bit for bit), a checkpointed state resuming a prefix
// exactly, the chunked DeltaNet prompt path agreeing with token-by-token decoding, Qwen3-Next's
// fused layout computing what Qwen3.5's does, and clear errors for bad batches and bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/decoder_forward.h"
#include "model_rewrite.h"
#include "qwen3next_copy.h"
#include "sequence_runner.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr int32_t kBlock = 16;
constexpr int32_t kMaxBlocks = 16;  // per sequence: 256 positions

std::shared_ptr<const Model> load_shared(const std::string& name) {
  auto m = Model::load(test::shared_path("models/" + name + ".gguf").string());
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

// Room for 4 sequences of kMaxBlocks blocks and 8 state slots.
KvCache make_cache(const Model& m) {
  return KvCache(model_cache_config(m.config(), kBlock, 4 * kMaxBlocks, KvType::kF16, 8));
}

std::vector<int32_t> tokens_of(int32_t n, int32_t seed, int32_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[size_t(i)] = (seed * 131 + i * 37 + i * i) % n_vocab;
  return t;
}

// A sequence's piece of a pass: tokens [first, first + n) of *tokens, in its own blocks and slot.
struct Piece {
  int32_t seq;  // 0..3: blocks [seq * kMaxBlocks, ...), state slot seq
  const std::vector<int32_t>* tokens;
  int32_t first, n;
};

// One pass over the pieces (each sequence's tokens together, in the order given); returns the
// logits of every token, piece after piece. checkpoints: (piece index, position, slot).
std::vector<float> run_pass(DecoderForward& fwd, KvCache& cache, const std::vector<Piece>& pieces,
                            const std::vector<StateCheckpointWrite>& checkpoints = {},
                            Status* status = nullptr) {
  std::vector<int32_t> ids, pos, seq, table, slots;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const Piece& piece = pieces[p];
    for (int32_t i = 0; i < piece.n; ++i) {
      ids.push_back((*piece.tokens)[size_t(piece.first + i)]);
      pos.push_back(piece.first + i);
      seq.push_back(int32_t(p));
    }
    for (int32_t b = 0; b < kMaxBlocks; ++b) table.push_back(piece.seq * kMaxBlocks + b);
    slots.push_back(piece.seq);
  }
  std::vector<int32_t> want(ids.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = int32_t(i);
  std::vector<float> logits(ids.size() * size_t(fwd.model().config().n_vocab));
  ForwardBatch b{ids, pos, seq, table, kMaxBlocks, want};
  b.state_slots = slots;
  b.state_checkpoints = checkpoints;
  const Status st = fwd.forward(b, cache, logits);
  if (status != nullptr)
    *status = st;
  else
    EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

class HybridModels : public ::testing::TestWithParam<const char*> {};

// The parameter's model and a forward pass over 256 positions that splits every step.
struct Loaded {
  std::shared_ptr<const Model> model;
  std::unique_ptr<DecoderForward> fwd;
  int32_t n_vocab = 0;
};
Loaded load_with_forward(const char* name) {
  Loaded l;
  l.model = load_shared(name);
  if (!l.model) return l;
  l.fwd = std::make_unique<DecoderForward>(l.model,
                                           ForwardOptions{256, 256, kBlock * kMaxBlocks, 0, 0});
  l.n_vocab = l.model->config().n_vocab;
  return l;
}

TEST_P(HybridModels, LayerLayoutAndCacheGeometryFromTheFile) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared(GetParam());
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  // D F D: full attention where (i + 1) % full_attention_interval (2) == 0; the file's fourth
  // block is its multi-token-prediction layer, loaded and not run.
  ASSERT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.layers[0].mixer, MixerKind::kGatedDeltaNet);
  EXPECT_EQ(c.layers[1].mixer, MixerKind::kAttention);
  EXPECT_EQ(c.layers[2].mixer, MixerKind::kGatedDeltaNet);
  EXPECT_EQ(c.n_kv_layers, 1);
  EXPECT_EQ(c.n_state_layers, 2);
  EXPECT_EQ(c.layers[1].kv_index, 0);
  EXPECT_EQ(c.layers[2].state_index, 1);
  const KvCacheConfig kc = model_cache_config(c, kBlock, 10, KvType::kF16, 3);
  // Only the attention layer has K/V; each DeltaNet layer keeps conv and delta-rule state.
  EXPECT_EQ(KvCache::bytes_per_block(kc),
            size_t(kBlock) * 2 * size_t(c.n_head_kv) * size_t(c.head_dim) * 2);
  const DeltaNetConfig& d = c.delta_net;
  EXPECT_EQ(KvCache::bytes_per_state_slot(kc),
            2 * sizeof(float) *
                size_t((d.conv_kernel - 1) * d.conv_channels() +
                       int64_t(d.n_v_heads) * d.head_v_dim * d.head_k_dim));
}

TEST_P(HybridModels, MixedBatchOfChunksAndDecodesMatchesEachSequenceAlone) {
  VELA_REQUIRE_SHARED();
  Loaded l = load_with_forward(GetParam());
  ASSERT_TRUE(l.model);
  const auto& model = l.model;
  const int32_t V = l.n_vocab;
  DecoderForward& fwd = *l.fwd;
  // Three sequences, each as a schedule of pieces: a long prompt in chunks that cross the
  // DeltaNet's 64-position chunks, a short one, one decoding from the start.
  const auto a = tokens_of(150, 1, V), b = tokens_of(40, 2, V), c = tokens_of(12, 3, V);
  const std::vector<std::vector<Piece>> schedules = {
      {{0, &a, 0, 50}, {0, &a, 50, 90}, {0, &a, 140, 1}, {0, &a, 141, 9}},
      {{1, &b, 0, 3}, {1, &b, 3, 30}, {1, &b, 33, 1}, {1, &b, 34, 6}},
      {{2, &c, 0, 1}, {2, &c, 1, 1}, {2, &c, 2, 1}, {2, &c, 3, 9}},
  };
  std::vector<std::vector<std::vector<float>>> alone(3);  // [seq][pass] logits
  for (size_t s = 0; s < 3; ++s) {
    KvCache cache = make_cache(*model);
    for (const Piece& p : schedules[s]) alone[s].push_back(run_pass(fwd, cache, {p}));
  }
  KvCache cache = make_cache(*model);
  for (size_t pass = 0; pass < 4; ++pass) {
    // The sequences in another order each pass, so each sits at other batch rows.
    std::vector<Piece> pieces;
    for (size_t k = 0; k < 3; ++k) pieces.push_back(schedules[(k + pass) % 3][pass]);
    const std::vector<float> mixed = run_pass(fwd, cache, pieces);
    size_t row = 0;
    for (const Piece& p : pieces) {
      const std::vector<float>& ref = alone[size_t(p.seq)][pass];
      ASSERT_EQ(ref.size(), size_t(p.n) * size_t(V));
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_EQ(mixed[row * size_t(V) + i], ref[i])
            << "seq " << p.seq << " pass " << pass << " value " << i;
      row += size_t(p.n);
    }
  }
}

TEST_P(HybridModels, CheckpointedStateResumesThePrefixExactly) {
  VELA_REQUIRE_SHARED();
  Loaded l = load_with_forward(GetParam());
  ASSERT_TRUE(l.model);
  const auto& model = l.model;
  const int32_t V = l.n_vocab;
  DecoderForward& fwd = *l.fwd;
  const auto t = tokens_of(100, 4, V);
  KvCache cache = make_cache(*model);
  // Sequence 0 computes all 100 tokens, saving its state after 64 of them in slot 5.
  const std::vector<float> whole = run_pass(fwd, cache, {{0, &t, 0, 100}}, {{0, 64, 5}});
  // Sequence 1 takes the checkpoint and sequence 0's K/V of those 64 positions (its blocks are
  // copied: the test owns the cache) and computes the rest: the same logits, bit for bit.
  const KvCacheConfig& kc = cache.config();
  for (int32_t layer = 0; layer < kc.n_state_layers; ++layer)
    std::copy_n(cache.state(layer, 5), kc.state_floats, cache.state(layer, 1));
  std::vector<float> k(size_t(kc.n_head_kv * kc.head_dim)), v(k.size());
  for (int32_t layer = 0; layer < kc.n_layer; ++layer)
    for (int32_t p = 0; p < 64; ++p) {
      cache.read(layer, p, k.data(), v.data());
      cache.write(layer, int64_t(kMaxBlocks) * kBlock + p, k.data(), v.data());
    }
  const std::vector<float> rest = run_pass(fwd, cache, {{1, &t, 64, 36}});
  for (size_t i = 0; i < rest.size(); ++i)
    ASSERT_EQ(rest[i], whole[64 * size_t(V) + i]) << "value " << i;
  // Without the checkpoint (a zero state at position 64) the logits differ: the test can fail.
  for (int32_t layer = 0; layer < kc.n_state_layers; ++layer)
    std::fill_n(cache.state(layer, 1), kc.state_floats, 0.0f);
  const std::vector<float> wrong = run_pass(fwd, cache, {{1, &t, 64, 36}});
  float most = 0;
  for (size_t i = 0; i < wrong.size(); ++i)
    most = std::max(most, std::abs(wrong[i] - whole[64 * size_t(V) + i]));
  EXPECT_GT(most, 0.1f);
}

// The prompt path (the chunked form of the delta rule over pieces of up to 64 positions) against
// feeding the same tokens one at a time (the recurrence): equal within f32 rounding. Bound: the
// rule's outputs agree to ~1e-5 relative (gated_delta_rule_test.cpp); through the random-weight
// layers that gives 2e-4 to 1.4e-3 in logits of magnitude ~10 (measured over the kernel levels
// and layouts), far below the differences a wrong state makes (the checkpoint test above: > 0.1).
TEST_P(HybridModels, ChunkedPromptAgreesWithTokenByToken) {
  VELA_REQUIRE_SHARED();
  Loaded l = load_with_forward(GetParam());
  ASSERT_TRUE(l.model);
  const auto& model = l.model;
  const int32_t V = l.n_vocab;
  DecoderForward& fwd = *l.fwd;
  const auto t = tokens_of(140, 5, V);
  KvCache cache = make_cache(*model);
  const std::vector<float> prompt = run_pass(fwd, cache, {{0, &t, 0, 140}});
  float worst = 0;
  for (int32_t i = 0; i < 140; ++i) {
    const std::vector<float> one = run_pass(fwd, cache, {{1, &t, i, 1}});
    for (int32_t v = 0; v < V; ++v)
      worst = std::max(worst, std::abs(one[size_t(v)] - prompt[size_t(i) * V + size_t(v)]));
  }
  EXPECT_LT(worst, 5e-3f);
  std::printf("%s: chunked prompt vs token by token, worst logit difference %.3g\n", GetParam(),
              double(worst));
}

TEST_P(HybridModels, BadBatchesAreRejected) {
  VELA_REQUIRE_SHARED();
  Loaded l = load_with_forward(GetParam());
  ASSERT_TRUE(l.model);
  const auto& model = l.model;
  DecoderForward& fwd = *l.fwd;
  KvCache cache = make_cache(*model);
  const auto t = tokens_of(20, 6, model->config().n_vocab);
  const auto message = [&](const std::vector<Piece>& pieces,
                           const std::vector<StateCheckpointWrite>& checkpoints = {}) {
    Status st;
    run_pass(fwd, cache, pieces, checkpoints, &st);
    return st ? std::string() : st.message();
  };
  EXPECT_NE(message({{0, &t, 0, 4}, {0, &t, 0, 4}}).find("share state slot"), std::string::npos);
  EXPECT_NE(message({{0, &t, 0, 8}}, {{0, 9, 5}}).find("outside"), std::string::npos);
  EXPECT_NE(message({{0, &t, 0, 8}}, {{0, 4, 0}}).find("running sequence's slot"),
            std::string::npos);
  EXPECT_NE(message({{0, &t, 0, 8}}, {{0, 4, 99}}).find("out of range"), std::string::npos);
  // A cache without state for the DeltaNet layers.
  KvCache plain(KvCacheConfig{1, model->config().n_head_kv, model->config().head_dim, kBlock,
                              4 * kMaxBlocks, KvType::kF16});
  std::vector<int32_t> ids = {1}, pos = {0}, seq = {0}, table(kMaxBlocks, 0), want = {0};
  std::vector<float> logits(size_t(model->config().n_vocab));
  const Status st =
      fwd.forward(ForwardBatch{ids, pos, seq, table, kMaxBlocks, want}, plain, logits);
  EXPECT_FALSE(st.ok());
}

INSTANTIATE_TEST_SUITE_P(SharedModels, HybridModels,
                         ::testing::Values("tiny-qwen35-F32", "tiny-qwen35moe-F32",
                                           "tiny-qwen35moe-Q4_K_M"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(HybridModelLoad, ClearErrorsForBadDeltaNetFiles) {
  VELA_REQUIRE_SHARED();
  const auto load = [](const std::vector<std::pair<std::string, int64_t>>& set,
                       const std::vector<std::string>& drop = {}) -> std::string {
    auto src = GgufFile::open(test::shared_path("models/tiny-qwen35-F32.gguf").string());
    EXPECT_TRUE(src.ok());
    auto g = GgufFile::from_bytes(test::rewrite_model(*src, set, drop));
    if (!g) return g.message();
    auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
    return m ? "" : m.message();
  };
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  std::string e = load({}, {"blk.2.ssm_beta.weight"});
  EXPECT_TRUE(has(e, "missing tensor 'blk.2.ssm_beta.weight'")) << e;
  e = load({}, {"blk.0.ssm_a"});
  EXPECT_TRUE(has(e, "missing tensor 'blk.0.ssm_a'")) << e;
  e = load({{"qwen35.ssm.time_step_rank", 3}});  // 3 value heads for 2 key heads
  EXPECT_TRUE(has(e, "not a multiple of ssm.group_count")) << e;
  e = load({{"qwen35.ssm.inner_size", 202}});
  EXPECT_TRUE(has(e, "ssm.inner_size 202 is not a multiple")) << e;
  e = load({{"qwen35.ssm.inner_size", 200}});  // value heads of 50 for key heads of 64
  EXPECT_TRUE(has(e, "value head size 50 differs")) << e;
  e = load({{"qwen35.ssm.group_count", 1}});  // the tensors hold 2 key heads
  EXPECT_TRUE(has(e, "blk.0.attn_qkv.weight' has shape")) << e;
  e = load({}, {"qwen35.ssm.conv_kernel"});
  EXPECT_TRUE(has(e, "missing metadata 'qwen35.ssm.conv_kernel'")) << e;
  e = load({{"qwen35.full_attention_interval", 1}});  // every layer attention: no attn_q in blk.0
  EXPECT_TRUE(has(e, "missing tensor 'blk.0.attn_q.weight'")) << e;
}

// tiny-qwen35moe rewritten in qwen3next's layout (fused ssm_in / ssm_ba, value heads grouped by
// key head, qwen3next_copy.h) gives the original's logits: the split projections' rows are the
// same rows, the value heads read the same key heads, and only ssm_out's columns sum in another
// order. A prompt in chunks (the chunked rule), then decode steps.
TEST(Qwen3Next, FusedLayoutComputesWhatQwen35Computes) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/tiny-qwen35moe-F32.gguf").string());
  ASSERT_TRUE(src.ok()) << src.message();
  auto image = GgufFile::from_bytes(test::qwen3next_copy(*src));
  ASSERT_TRUE(image.ok()) << image.message();
  EXPECT_NE(image->find_tensor("blk.0.ssm_in.weight"), nullptr);
  EXPECT_EQ(image->find_tensor("blk.0.attn_qkv.weight"), nullptr);
  auto next = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*image)));
  ASSERT_TRUE(next.ok()) << next.message();
  EXPECT_EQ((*next)->config().arch_name, "qwen3next");
  EXPECT_TRUE((*next)->config().delta_net.grouped_value_heads);
  std::shared_ptr<const Model> original = load_shared("tiny-qwen35moe-F32");
  ASSERT_NE(original, nullptr);
  test::SequenceRunner a(original, KvType::kF16), b(*next, KvType::kF16);
  const std::vector<int32_t> prompt = tokens_of(40, 3, original->config().n_vocab);
  float max_abs = 0, max_diff = 0;
  const auto compare = [&](std::span<const int32_t> tokens) {
    const std::vector<float> x = a.append(tokens), y = b.append(tokens);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(x[i]));
      max_diff = std::max(max_diff, std::fabs(x[i] - y[i]));
    }
  };
  compare(std::span(prompt).first(24));
  compare(std::span(prompt).subspan(24));
  for (int32_t step = 0; step < 4; ++step) {
    const int32_t token = 7 + 11 * step;
    compare(std::span(&token, 1));
  }
  // Reordered f32 sums: a few ulps of the largest logit; a head read from the wrong key head or
  // a misplaced row is off by the logits' own scale.
  EXPECT_LE(max_diff, 1e-4f * max_abs) << "largest logit " << max_abs;
  EXPECT_GT(max_abs, 1.0f);

  // A fused tensor missing, or of the wrong height, is named.
  auto copy = GgufFile::from_bytes(test::qwen3next_copy(*src));
  ASSERT_TRUE(copy.ok());
  for (const auto& [drop, want] :
       {std::pair{"blk.2.ssm_ba.weight", "missing tensor 'blk.2.ssm_ba.weight' (or"},
        std::pair{"blk.0.ssm_in.weight", "missing tensor 'blk.0.ssm_in.weight'"}}) {
    auto g = GgufFile::from_bytes(test::rewrite_model(*copy, {}, {drop}));
    ASSERT_TRUE(g.ok()) << g.message();
    auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
    ASSERT_FALSE(m.ok()) << drop;
    EXPECT_NE(m.message().find(want), std::string::npos) << m.message();
  }
  auto heads = GgufFile::from_bytes(test::rewrite_model(*copy, {{"qwen3next.ssm.group_count", 1}}));
  ASSERT_TRUE(heads.ok());
  auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*heads)));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("blk.0.ssm_in.weight' has shape"), std::string::npos) << m.message();
}

}  // namespace
}  // namespace vela

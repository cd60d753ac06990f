// Collecting an importance matrix through the forward pass's observer: the pass's logits do not
// change with an observer; each family collects the reference's set of products (fused tensors
// once, per-head latent-attention stacks with one count, the shared expert's gate, DeltaNet
// projections, never the output head or token embedding); products of fewer than 16 rows are
// skipped except routed experts'.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/model.h"
#include "model/named_weights.h"
#include "support/shared_data.h"
#include "tools_support/imatrix_collector.h"
#include "tools_support/imatrix_compute.h"

namespace vela {
namespace {

std::shared_ptr<const Model> load(const std::string& file) {
  auto m = Model::load(test::shared_path("models/" + file).string());
  EXPECT_TRUE(m.ok()) << file << ": " << m.message();
  return m.ok() ? *m : nullptr;
}

// Tokens 1, 2, ... (wrapping below the vocabulary size): any ids will do.
std::vector<int32_t> some_tokens(const Model& model, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[size_t(i)] = 1 + (i * 37) % (model.config().n_vocab - 1);
  return t;
}

ImportanceMatrix collect(std::shared_ptr<const Model> model, int32_t n_tokens) {
  ImatrixOptions options;
  options.chunk_size = n_tokens;
  options.n_threads = 2;
  auto m = compute_imatrix(model, some_tokens(*model, n_tokens), -1, options, {"t"});
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : ImportanceMatrix{};
}

// The entry names with the "blk.N." prefix and ".weight" suffix removed, per layer.
std::map<int, std::set<std::string>> kinds_by_layer(const ImportanceMatrix& m) {
  std::map<int, std::set<std::string>> out;
  for (const auto& [name, e] : m.entries) {
    EXPECT_EQ(name.rfind("blk.", 0), 0u) << name;  // only layer tensors
    const size_t dot = name.find('.', 4);
    const int layer = std::stoi(name.substr(4, dot - 4));
    out[layer].insert(name.substr(dot + 1, name.size() - dot - 1 - 7));
  }
  return out;
}

using Kinds = std::set<std::string>;

TEST(ImatrixCollector, ObservingLeavesTheLogitsUnchanged) {
  VELA_REQUIRE_SHARED();
  for (const char* file : {"tiny-llama-256-Q8_0.gguf", "tiny-qwen3moe-F32.gguf"}) {
    auto model = load(file);
    ASSERT_TRUE(model);
    const int32_t T = 24;
    const std::vector<int32_t> tokens = some_tokens(*model, T);
    std::vector<int32_t> pos(T), seq(T, 0), want(T), table{0, 1};
    std::iota(pos.begin(), pos.end(), 0);
    std::iota(want.begin(), want.end(), 0);
    const int32_t n_vocab = model->config().n_vocab;
    const auto logits_of = [&](ActivationObserver* observer) {
      ForwardOptions options;
      options.max_batch_tokens = options.max_logits = T;
      options.max_context = 32;
      options.n_threads = 2;
      DecoderForward forward(model, options);
      forward.set_activation_observer(observer);
      KvCache cache(model_cache_config(model->config(), 16, 2, KvType::kF16));
      std::vector<float> logits(size_t(T) * size_t(n_vocab));
      ForwardBatch b{tokens, pos, seq, table, 2, want};
      EXPECT_TRUE(forward.forward(b, cache, logits).ok());
      return logits;
    };
    ImatrixCollector collector(*model);
    EXPECT_EQ(logits_of(nullptr), logits_of(&collector)) << file;
    const ImportanceMatrix m = collector.result({}, 1, T);
    EXPECT_FALSE(m.entries.empty()) << file;
    for (const auto& [name, e] : m.entries) EXPECT_NE(name.find("blk."), std::string::npos);
  }
}

TEST(ImatrixCollector, DenseLlamaCollectsTheSevenLayerMatrices) {
  VELA_REQUIRE_SHARED();
  auto model = load("tiny-llama-256-Q4_K_M.gguf");  // repacked matrices are found too
  ASSERT_TRUE(model);
  const ImportanceMatrix m = collect(model, 32);
  const Kinds kinds{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  for (const auto& [layer, k] : kinds_by_layer(m)) EXPECT_EQ(k, kinds) << layer;
  EXPECT_EQ(m.entries.size(), 28u);
  for (const auto& [name, e] : m.entries) EXPECT_EQ(e.counts, std::vector<int64_t>{32}) << name;
}

TEST(ImatrixCollector, FusedTensorsCountEachTokenOnce) {
  VELA_REQUIRE_SHARED();
  auto model = load("tiny-phi3-F32.gguf");
  ASSERT_TRUE(model);
  const ImportanceMatrix m = collect(model, 32);
  const Kinds kinds{"attn_qkv", "attn_output", "ffn_up", "ffn_down"};
  const auto by_layer = kinds_by_layer(m);
  ASSERT_EQ(by_layer.size(), 4u);
  for (const auto& [layer, k] : by_layer) EXPECT_EQ(k, kinds) << layer;
  for (const auto& [name, e] : m.entries) EXPECT_EQ(e.counts, std::vector<int64_t>{32}) << name;
  EXPECT_EQ(m.find("blk.0.ffn_down.weight")->n_cols, 512);
}

TEST(ImatrixCollector, LatentAttentionHeadsAreOneTensorWithOneCount) {
  VELA_REQUIRE_SHARED();
  auto model = load("tiny-deepseek2-F32.gguf");
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  const ImportanceMatrix m = collect(model, 32);
  const auto by_layer = kinds_by_layer(m);
  const Kinds attention{"attn_q_a", "attn_q_b", "attn_kv_a_mqa",
                        "attn_k_b", "attn_v_b", "attn_output"};
  Kinds dense = attention, moe = attention;
  dense.insert({"ffn_gate", "ffn_up", "ffn_down"});
  moe.insert({"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_shexp",
              "ffn_up_shexp", "ffn_down_shexp"});
  ASSERT_EQ(by_layer.size(), 3u);
  EXPECT_EQ(by_layer.at(0), dense);
  EXPECT_EQ(by_layer.at(1), moe);
  EXPECT_EQ(by_layer.at(2), moe);
  const ImatrixEntry& k_b = *m.find("blk.0.attn_k_b.weight");
  EXPECT_EQ(k_b.n_mat, c.n_head);
  EXPECT_EQ(k_b.n_cols, c.mla.nope_dim);
  EXPECT_EQ(k_b.counts, std::vector<int64_t>{32});
  const ImatrixEntry& v_b = *m.find("blk.0.attn_v_b.weight");
  EXPECT_EQ(v_b.n_mat, c.n_head);
  EXPECT_EQ(v_b.n_cols, c.mla.kv_lora_rank);
}

TEST(ImatrixCollector, DeltaNetProjectionsAndTheSharedExpertGate) {
  VELA_REQUIRE_SHARED();
  auto model = load("tiny-qwen35moe-F32.gguf");  // D F D, experts beside a gated shared expert
  ASSERT_TRUE(model);
  const ImportanceMatrix m = collect(model, 32);
  const Kinds ffn{"ffn_gate_inp",   "ffn_gate_exps", "ffn_up_exps",    "ffn_down_exps",
                  "ffn_gate_shexp", "ffn_up_shexp",  "ffn_down_shexp", "ffn_gate_inp_shexp"};
  Kinds delta{"attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha", "ssm_out"};
  Kinds full{"attn_q", "attn_k", "attn_v", "attn_output"};
  delta.insert(ffn.begin(), ffn.end());
  full.insert(ffn.begin(), ffn.end());
  const auto layers = kinds_by_layer(m);
  ASSERT_EQ(layers.size(), 3u);  // the multi-token-prediction block is not run
  EXPECT_EQ(layers.at(0), delta);
  EXPECT_EQ(layers.at(1), full);
  EXPECT_EQ(layers.at(2), delta);
  const ImatrixEntry& gate = *m.find("blk.1.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(gate.n_cols, model->config().n_embd);
  EXPECT_EQ(gate.counts, std::vector<int64_t>{32});
  EXPECT_EQ(gate.sum2, m.find("blk.1.ffn_gate_inp.weight")->sum2);  // the router's input
  // attn_q holds each head's query and gate rows: one tensor of n_embd columns.
  EXPECT_EQ(m.find("blk.1.attn_q.weight")->n_cols, model->config().n_embd);
}

TEST(ImatrixCollector, FewerThanSixteenRowsCollectOnlyRoutedExperts) {
  VELA_REQUIRE_SHARED();
  auto model = load("tiny-qwen3moe-F32.gguf");
  ASSERT_TRUE(model);
  const ImportanceMatrix m = collect(model, 8);
  ASSERT_FALSE(m.entries.empty());
  int64_t routed = 0;
  for (const auto& [name, e] : m.entries) {
    EXPECT_NE(name.find("_exps."), std::string::npos) << name;
    for (int64_t c : e.counts) routed += c;
  }
  EXPECT_EQ(routed, 3 * 3 * 8 * 2);  // layers x matrices x tokens x experts per token
}

}  // namespace
}  // namespace vela

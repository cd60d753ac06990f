// A model's multi-token-prediction ("NextN") block loaded as a model of its own (Model::mtp_block)
// and run by the decoder forward pass with a hidden state per token: its config and shared
// matrices, its logits and hidden rows against a scalar implementation of the block's definition,
// a prompt in one pass against one token per pass, the same block from a tensor-parallel shard of
// the model, and clear errors for bad files and bad batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model_rewrite.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr int32_t kBlock = 16;
constexpr int32_t kMaxBlocks = 4;  // 64 positions per sequence

std::shared_ptr<const Model> load_shared(const std::string& name,
                                         const ModelLoadOptions& options = {}) {
  auto m = Model::load(test::shared_path("models/" + name + ".gguf").string(), options);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

std::shared_ptr<const Model> block_of(const std::shared_ptr<const Model>& target) {
  auto b = Model::mtp_block(target);
  EXPECT_TRUE(b.ok()) << b.message();
  return b.ok() ? *b : nullptr;
}

KvCache make_cache(const Model& m) {
  return KvCache(model_cache_config(m.config(), kBlock, kMaxBlocks, KvType::kF32));
}

// [n, n_embd] hidden states drawn from N(0, 1).
std::vector<float> random_hidden(int64_t n, int64_t n_embd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> h(size_t(n * n_embd));
  for (float& v : h) v = normal(rng);
  return h;
}

struct Outputs {
  std::vector<float> logits;  // [n, n_vocab]
  std::vector<float> hidden;  // [n, n_embd]
};

// One pass over tokens [first, first + n) of one sequence at those positions, with their rows
// of `hidden_in` [n_tokens, n_embd]: the logits and hidden rows of every token.
Outputs run(DecoderForward& fwd, KvCache& cache, const std::vector<int32_t>& tokens,
            const std::vector<float>& hidden_in, int32_t first, int32_t n,
            Status* status = nullptr) {
  const ModelConfig& c = fwd.model().config();
  const size_t E = size_t(c.n_embd);
  std::vector<int32_t> ids, pos, seq(size_t(n), 0), want;
  for (int32_t i = 0; i < n; ++i) {
    ids.push_back(tokens[size_t(first + i)]);
    pos.push_back(first + i);
    want.push_back(i);
  }
  std::vector<int32_t> table(kMaxBlocks);
  for (int32_t b = 0; b < kMaxBlocks; ++b) table[size_t(b)] = kMaxBlocks - 1 - b;
  Outputs out{std::vector<float>(size_t(n) * size_t(c.n_vocab)), std::vector<float>(size_t(n) * E)};
  ForwardBatch b{ids, pos, seq, table, kMaxBlocks, want, want};
  // The tokens' rows, or as many of them as hidden_in has (bad-batch tests).
  const size_t begin = std::min(hidden_in.size(), size_t(first) * E);
  b.input_hidden = std::span<const float>(hidden_in).subspan(
      begin, std::min(hidden_in.size() - begin, size_t(n) * E));
  const Status st = fwd.forward(b, cache, out.logits, out.hidden);
  if (status != nullptr)
    *status = st;
  else
    EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// max |a - b| / max |b|.
double relative_difference(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// The qwen35 block from its definition, on the F32 file's weights: x = eh_proj [rms_norm(embed(t))
// * enorm | rms_norm(h) * hnorm]; the gated full-attention layer (each head's query rows then its
// gate rows, per-head q/k norms, NeoX RoPE over the first n_rot dimensions, the head's output
// times sigmoid(gate)); post_attention_norm before the dense SwiGLU FFN; logits from the tied
// head of rms_norm(x) * shared_head_norm; the hidden out x before that norm.
class ScalarQwen35Block {
 public:
  ScalarQwen35Block(const GgufFile& g, const ModelConfig& c) : g_(g), c_(c) {
    p_ = "blk." + std::to_string(c.n_layer) + ".";
  }

  // Token `token` at the next position with hidden state h [n_embd].
  Outputs step(int32_t token, const float* h) {
    const int64_t E = c_.n_embd, H = c_.n_head, KV = c_.n_head_kv, hd = c_.head_dim;
    const int64_t pos = int64_t(keys_.size());
    const std::vector<float> embd = rows("token_embd.weight", token, 1, E);
    std::vector<float> cat(size_t(2 * E));
    norm(embd.data(), weight(p_ + "nextn.enorm.weight"), E, cat.data());
    norm(h, weight(p_ + "nextn.hnorm.weight"), E, cat.data() + E);
    std::vector<float> x = matvec(p_ + "nextn.eh_proj.weight", E, 2 * E, cat);

    std::vector<float> xn(static_cast<size_t>(E));
    norm(x.data(), weight(p_ + "attn_norm.weight"), E, xn.data());
    const std::vector<float> qg = matvec(p_ + "attn_q.weight", 2 * H * hd, E, xn);
    std::vector<float> k = matvec(p_ + "attn_k.weight", KV * hd, E, xn);
    const std::vector<float> v = matvec(p_ + "attn_v.weight", KV * hd, E, xn);
    for (int64_t j = 0; j < KV; ++j) {
      norm(k.data() + j * hd, weight(p_ + "attn_k_norm.weight"), hd, k.data() + j * hd);
      rope(k.data() + j * hd, pos);
    }
    keys_.push_back(k);
    values_.push_back(v);
    std::vector<float> attn(size_t(H * hd));
    for (int64_t i = 0; i < H; ++i) {
      std::vector<float> q(qg.begin() + i * 2 * hd, qg.begin() + i * 2 * hd + hd);
      const float* gate = qg.data() + i * 2 * hd + hd;
      norm(q.data(), weight(p_ + "attn_q_norm.weight"), hd, q.data());
      rope(q.data(), pos);
      const int64_t j = i / (H / KV);
      std::vector<double> scores;
      double most = -1e300;
      for (size_t p = 0; p < keys_.size(); ++p) {
        double s = 0;
        for (int64_t d = 0; d < hd; ++d) s += double(q[size_t(d)]) * keys_[p][size_t(j * hd + d)];
        scores.push_back(s * c_.attn_scale);
        most = std::max(most, scores.back());
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - most));
      for (int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (size_t p = 0; p < keys_.size(); ++p)
          o += scores[p] / sum * values_[p][size_t(j * hd + d)];
        attn[size_t(i * hd + d)] = float(o / (1.0 + std::exp(-double(gate[d]))));
      }
    }
    const std::vector<float> o = matvec(p_ + "attn_output.weight", E, H * hd, attn);
    for (int64_t i = 0; i < E; ++i) x[size_t(i)] += o[size_t(i)];

    norm(x.data(), weight(p_ + "post_attention_norm.weight"), E, xn.data());
    const int64_t ff = c_.n_ff;
    const std::vector<float> g = matvec(p_ + "ffn_gate.weight", ff, E, xn);
    const std::vector<float> u = matvec(p_ + "ffn_up.weight", ff, E, xn);
    std::vector<float> a(static_cast<size_t>(ff));
    for (int64_t i = 0; i < ff; ++i)
      a[size_t(i)] =
          float(double(g[size_t(i)]) / (1.0 + std::exp(-double(g[size_t(i)]))) * u[size_t(i)]);
    const std::vector<float> down = matvec(p_ + "ffn_down.weight", E, ff, a);
    for (int64_t i = 0; i < E; ++i) x[size_t(i)] += down[size_t(i)];

    Outputs out;
    out.hidden = x;
    norm(x.data(), weight(p_ + "nextn.shared_head_norm.weight"), E, xn.data());
    out.logits = matvec("token_embd.weight", c_.n_vocab, E, xn);  // the tied head
    return out;
  }

 private:
  const float* weight(const std::string& name) const {
    const GgufTensorInfo* t = g_.find_tensor(name);
    EXPECT_TRUE(t != nullptr && t->ggml_type() == GgmlType::F32) << name;
    return reinterpret_cast<const float*>(t->data);
  }
  // Rows [first, first + n) of a matrix of n_cols columns.
  std::vector<float> rows(const std::string& name, int64_t first, int64_t n, int64_t n_cols) const {
    const float* w = weight(name) + first * n_cols;
    return std::vector<float>(w, w + n * n_cols);
  }
  // W x for W [n_rows, n_cols], accumulated in double.
  std::vector<float> matvec(const std::string& name, int64_t n_rows, int64_t n_cols,
                            const std::vector<float>& x) const {
    const GgufTensorInfo* t = g_.find_tensor(name);
    EXPECT_TRUE(t != nullptr && t->ne[0] == n_cols && t->ne[1] == n_rows) << name;
    const float* w = weight(name);
    std::vector<float> y(static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      double s = 0;
      for (int64_t i = 0; i < n_cols; ++i) s += double(w[r * n_cols + i]) * x[size_t(i)];
      y[size_t(r)] = float(s);
    }
    return y;
  }
  // y = x / sqrt(mean(x^2) + eps) * w over n values (y may be x).
  void norm(const float* x, const float* w, int64_t n, float* y) const {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
    const double r = 1.0 / std::sqrt(ss / double(n) + double(c_.rms_eps));
    for (int64_t i = 0; i < n; ++i) y[i] = float(double(x[i]) * r * w[i]);
  }
  // NeoX RoPE of one head: pairs (i, i + n_rot / 2) of its first n_rot dimensions.
  void rope(float* v, int64_t pos) const {
    const int64_t half = c_.n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double theta =
          double(pos) * std::pow(double(c_.rope.freq_base), -2.0 * double(i) / c_.n_rot);
      const double x0 = v[i], x1 = v[i + half];
      v[i] = float(x0 * std::cos(theta) - x1 * std::sin(theta));
      v[i + half] = float(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  }

  const GgufFile& g_;
  const ModelConfig& c_;                    // the decoder's
  std::string p_;                           // the block's tensor prefix, "blk.<n_layer>."
  std::vector<std::vector<float>> keys_;    // [position][n_head_kv * head_dim] after norm, RoPE
  std::vector<std::vector<float>> values_;  // [position][n_head_kv * head_dim]
};

TEST(MtpBlock, ConfigIsOneLayerSharingTheTargetsMatrices) {
  VELA_REQUIRE_SHARED();
  for (const char* name : {"tiny-qwen35-F32", "tiny-glm4moe-F32"}) {
    SCOPED_TRACE(name);
    auto target = load_shared(name);
    ASSERT_TRUE(target);
    auto block = block_of(target);
    ASSERT_TRUE(block);
    const ModelConfig& c = block->config();
    const bool glm = std::string(name).find("glm") != std::string::npos;
    EXPECT_TRUE(c.mtp_block);
    EXPECT_EQ(c.first_file_layer, 3);
    ASSERT_EQ(c.n_layer, 1);
    ASSERT_EQ(c.layers.size(), 1u);
    EXPECT_EQ(c.layers[0].mixer, MixerKind::kAttention);  // qwen35: whatever the interval says
    EXPECT_EQ(c.layers[0].kv_index, 0);
    EXPECT_EQ(c.layers[0].state_index, -1);
    EXPECT_EQ(c.layers[0].sliding_window, 0);
    EXPECT_EQ(c.layers[0].moe, glm);  // as the decoder's last layer
    EXPECT_EQ(c.n_kv_layers, 1);
    EXPECT_EQ(c.n_state_layers, 0);
    EXPECT_EQ(c.n_nextn_layers, 0);
    EXPECT_FALSE(c.recurrent());
    // The decoder itself keeps its three layers.
    EXPECT_EQ(target->config().n_layer, 3);
    EXPECT_FALSE(target->config().mtp_block);
    EXPECT_EQ(target->weights().mtp.eh_proj.data, nullptr);
    // No nextn embed_tokens / shared_head_head: the target's matrices, not copies.
    const ModelWeights& w = block->weights();
    EXPECT_EQ(w.token_embd.data, target->weights().token_embd.data);
    EXPECT_EQ(w.output.data, target->weights().output.data);
    EXPECT_EQ(block->head_target(), target);
    EXPECT_EQ(w.mtp.eh_proj.n_rows, c.n_embd);
    EXPECT_EQ(w.mtp.eh_proj.n_cols, 2 * c.n_embd);
    // The head norm is the block's shared_head_norm, not the decoder's output_norm.
    EXPECT_NE(w.output_norm, target->weights().output_norm);
    EXPECT_EQ(w.layers.size(), 1u);
    EXPECT_EQ(w.layers[0].moe(), glm);
  }
}

// One token at position 0 (attention over its own key: its V, gated), then a second at position
// 1 (two keys, RoPE'd): logits and hidden rows equal the scalar block's within f32 rounding
// (relative 1e-4 of the largest value; measured 3e-7 to 1e-6 over the kernel levels), one token
// per pass and both in one pass.
TEST(MtpBlock, LogitsEqualAScalarBlock) {
  VELA_REQUIRE_SHARED();
  auto target = load_shared("tiny-qwen35-F32");
  ASSERT_TRUE(target);
  auto block = block_of(target);
  ASSERT_TRUE(block);
  const ModelConfig& c = target->config();
  const std::vector<int32_t> tokens = {17, 301};
  const std::vector<float> h = random_hidden(2, c.n_embd, 7);
  ScalarQwen35Block scalar(target->gguf(), c);
  const Outputs ref0 = scalar.step(tokens[0], h.data());
  const Outputs ref1 = scalar.step(tokens[1], h.data() + c.n_embd);

  DecoderForward fwd(block, ForwardOptions{8, 8, kBlock * kMaxBlocks, 2, 0});
  KvCache cache = make_cache(*block);
  const Outputs out0 = run(fwd, cache, tokens, h, 0, 1);
  const Outputs out1 = run(fwd, cache, tokens, h, 1, 1);
  EXPECT_LT(relative_difference(out0.logits, ref0.logits), 1e-4);
  EXPECT_LT(relative_difference(out0.hidden, ref0.hidden), 1e-4);
  EXPECT_LT(relative_difference(out1.logits, ref1.logits), 1e-4);
  EXPECT_LT(relative_difference(out1.hidden, ref1.hidden), 1e-4);

  KvCache cache2 = make_cache(*block);
  const Outputs both = run(fwd, cache2, tokens, h, 0, 2);
  const size_t V = size_t(c.n_vocab), E = size_t(c.n_embd);
  EXPECT_LT(relative_difference(std::span(both.logits).first(V), ref0.logits), 1e-4);
  EXPECT_LT(relative_difference(std::span(both.logits).subspan(V), ref1.logits), 1e-4);
  EXPECT_LT(relative_difference(std::span(both.hidden).first(E), ref0.hidden), 1e-4);
  EXPECT_LT(relative_difference(std::span(both.hidden).subspan(E), ref1.hidden), 1e-4);

  // The test can fail: another hidden state moves the logits far beyond the bound.
  std::vector<float> other = h;
  other[0] += 3.0f;
  KvCache cache3 = make_cache(*block);
  const Outputs moved = run(fwd, cache3, tokens, other, 0, 1);
  EXPECT_GT(relative_difference(moved.logits, ref0.logits), 1e-3);
}

class MtpBlockModels : public ::testing::TestWithParam<const char*> {};

// Five tokens with their hidden rows in one pass against one token per pass: equal within f32
// rounding of the different batch shapes (relative 1e-4 of the largest value; the pass is batch
// invariant, and they were measured equal bit for bit on every kernel level).
TEST_P(MtpBlockModels, PrefillEqualsDecodeSteps) {
  VELA_REQUIRE_SHARED();
  auto target = load_shared(GetParam());
  ASSERT_TRUE(target);
  auto block = block_of(target);
  ASSERT_TRUE(block);
  const ModelConfig& c = block->config();
  const std::vector<int32_t> tokens = {3, 141, 59, 265, 358};
  const std::vector<float> h = random_hidden(5, c.n_embd, 11);
  DecoderForward fwd(block, ForwardOptions{8, 8, kBlock * kMaxBlocks, 2, 0});
  KvCache whole_cache = make_cache(*block);
  const Outputs whole = run(fwd, whole_cache, tokens, h, 0, 5);
  KvCache step_cache = make_cache(*block);
  const size_t V = size_t(c.n_vocab), E = size_t(c.n_embd);
  for (int32_t i = 0; i < 5; ++i) {
    const Outputs one = run(fwd, step_cache, tokens, h, i, 1);
    EXPECT_LT(relative_difference(one.logits, std::span(whole.logits).subspan(i * V, V)), 1e-4)
        << "token " << i;
    EXPECT_LT(relative_difference(one.hidden, std::span(whole.hidden).subspan(i * E, E)), 1e-4)
        << "token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, MtpBlockModels,
                         ::testing::Values("tiny-qwen35-Q8_0", "tiny-glm4moe-F32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A tensor-parallel rank's model holds a slice of the output head: its block reads the whole
// head from the file and gives the unsharded model's block's logits, bit for bit.
TEST(MtpBlock, ShardedTargetGivesTheWholeBlock) {
  VELA_REQUIRE_SHARED();
  auto whole_target = load_shared("tiny-glm4moe-F32");
  ModelLoadOptions rank0;
  rank0.shard = TensorShard{0, 2};
  auto shard_target = load_shared("tiny-glm4moe-F32", rank0);
  ASSERT_TRUE(whole_target && shard_target);
  auto whole = block_of(whole_target);
  auto from_shard = block_of(shard_target);
  ASSERT_TRUE(whole && from_shard);
  EXPECT_FALSE(from_shard->shard().sharded());
  EXPECT_EQ(from_shard->config().n_head, whole_target->config().n_head);
  EXPECT_EQ(from_shard->weights().output.n_rows, whole_target->config().n_vocab);
  const std::vector<int32_t> tokens = {5, 77, 300};
  const std::vector<float> h = random_hidden(3, whole->config().n_embd, 3);
  DecoderForward fwd_a(whole, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  DecoderForward fwd_b(from_shard, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  KvCache cache_a = make_cache(*whole), cache_b = make_cache(*from_shard);
  const Outputs a = run(fwd_a, cache_a, tokens, h, 0, 3);
  const Outputs b = run(fwd_b, cache_b, tokens, h, 0, 3);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.hidden, b.hidden);
}

// A copy of `src` with tensor `name` replaced by its first ne[0] values as a 1-D tensor of n.
std::vector<uint8_t> reshape_vector(const GgufFile& src, const std::string& name, int64_t n) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.add_value(key, value);
  for (const GgufTensorInfo& t : src.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    uint64_t bytes = t.n_bytes;
    if (t.name == name) {
      ne = {n};
      bytes = uint64_t(n) * sizeof(float);
    }
    EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type(), ne, {t.data, t.data + bytes}).ok());
  }
  return w.to_bytes();
}

TEST(MtpBlock, MissingOrMisshapedTensorsAreNamed) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/tiny-qwen35-F32.gguf").string());
  ASSERT_TRUE(src.ok()) << src.message();
  // (the decoder's load error, the block's load error) of an image.
  const auto load = [](std::vector<uint8_t> bytes) -> std::pair<std::string, std::string> {
    auto g = GgufFile::from_bytes(bytes);
    if (!g) return {g.message(), ""};
    auto target = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
    if (!target) return {target.message(), ""};
    auto block = Model::mtp_block(*target);
    return {"", block ? "" : block.message()};
  };
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  // The unchanged image loads both.
  auto [target_error, e] = load(test::rewrite_model(*src, {}));
  EXPECT_EQ(target_error, "");
  EXPECT_EQ(e, "");
  for (const char* tensor : {"blk.3.nextn.eh_proj.weight", "blk.3.nextn.hnorm.weight",
                             "blk.3.nextn.shared_head_norm.weight", "blk.3.attn_k.weight"}) {
    std::tie(target_error, e) = load(test::rewrite_model(*src, {}, {tensor}));
    EXPECT_EQ(target_error, "") << tensor;  // the decoder never reads the block
    EXPECT_TRUE(has(e, "missing tensor '" + std::string(tensor) + "'")) << e;
  }
  std::tie(target_error, e) = load(reshape_vector(*src, "blk.3.nextn.enorm.weight", 64));
  EXPECT_EQ(target_error, "");
  EXPECT_TRUE(has(e, "tensor 'blk.3.nextn.enorm.weight' has shape [64], expected [128]")) << e;
  // A file without the key (and without the block in its block count): no block, said so.
  std::tie(target_error, e) =
      load(test::rewrite_model(*src, {{"qwen35.block_count", 3}}, {"qwen35.nextn_predict_layers"}));
  EXPECT_EQ(target_error, "");
  EXPECT_TRUE(has(e, "no multi-token-prediction block")) << e;
  EXPECT_TRUE(has(e, "qwen35.nextn_predict_layers")) << e;
  std::tie(target_error, e) = load(test::rewrite_model(*src, {{"qwen35.nextn_predict_layers", 0}}));
  EXPECT_TRUE(has(e, "no multi-token-prediction block")) << e;
  // Two blocks: the decoder is blk.0-1 and loads; the block is refused.
  std::tie(target_error, e) = load(test::rewrite_model(*src, {{"qwen35.nextn_predict_layers", 2}}));
  EXPECT_EQ(target_error, "");
  EXPECT_TRUE(has(e, "only one is supported")) << e;
}

TEST(MtpBlock, BadBatchesAreRejected) {
  VELA_REQUIRE_SHARED();
  auto target = load_shared("tiny-qwen35-F32");
  ASSERT_TRUE(target);
  auto block = block_of(target);
  ASSERT_TRUE(block);
  const int64_t E = block->config().n_embd;
  const std::vector<int32_t> tokens = {1, 2};
  DecoderForward fwd(block, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  KvCache cache = make_cache(*block);
  Status st;
  // Too few hidden rows for the tokens, and none at all.
  run(fwd, cache, tokens, random_hidden(1, E, 1), 0, 2, &st);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input_hidden"), std::string::npos) << st.message();
  run(fwd, cache, tokens, {}, 0, 1, &st);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input_hidden"), std::string::npos) << st.message();
  // The decoder takes no hidden rows.
  DecoderForward target_fwd(target, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  KvCache target_cache(
      model_cache_config(target->config(), kBlock, kMaxBlocks, KvType::kF32, /*n_state_slots=*/1));
  std::vector<int32_t> ids = {1}, pos = {0}, seq = {0}, table(kMaxBlocks, 0), want = {0},
                       slot = {0};
  const std::vector<float> h = random_hidden(1, E, 2);
  std::vector<float> logits(size_t(target->config().n_vocab));
  ForwardBatch b{ids, pos, seq, table, kMaxBlocks, want};
  b.state_slots = slot;
  b.input_hidden = h;
  st = target_fwd.forward(b, target_cache, logits);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input_hidden is for a multi-token-prediction block"),
            std::string::npos)
      << st.message();
  b.input_hidden = {};
  st = target_fwd.forward(b, target_cache, logits);
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace vela

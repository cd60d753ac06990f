// EAGLE-3 draft heads (Model::eagle3_head) run by the decoder forward pass, on random heads
// written for the shared tiny Llama (eagle3_head_writer.h): the config and shared matrices, logits
// and hidden rows against a scalar implementation of the head's definition (target features in,
// then the head's own output), the draft vocabulary's scattering through d2t, a prompt in one
// pass against one token per pass, the same head from a tensor-parallel shard of the target, clear
// errors for bad heads and bad batches; and the target's pass capturing its layers' inputs
// (ForwardOptions::capture_layer_inputs) without changing its outputs, in one process and
// tensor-parallel.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "eagle3_head_writer.h"
#include "io/gguf.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/layer_ops.h"
#include "model_rewrite.h"
#include "support/shared_data.h"
#include "support/thread_group.h"

namespace vela {
namespace {

constexpr int32_t kBlock = 16;
constexpr int32_t kMaxBlocks = 4;  // 64 positions per sequence
constexpr const char* kTarget = "tiny-llama-256-F32";
constexpr std::array<int32_t, 3> kLayers = {0, 2, 3};  // of the target's 4
constexpr int32_t kDraftVocab = 100;                   // of the target's 512

std::string target_path() {
  return test::shared_path(std::string("models/") + kTarget + ".gguf").string();
}

std::shared_ptr<const Model> load_target(const ModelLoadOptions& options = {}) {
  auto m = Model::load(target_path(), options);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

std::shared_ptr<const GgufFile> parse(const std::vector<uint8_t>& bytes, std::string* error) {
  auto g = GgufFile::from_bytes(bytes);
  if (!g) {
    *error = g.message();
    return nullptr;
  }
  return std::make_shared<const GgufFile>(std::move(*g));
}

// Whether the GGUF reader admits d2t's I64 tensors: until it does (src/io), heads with a d2t
// cannot be read at all, and their tests skip.
bool reader_takes_i64() {
  static const bool takes = [] {
    auto target = load_target();
    std::string error;
    return target && parse(test::random_eagle3_head(*target, 1, 32, kLayers), &error) != nullptr;
  }();
  return takes;
}

#define REQUIRE_I64_TENSORS()                                                          \
  do {                                                                                 \
    if (!reader_takes_i64())                                                           \
      GTEST_SKIP() << "the GGUF reader refuses I64 tensors (d2t): heads with a draft " \
                      "vocabulary of their own cannot be read";                        \
  } while (0)

// The head of a written image, or null (the error in *error).
std::shared_ptr<const Model> head_of(const std::vector<uint8_t>& bytes,
                                     std::shared_ptr<const Model> target, std::string* error) {
  auto g = parse(bytes, error);
  if (!g) return nullptr;
  auto h = Model::eagle3_head(g, std::move(target));
  if (!h) {
    *error = h.message();
    return nullptr;
  }
  return *h;
}

std::shared_ptr<const Model> head_of(const std::vector<uint8_t>& bytes,
                                     std::shared_ptr<const Model> target) {
  std::string error;
  auto h = head_of(bytes, std::move(target), &error);
  EXPECT_TRUE(h) << error;
  return h;
}

KvCache make_cache(const Model& m) {
  return KvCache(model_cache_config(m.config(), kBlock, kMaxBlocks, KvType::kF32));
}

// [n, width] values drawn from N(0, 1).
std::vector<float> random_rows(int64_t n, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> h(size_t(n * width));
  for (float& v : h) v = normal(rng);
  return h;
}

struct Outputs {
  std::vector<float> logits;  // [n, n_vocab]
  std::vector<float> hidden;  // [n, n_embd]
};

// One pass over tokens [first, first + n) of one sequence at those positions, with their rows
// of `input` ([n_tokens, width]: target features, or the head's own outputs): the logits and
// hidden rows of every token.
Outputs run(DecoderForward& fwd, KvCache& cache, const std::vector<int32_t>& tokens,
            const std::vector<float>& input, bool features, int32_t first, int32_t n,
            Status* status = nullptr) {
  const ModelConfig& c = fwd.model().config();
  const size_t E = size_t(c.n_embd);
  const size_t width = features ? 3 * size_t(c.eagle3->target_n_embd) : E;
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
  // The tokens' rows, or as many of them as `input` has (bad-batch tests).
  const size_t begin = std::min(input.size(), size_t(first) * width);
  b.input_hidden = std::span<const float>(input).subspan(
      begin, std::min(input.size() - begin, size_t(n) * width));
  b.input_is_target_features = features;
  const Status st = fwd.forward(b, cache, out.logits, out.hidden);
  if (status != nullptr)
    *status = st;
  else
    EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// max |a - b| / max |b| over the finite entries of b, which must be where a's are.
double relative_difference(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      EXPECT_EQ(a[i], b[i]) << "entry " << i;
      continue;
    }
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// The head from its definition, on the F32 weights of the head's and target's files:
//   g = fc features (first step) or the previous output;
//   a = [rms_norm(embed(t)) * attn_norm | rms_norm(g) * hidden_norm];
//   attention (q, k, v = W a; normal RoPE on q and k; scale 1/sqrt(head_dim)), o = attn_output;
//   r = (norm_before_residual ? rms_norm(g) * hidden_norm : g) + o;
//   out = r + ffn(rms_norm(r) * ffn_norm)  (the hidden row);
//   logits: target id d2t[i] gets (output . rms_norm(out) * output_norm)[i], the rest -inf.
class ScalarEagle3Head {
 public:
  ScalarEagle3Head(const GgufFile& head, const GgufFile& target, const ModelConfig& c)
      : head_(head), target_(target), c_(c) {}

  // Token `token` at the next position with input row `in`: 3 target n_embd features, or the
  // head's previous output (n_embd).
  Outputs step(int32_t token, const float* in, bool features) {
    const int64_t E = c_.n_embd, H = c_.n_head, KV = c_.n_head_kv, hd = c_.head_dim;
    const int64_t pos = int64_t(keys_.size());
    std::vector<float> g(in, in + E);
    if (features) {
      const int64_t n_in = 3 * int64_t(c_.eagle3->target_n_embd);
      g = matvec(head_, "fc.weight", E, n_in, std::vector<float>(in, in + n_in));
    }
    const GgufFile& embd_file = head_.find_tensor("token_embd.weight") ? head_ : target_;
    const float* embd = weight(embd_file, "token_embd.weight") + int64_t(token) * E;
    std::vector<float> a(size_t(2 * E)), gn(static_cast<size_t>(E));
    norm(embd, weight(head_, "blk.0.attn_norm.weight"), E, a.data());
    const char* hidden_norm = head_.find_tensor("blk.0.hidden_norm.weight")
                                  ? "blk.0.hidden_norm.weight"
                                  : "blk.0.attn_norm_2.weight";
    norm(g.data(), weight(head_, hidden_norm), E, gn.data());
    std::copy(gn.begin(), gn.end(), a.begin() + E);

    const std::vector<float> q_all = matvec(head_, "blk.0.attn_q.weight", H * hd, 2 * E, a);
    std::vector<float> k = matvec(head_, "blk.0.attn_k.weight", KV * hd, 2 * E, a);
    const std::vector<float> v = matvec(head_, "blk.0.attn_v.weight", KV * hd, 2 * E, a);
    for (int64_t j = 0; j < KV; ++j) rope(k.data() + j * hd, pos);
    keys_.push_back(k);
    values_.push_back(v);
    std::vector<float> attn(size_t(H * hd));
    for (int64_t i = 0; i < H; ++i) {
      std::vector<float> q(q_all.begin() + i * hd, q_all.begin() + (i + 1) * hd);
      rope(q.data(), pos);
      const int64_t j = i / (H / KV);
      std::vector<double> scores;
      double most = -1e300;
      for (size_t p = 0; p < keys_.size(); ++p) {
        double s = 0;
        for (int64_t d = 0; d < hd; ++d) s += double(q[size_t(d)]) * keys_[p][size_t(j * hd + d)];
        scores.push_back(s / std::sqrt(double(hd)));
        most = std::max(most, scores.back());
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - most));
      for (int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (size_t p = 0; p < keys_.size(); ++p)
          o += scores[p] / sum * values_[p][size_t(j * hd + d)];
        attn[size_t(i * hd + d)] = float(o);
      }
    }
    const std::vector<float> o = matvec(head_, "blk.0.attn_output.weight", E, H * hd, attn);
    std::vector<float> x = c_.eagle3->norm_before_residual ? gn : g;
    for (int64_t i = 0; i < E; ++i) x[size_t(i)] += o[size_t(i)];

    std::vector<float> xn(static_cast<size_t>(E));
    norm(x.data(), weight(head_, "blk.0.ffn_norm.weight"), E, xn.data());
    const int64_t ff = c_.n_ff;
    const std::vector<float> gate = matvec(head_, "blk.0.ffn_gate.weight", ff, E, xn);
    const std::vector<float> up = matvec(head_, "blk.0.ffn_up.weight", ff, E, xn);
    std::vector<float> act(static_cast<size_t>(ff));
    for (int64_t i = 0; i < ff; ++i)
      act[size_t(i)] = float(double(gate[size_t(i)]) / (1.0 + std::exp(-double(gate[size_t(i)]))) *
                             up[size_t(i)]);
    const std::vector<float> down = matvec(head_, "blk.0.ffn_down.weight", E, ff, act);
    for (int64_t i = 0; i < E; ++i) x[size_t(i)] += down[size_t(i)];

    Outputs out;
    out.hidden = x;
    norm(x.data(), weight(head_, "output_norm.weight"), E, xn.data());
    const int64_t V = c_.n_vocab, D = c_.eagle3->n_draft_vocab;
    if (head_.find_tensor("output.weight") != nullptr) {
      const std::vector<float> draft = matvec(head_, "output.weight", D, E, xn);
      const GgufTensorInfo* d2t = head_.find_tensor("d2t");
      if (d2t == nullptr) return {draft, out.hidden};
      out.logits.assign(size_t(V), -std::numeric_limits<float>::infinity());
      for (int64_t i = 0; i < D; ++i) {
        int64_t id = 0;
        std::memcpy(&id, d2t->data + i * 8, 8);
        out.logits[size_t(id)] = draft[size_t(i)];
      }
    } else {
      const char* name =
          target_.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
      out.logits = matvec(target_, name, V, E, xn);
    }
    return out;
  }

 private:
  static const float* weight(const GgufFile& g, const std::string& name) {
    const GgufTensorInfo* t = g.find_tensor(name);
    EXPECT_TRUE(t != nullptr && t->ggml_type() == GgmlType::F32) << name;
    return t ? reinterpret_cast<const float*>(t->data) : nullptr;
  }
  // W x for W [n_rows, n_cols], accumulated in double.
  static std::vector<float> matvec(const GgufFile& g, const std::string& name, int64_t n_rows,
                                   int64_t n_cols, const std::vector<float>& x) {
    const GgufTensorInfo* t = g.find_tensor(name);
    EXPECT_TRUE(t != nullptr && t->ne[0] == n_cols && t->ne[1] == n_rows) << name;
    const float* w = weight(g, name);
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
  // Normal (llama) RoPE of one head: pairs (2i, 2i + 1) of its first n_rot dimensions.
  void rope(float* v, int64_t pos) const {
    for (int64_t i = 0; i < c_.n_rot / 2; ++i) {
      const double theta =
          double(pos) * std::pow(double(c_.rope.freq_base), -2.0 * double(i) / c_.n_rot);
      const double x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = float(x0 * std::cos(theta) - x1 * std::sin(theta));
      v[2 * i + 1] = float(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  }

  const GgufFile& head_;
  const GgufFile& target_;
  const ModelConfig& c_;                    // the head's
  std::vector<std::vector<float>> keys_;    // [position][n_head_kv * head_dim] after RoPE
  std::vector<std::vector<float>> values_;  // [position][n_head_kv * head_dim]
};

TEST(Eagle3Head, ConfigIsOneLayerSharingTheTargetsMatrices) {
  VELA_REQUIRE_SHARED();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto head = head_of(test::random_eagle3_head(*target, 3, 0, kLayers), target);
  ASSERT_TRUE(head);
  const ModelConfig& c = head->config();
  ASSERT_TRUE(c.eagle3.has_value());
  EXPECT_EQ(c.eagle3->extract_layers, kLayers);
  EXPECT_EQ(c.eagle3->target_n_embd, target->config().n_embd);
  EXPECT_FALSE(c.eagle3->norm_before_residual);
  EXPECT_EQ(c.eagle3->n_draft_vocab, target->config().n_vocab);
  EXPECT_EQ(c.n_vocab, target->config().n_vocab);
  EXPECT_FALSE(c.mtp_block);
  ASSERT_EQ(c.n_layer, 1);
  ASSERT_EQ(c.layers.size(), 1u);
  EXPECT_EQ(c.layers[0].mixer, MixerKind::kAttention);
  EXPECT_EQ(c.layers[0].kv_index, 0);
  EXPECT_FALSE(c.layers[0].moe);
  EXPECT_EQ(c.n_kv_layers, 1);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_rot, 64);
  EXPECT_EQ(c.n_ff, 512);
  EXPECT_EQ(c.rope_style, RopeStyle::kNormal);
  // No token_embd / output.weight of its own: the target's matrices, not copies.
  const ModelWeights& w = head->weights();
  EXPECT_EQ(w.token_embd.data, target->weights().token_embd.data);
  EXPECT_EQ(w.output.data, target->weights().output.data);
  EXPECT_EQ(head->head_target(), target);
  EXPECT_TRUE(w.eagle3.d2t.empty());
  EXPECT_EQ(w.eagle3.fc.n_rows, 256);
  EXPECT_EQ(w.eagle3.fc.n_cols, 3 * 256);
  EXPECT_EQ(w.layers[0].wq.n_cols, 2 * 256);
  EXPECT_EQ(w.eagle3.hidden_norm.size(), 256u);

  if (!reader_takes_i64()) return;
  auto own = head_of(test::random_eagle3_head(*target, 3, kDraftVocab, kLayers), target);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->config().eagle3->n_draft_vocab, kDraftVocab);
  EXPECT_EQ(own->config().n_vocab, target->config().n_vocab);
  const std::vector<int64_t> ids = test::random_d2t(512, kDraftVocab, 3);
  EXPECT_EQ(own->weights().eagle3.d2t, std::vector<int32_t>(ids.begin(), ids.end()));
  EXPECT_EQ(own->weights().output.n_rows, kDraftVocab);
}

struct ScalarCase {
  int32_t n_draft_vocab;
  bool norm_before_residual;
  bool attn_norm_2;  // the hidden norm under its other name
};

class Eagle3HeadScalar : public ::testing::TestWithParam<ScalarCase> {};

// One token at position 0 from target features, then a chained second token at position 1 from
// the first one's output: logits and hidden rows equal the scalar head's within f32 rounding
// (relative 1e-4 of the largest value; measured 2e-7 to 7e-7 over the kernel levels and
// VELA_REPACK=0).
TEST_P(Eagle3HeadScalar, LogitsAndHiddenEqualAScalarHead) {
  VELA_REQUIRE_SHARED();
  const ScalarCase p = GetParam();
  if (p.n_draft_vocab > 0) REQUIRE_I64_TENSORS();
  auto target = load_target();
  ASSERT_TRUE(target);
  test::Eagle3HeadEdits edits;
  edits.norm_before_residual = p.norm_before_residual;
  edits.hidden_norm_as_attn_norm_2 = p.attn_norm_2;
  const std::vector<uint8_t> image =
      test::random_eagle3_head(*target, 5, p.n_draft_vocab, kLayers, edits);
  auto head = head_of(image, target);
  ASSERT_TRUE(head);
  const ModelConfig& c = head->config();
  EXPECT_EQ(c.eagle3->norm_before_residual, p.norm_before_residual);
  const std::vector<int32_t> tokens = {17, 301};
  const std::vector<float> features = random_rows(1, 3 * c.n_embd, 7);
  ScalarEagle3Head scalar(head->gguf(), target->gguf(), c);
  const Outputs ref0 = scalar.step(tokens[0], features.data(), true);
  const Outputs ref1 = scalar.step(tokens[1], ref0.hidden.data(), false);

  DecoderForward fwd(head, ForwardOptions{8, 8, kBlock * kMaxBlocks, 2, 0});
  KvCache cache = make_cache(*head);
  const Outputs out0 = run(fwd, cache, tokens, features, true, 0, 1);
  // The chained step's input is the pass's own hidden row, as a proposer feeds it.
  std::vector<float> chained(size_t(2 * c.n_embd));
  std::copy(out0.hidden.begin(), out0.hidden.end(), chained.begin() + c.n_embd);
  const Outputs out1 = run(fwd, cache, tokens, chained, false, 1, 1);
  EXPECT_LT(relative_difference(out0.logits, ref0.logits), 1e-4);
  EXPECT_LT(relative_difference(out0.hidden, ref0.hidden), 1e-4);
  EXPECT_LT(relative_difference(out1.logits, ref1.logits), 1e-4);
  EXPECT_LT(relative_difference(out1.hidden, ref1.hidden), 1e-4);
  if (p.n_draft_vocab > 0) {  // d2t leaves most target ids out
    const auto finite = std::count_if(out0.logits.begin(), out0.logits.end(),
                                      [](float v) { return std::isfinite(v); });
    EXPECT_EQ(finite, p.n_draft_vocab);
  }

  // The test can fail: other features move the logits far beyond the bound.
  std::vector<float> other = features;
  other[0] += 3.0f;
  KvCache cache2 = make_cache(*head);
  const Outputs moved = run(fwd, cache2, tokens, other, true, 0, 1);
  EXPECT_GT(relative_difference(moved.logits, ref0.logits), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Heads, Eagle3HeadScalar,
                         ::testing::Values(ScalarCase{0, false, false}, ScalarCase{0, true, true},
                                           ScalarCase{kDraftVocab, false, false},
                                           ScalarCase{kDraftVocab, true, false}),
                         [](const auto& info) {
                           return std::string(info.param.n_draft_vocab > 0 ? "d2t"
                                                                           : "target_vocab") +
                                  (info.param.norm_before_residual ? "_norm_before_residual" : "") +
                                  (info.param.attn_norm_2 ? "_attn_norm_2" : "");
                         });

// Target ids outside d2t get -infinity; those inside get the draft head's product row for their
// draft token: the head's output matrix times its normed hidden row, checked against the
// library's own norm and a double-precision product (relative 1e-5; measured 1e-7).
TEST(Eagle3Head, LogitsOutsideD2tAreMinusInfinity) {
  VELA_REQUIRE_SHARED();
  REQUIRE_I64_TENSORS();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto head = head_of(test::random_eagle3_head(*target, 9, kDraftVocab, kLayers), target);
  ASSERT_TRUE(head);
  const ModelConfig& c = head->config();
  const std::vector<int64_t> d2t = test::random_d2t(c.n_vocab, kDraftVocab, 9);
  const std::vector<int32_t> tokens = {2, 40, 77};
  const std::vector<float> features = random_rows(3, 3 * c.n_embd, 13);
  DecoderForward fwd(head, ForwardOptions{8, 8, kBlock * kMaxBlocks, 2, 0});
  KvCache cache = make_cache(*head);
  const Outputs out = run(fwd, cache, tokens, features, true, 0, 3);
  const int64_t V = c.n_vocab, E = c.n_embd;
  const GgufTensorInfo* output = head->gguf().find_tensor("output.weight");
  ASSERT_NE(output, nullptr);
  const auto* w = reinterpret_cast<const float*>(output->data);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<float> xn(static_cast<size_t>(E));
    rms_norm(out.hidden.data() + r * E, head->weights().output_norm.data(), 1, E, c.rms_eps,
             xn.data());
    std::vector<bool> mapped(size_t(V), false);
    double scale = 0, diff = 0;
    for (int64_t j = 0; j < kDraftVocab; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < E; ++i) dot += double(w[j * E + i]) * xn[size_t(i)];
      const float got = out.logits[size_t(r * V + d2t[size_t(j)])];
      ASSERT_TRUE(std::isfinite(got)) << "row " << r << " draft token " << j;
      diff = std::max(diff, std::abs(double(got) - dot));
      scale = std::max(scale, std::abs(dot));
      mapped[size_t(d2t[size_t(j)])] = true;
    }
    EXPECT_LT(diff / scale, 1e-5) << "row " << r;
    for (int64_t id = 0; id < V; ++id) {
      if (mapped[size_t(id)]) continue;
      EXPECT_EQ(out.logits[size_t(r * V + id)], -std::numeric_limits<float>::infinity())
          << "row " << r << " id " << id;
    }
  }
}

class Eagle3HeadPrefill : public ::testing::TestWithParam<int32_t> {};

// Five tokens with their features in one pass against one token per pass: equal within f32
// rounding of the different batch shapes (relative 1e-4 of the largest value; the pass is batch
// invariant, and they were measured equal bit for bit on every kernel level).
TEST_P(Eagle3HeadPrefill, PrefillEqualsDecodeSteps) {
  VELA_REQUIRE_SHARED();
  if (GetParam() > 0) REQUIRE_I64_TENSORS();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto head = head_of(test::random_eagle3_head(*target, 11, GetParam(), kLayers), target);
  ASSERT_TRUE(head);
  const ModelConfig& c = head->config();
  const std::vector<int32_t> tokens = {3, 141, 59, 265, 358};
  const std::vector<float> features = random_rows(5, 3 * c.n_embd, 11);
  DecoderForward fwd(head, ForwardOptions{8, 8, kBlock * kMaxBlocks, 2, 0});
  KvCache whole_cache = make_cache(*head);
  const Outputs whole = run(fwd, whole_cache, tokens, features, true, 0, 5);
  KvCache step_cache = make_cache(*head);
  const size_t V = size_t(c.n_vocab), E = size_t(c.n_embd);
  for (int32_t i = 0; i < 5; ++i) {
    const Outputs one = run(fwd, step_cache, tokens, features, true, i, 1);
    EXPECT_LT(relative_difference(one.logits, std::span(whole.logits).subspan(i * V, V)), 1e-4)
        << "token " << i;
    EXPECT_LT(relative_difference(one.hidden, std::span(whole.hidden).subspan(i * E, E)), 1e-4)
        << "token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, Eagle3HeadPrefill, ::testing::Values(0, kDraftVocab),
                         [](const auto& info) {
                           return std::string(info.param > 0 ? "d2t" : "target_vocab");
                         });

// A tensor-parallel rank's target holds a slice of the output head: its head reads the whole
// matrices from the target's file and gives the unsharded target's head's outputs, bit for bit.
TEST(Eagle3Head, ShardedTargetGivesTheWholeHead) {
  VELA_REQUIRE_SHARED();
  auto whole_target = load_target();
  ModelLoadOptions rank0;
  rank0.shard = TensorShard{0, 2};
  auto shard_target = load_target(rank0);
  ASSERT_TRUE(whole_target && shard_target);
  const std::vector<uint8_t> image = test::random_eagle3_head(*whole_target, 4, 0, kLayers);
  auto whole = head_of(image, whole_target);
  auto from_shard = head_of(image, shard_target);
  ASSERT_TRUE(whole && from_shard);
  EXPECT_FALSE(from_shard->shard().sharded());
  EXPECT_EQ(from_shard->weights().output.n_rows, whole_target->config().n_vocab);
  EXPECT_LT(shard_target->weights().output.n_rows, whole_target->config().n_vocab);
  const std::vector<int32_t> tokens = {5, 77, 300};
  const std::vector<float> features = random_rows(3, 3 * 256, 3);
  DecoderForward fwd_a(whole, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  DecoderForward fwd_b(from_shard, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  KvCache cache_a = make_cache(*whole), cache_b = make_cache(*from_shard);
  const Outputs a = run(fwd_a, cache_a, tokens, features, true, 0, 3);
  const Outputs b = run(fwd_b, cache_b, tokens, features, true, 0, 3);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.hidden, b.hidden);
}

bool has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

// The error loading a head written with `edits` (empty: it loaded).
std::string head_error(const std::shared_ptr<const Model>& target, int32_t n_draft_vocab,
                       const test::Eagle3HeadEdits& edits,
                       std::array<int32_t, 3> layers = kLayers) {
  std::string error;
  head_of(test::random_eagle3_head(*target, 21, n_draft_vocab, layers, edits), target, &error);
  return error;
}

TEST(Eagle3Head, BadHeadsAreRefusedNamingTheProblem) {
  VELA_REQUIRE_SHARED();
  auto target = load_target();
  ASSERT_TRUE(target);
  test::Eagle3HeadEdits none;
  EXPECT_EQ(head_error(target, 0, none), "");

  // A head alone is not a model.
  auto g = GgufFile::from_bytes(test::random_eagle3_head(*target, 21, 0, kLayers));
  ASSERT_TRUE(g.ok()) << g.message();
  auto alone = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
  ASSERT_FALSE(alone.ok());
  EXPECT_TRUE(has(alone.message(),
                  "an EAGLE-3 draft head: load it with a target model "
                  "(--speculative-method eagle3 --draft-model FILE)"))
      << alone.message();
  // Nor is a target a head.
  auto target_file = GgufFile::open(target_path());
  ASSERT_TRUE(target_file.ok()) << target_file.message();
  auto not_head =
      Model::eagle3_head(std::make_shared<const GgufFile>(std::move(*target_file)), target);
  ASSERT_FALSE(not_head.ok());
  EXPECT_TRUE(has(not_head.message(), "'llama' is not an EAGLE-3 draft head"))
      << not_head.message();

  std::string e;
  test::Eagle3HeadEdits edits;
  edits.drop_keys = {"eagle3.extract_layers"};
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e, "missing metadata 'eagle3.extract_layers'")) << e;
  edits = {};
  edits.extract_layers = std::vector<int32_t>{0, 2};
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e, "metadata 'eagle3.extract_layers' has 2 entries, expected 3")) << e;
  e = head_error(target, 0, none, {0, 2, 4});
  EXPECT_TRUE(
      has(e, "'eagle3.extract_layers' entry 4 is not a layer of the target (layers 0 to 3)"))
      << e;
  e = head_error(target, 0, none, {-1, 2, 3});
  EXPECT_TRUE(has(e, "entry -1 is not a layer of the target")) << e;
  edits = {};
  edits.target_hidden_size = 128;
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e,
                  "metadata 'eagle3.target_hidden_size' = 128 differs from the target's "
                  "embedding_length 256"))
      << e;
  edits = {};
  edits.drop_keys = {"eagle3.target_hidden_size"};
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e, "missing metadata 'eagle3.target_hidden_size'")) << e;

  edits = {};
  edits.d2t_as_f32 = true;
  e = head_error(target, kDraftVocab, edits);
  EXPECT_TRUE(has(e, "tensor 'd2t' has type F32, expected I64")) << e;

  for (const char* tensor : {"fc.weight", "output_norm.weight", "blk.0.attn_norm.weight",
                             "blk.0.attn_v.weight", "blk.0.ffn_down.weight"}) {
    edits = {};
    edits.drop_tensors = {tensor};
    e = head_error(target, 0, edits);
    EXPECT_TRUE(has(e, "missing tensor '" + std::string(tensor) + "'")) << e;
  }
  edits = {};
  edits.drop_tensors = {"blk.0.hidden_norm.weight"};
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e, "missing tensor 'blk.0.hidden_norm.weight' (or 'blk.0.attn_norm_2.weight')"))
      << e;
  edits = {};
  edits.fc_cols = 2 * 256;
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e, "tensor 'fc.weight' has shape [512, 256], expected [768, 256]")) << e;
  edits = {};
  edits.attn_q_cols = 256;
  e = head_error(target, 0, edits);
  EXPECT_TRUE(has(e, "tensor 'blk.0.attn_q.weight' has shape [256, 256], expected [512, 256]"))
      << e;

  if (!reader_takes_i64()) return;  // the rest need heads with a d2t
  EXPECT_EQ(head_error(target, kDraftVocab, none), "");
  edits = {};
  edits.drop_tensors = {"output.weight"};
  e = head_error(target, kDraftVocab, edits);
  EXPECT_TRUE(has(e,
                  "no output.weight, but its draft vocabulary (d2t: 100 tokens) is not the "
                  "target's (512 tokens)"))
      << e;
  edits = {};
  edits.d2t = test::random_d2t(512, kDraftVocab, 21);
  (*edits.d2t)[7] = 512;
  e = head_error(target, kDraftVocab, edits);
  EXPECT_TRUE(has(e, "tensor 'd2t' entry 7 = 512 is not a target token id [0, 512)")) << e;
  (*edits.d2t)[7] = -3;
  e = head_error(target, kDraftVocab, edits);
  EXPECT_TRUE(has(e, "tensor 'd2t' entry 7 = -3 is not a target token id")) << e;
  // An identity d2t over the whole vocabulary is the target's vocabulary: the target's head
  // serves, and nothing is scattered.
  edits = {};
  edits.d2t = std::vector<int64_t>(512);
  for (int64_t i = 0; i < 512; ++i) (*edits.d2t)[size_t(i)] = i;
  edits.drop_tensors = {"output.weight"};
  std::string error;
  auto identity =
      head_of(test::random_eagle3_head(*target, 21, 512, kLayers, edits), target, &error);
  ASSERT_TRUE(identity) << error;
  EXPECT_TRUE(identity->weights().eagle3.d2t.empty());
  EXPECT_EQ(identity->weights().output.data, target->weights().output.data);
}

TEST(Eagle3Head, BadBatchesAreRejected) {
  VELA_REQUIRE_SHARED();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto head = head_of(test::random_eagle3_head(*target, 8, 0, kLayers), target);
  ASSERT_TRUE(head);
  const int64_t E = head->config().n_embd;
  const std::vector<int32_t> tokens = {1, 2};
  DecoderForward fwd(head, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  KvCache cache = make_cache(*head);
  Status st;
  // Features of the wrong width (the head's own outputs' width), none at all, and too few of
  // the head's own outputs.
  run(fwd, cache, tokens, random_rows(2, E, 1), true, 0, 2, &st);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "an EAGLE-3 head needs input_hidden of n_tokens x 3 target n_embd"))
      << st.message();
  run(fwd, cache, tokens, {}, false, 0, 1, &st);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "input_hidden")) << st.message();
  run(fwd, cache, tokens, random_rows(1, E, 1), false, 0, 2, &st);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "n_tokens x n_embd (its outputs) = 512 floats, got 256"))
      << st.message();
  run(fwd, cache, tokens, random_rows(2, 3 * E, 1), true, 0, 2, &st);
  EXPECT_TRUE(st.ok()) << st.message();

  // The target takes neither input_hidden nor target features.
  DecoderForward target_fwd(target, ForwardOptions{8, 8, kBlock * kMaxBlocks, 1, 0});
  KvCache target_cache = make_cache(*target);
  std::vector<int32_t> ids = {1}, pos = {0}, seq = {0}, table(kMaxBlocks, 0), want = {0};
  std::vector<float> logits(size_t(target->config().n_vocab));
  ForwardBatch b{ids, pos, seq, table, kMaxBlocks, want};
  b.input_is_target_features = true;
  st = target_fwd.forward(b, target_cache, logits);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "input_is_target_features is for an EAGLE-3 head")) << st.message();
  b.input_is_target_features = false;
  st = target_fwd.forward(b, target_cache, logits);
  EXPECT_TRUE(st.ok()) << st.message();
}

// The target's pass over two sequences (5 and 3 tokens) with hidden rows of every token, and
// with layer_inputs when `capture` is not null: [n_tokens, layers.size() * n_embd].
Outputs target_pass(DecoderForward& fwd, const Model& m, std::vector<float>* capture,
                    Status* status = nullptr) {
  const ModelConfig& c = m.config();
  KvCache cache = make_cache(m);
  const std::vector<int32_t> ids = {1, 45, 300, 7, 99, 1, 12, 400};
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 0, 1, 2};
  const std::vector<int32_t> seq = {0, 0, 0, 0, 0, 1, 1, 1};
  const std::vector<int32_t> table = {0, 1, -1, -1, 2, 3, -1, -1};
  std::vector<int32_t> rows(ids.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = int32_t(i);
  std::reverse(rows.begin(), rows.end());  // rows named out of order
  const size_t T = ids.size();
  Outputs out{std::vector<float>(T * size_t(c.n_vocab)), std::vector<float>(T * size_t(c.n_embd))};
  ForwardBatch b{ids, pos, seq, table, kMaxBlocks, rows, rows};
  if (capture != nullptr) {
    // Room for one layer at least (a bad-capture test asks without layers).
    const size_t K = std::max<size_t>(1, fwd.options().capture_layer_inputs.size());
    capture->assign(T * K * size_t(c.n_embd), 0.0f);
    b.layer_inputs = *capture;
  }
  const Status st = fwd.forward(b, cache, out.logits, out.hidden);
  if (status != nullptr)
    *status = st;
  else
    EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Capturing layers 0, 2 and 3 of the 4-layer target: row i's layer-0 input is its token's
// embedding row, and layer l's input is the residual stream after l layers: normed with the
// output norm, it is the final hidden row of the target cut to its first l layers, bit for bit.
// Capturing changes no logit or hidden row, and passes without layer_inputs capture nothing.
TEST(Eagle3TargetCapture, LayerInputsAreTheResidualStreamEnteringEachLayer) {
  VELA_REQUIRE_SHARED();
  auto target = load_target();
  ASSERT_TRUE(target);
  const ModelConfig& c = target->config();
  const int64_t E = c.n_embd;
  const std::vector<int32_t> layers = {0, 2, c.n_layer - 1};
  ForwardOptions plain_options{16, 16, kBlock * kMaxBlocks, 2, 0};
  ForwardOptions capture_options = plain_options;
  capture_options.capture_layer_inputs = layers;
  DecoderForward plain(target, plain_options), capturing(target, capture_options);
  const Outputs expected = target_pass(plain, *target, nullptr);
  std::vector<float> inputs;
  const Outputs got = target_pass(capturing, *target, &inputs);
  EXPECT_EQ(got.logits, expected.logits);
  EXPECT_EQ(got.hidden, expected.hidden);
  // Without layer_inputs the capturing forward pass is a plain one.
  const Outputs uncaptured = target_pass(capturing, *target, nullptr);
  EXPECT_EQ(uncaptured.logits, expected.logits);

  const std::vector<int32_t> ids = {1, 45, 300, 7, 99, 1, 12, 400};
  const auto* embd =
      reinterpret_cast<const float*>(target->gguf().find_tensor("token_embd.weight")->data);
  const int64_t K = int64_t(layers.size());
  for (int64_t i = 0; i < 8; ++i) {
    const int64_t t = 7 - i;  // rows were named in reverse
    const float* row = inputs.data() + i * K * E;
    EXPECT_TRUE(std::equal(row, row + E, embd + int64_t(ids[size_t(t)]) * E)) << "row " << i;
  }
  // Layers 2 and 3 against the target cut to 2 and 3 layers.
  auto src = GgufFile::open(target_path());
  ASSERT_TRUE(src.ok()) << src.message();
  for (int64_t k = 1; k < K; ++k) {
    const int32_t n_layer = layers[size_t(k)];
    auto cut_file =
        GgufFile::from_bytes(test::rewrite_model(*src, {{"llama.block_count", n_layer}}));
    ASSERT_TRUE(cut_file.ok()) << cut_file.message();
    auto cut = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*cut_file)));
    ASSERT_TRUE(cut.ok()) << cut.message();
    DecoderForward cut_fwd(*cut, plain_options);
    const Outputs cut_out = target_pass(cut_fwd, **cut, nullptr);
    for (int64_t i = 0; i < 8; ++i) {
      std::vector<float> normed(static_cast<size_t>(E));
      rms_norm(inputs.data() + (i * K + k) * E, target->weights().output_norm.data(), 1, E,
               c.rms_eps, normed.data());
      EXPECT_TRUE(std::equal(normed.begin(), normed.end(), cut_out.hidden.begin() + i * E))
          << "layer " << n_layer << " row " << i;
    }
  }
}

TEST(Eagle3TargetCapture, BadCapturesAreRejected) {
  VELA_REQUIRE_SHARED();
  auto target = load_target();
  ASSERT_TRUE(target);
  ForwardOptions o{16, 16, kBlock * kMaxBlocks, 1, 0};
  DecoderForward plain(target, o);
  std::vector<float> inputs;
  Status st;
  target_pass(plain, *target, &inputs, &st);  // layer_inputs without layers: nothing to fill
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "capture_layer_inputs is empty")) << st.message();
  o.capture_layer_inputs = {0, 4};
  DecoderForward past_the_end(target, o);
  target_pass(past_the_end, *target, &inputs, &st);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(
      has(st.message(), "capture_layer_inputs entry 4 is not a layer of the model (0 to 3)"))
      << st.message();
}

// Tensor-parallel (2 ranks): rank 0 captures the stream every rank holds whole after each
// layer's all-reduce: layer 0's input is the one process's exactly, the later ones within the
// float rounding of the reordered sums (relative 1e-4; measured up to 3e-6). A pipeline refuses
// to capture.
TEST(Eagle3TargetCapture, TensorParallelRankZeroCapturesPipelinesRefuse) {
  VELA_REQUIRE_SHARED();
  auto whole = load_target();
  ASSERT_TRUE(whole);
  const std::vector<int32_t> layers = {0, 2, 3};
  ForwardOptions o{16, 16, kBlock * kMaxBlocks, 1, 0};
  o.capture_layer_inputs = layers;
  DecoderForward fwd(whole, o);
  std::vector<float> expected;
  target_pass(fwd, *whole, &expected);

  for (const int32_t n_stages : {1, 2}) {
    SCOPED_TRACE(n_stages);
    const int32_t n_ranks = 3 - n_stages;  // 2 ranks of one stage, or 2 stages of one rank
    test::ThreadGroup group(n_ranks, n_stages);
    std::vector<float> got;
    Status rank0_status;
    std::vector<std::thread> workers;
    for (int32_t w = 0; w < n_ranks * n_stages; ++w) {
      workers.emplace_back([&, w] {
        ModelLoadOptions lo;
        lo.shard = {w % n_ranks, n_ranks, w / n_ranks, n_stages};
        auto model = Model::load(target_path(), lo);
        if (!model) {
          ADD_FAILURE() << "rank " << w << ": " << model.message();
          std::abort();  // the other ranks would wait for ever
        }
        auto rank = std::make_shared<test::ThreadGroup::Rank>(group, w);
        ForwardOptions ro = o;
        ro.tensor_parallel = rank;
        DecoderForward rank_fwd(*model, ro);
        if (w == 0) {
          target_pass(rank_fwd, **model, &got, &rank0_status);
          rank->close();
        } else {
          KvCache cache = make_cache(**model);
          const Status st = run_tensor_parallel_worker(rank_fwd, cache, *rank);
          EXPECT_TRUE(st.ok()) << st.message();
        }
      });
    }
    for (std::thread& t : workers) t.join();
    if (n_stages > 1) {
      EXPECT_FALSE(rank0_status.ok());
      EXPECT_TRUE(has(rank0_status.message(), "not supported with pipeline parallelism"))
          << rank0_status.message();
      continue;
    }
    ASSERT_TRUE(rank0_status.ok()) << rank0_status.message();
    ASSERT_EQ(got.size(), expected.size());
    const int64_t E = 256, K = 3;
    for (int64_t i = 0; i < 8; ++i) {
      const auto at = [&](const std::vector<float>& v, int64_t k) {
        return std::span<const float>(v).subspan(size_t((i * K + k) * E), size_t(E));
      };
      EXPECT_TRUE(std::ranges::equal(at(got, 0), at(expected, 0))) << "row " << i;
      for (int64_t k = 1; k < K; ++k)
        EXPECT_LT(relative_difference(at(got, k), at(expected, k)), 1e-4)
            << "row " << i << " layer " << layers[size_t(k)];
    }
  }
}

}  // namespace
}  // namespace vela

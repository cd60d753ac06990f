// Multi-head latent attention (deepseek2): the geometry, scale and routing read from the file, a
// cache of one compressed row per token, the Lite form (one attn_q matrix) against the q_lora
// form, clear errors for bad files, what a tensor-parallel rank keeps (its logits against one
// process's: tensor_parallel_test.cpp), and the expanded form against the absorbed one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/rope.h"
#include "model_rewrite.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "sequence_runner.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr const char* kModel = "models/tiny-deepseek2-F32.gguf";

std::shared_ptr<const Model> load_shared() {
  auto m = Model::load(test::shared_path(kModel).string());
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

Result<std::shared_ptr<const Model>> load_bytes(const std::vector<uint8_t>& bytes) {
  auto g = GgufFile::from_bytes(bytes);
  if (!g) return g.error();
  return Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
}

TEST(LatentAttention, GeometryScaleAndRoutingOfTheSharedFile) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared();
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.latent_attention());
  EXPECT_EQ(c.mla.q_lora_rank, 96);
  EXPECT_EQ(c.mla.kv_lora_rank, 64);
  EXPECT_EQ(c.mla.nope_dim, 32);
  EXPECT_EQ(c.mla.rope_dim, 16);
  EXPECT_EQ(c.mla.v_head_dim, 32);
  // The absorbed form: one shared head of kv_lora + rope values, which the file's key_length
  // states too.
  EXPECT_EQ(c.head_dim, 80);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.n_rot, 16);
  EXPECT_EQ(c.rope_style, RopeStyle::kNormal);
  for (const LayerConfig& l : c.layers) EXPECT_EQ(l.mixer, MixerKind::kLatentAttention);
  // YaRN factor 4, yarn_log_multiplier 0.1: RoPE keeps the pairs' norm, the scores take
  // (1 + 0.1 ln 4)^2 / sqrt(48).
  const double mscale = 1.0 + 0.1 * std::log(4.0);
  EXPECT_NEAR(c.mla.scale, mscale * mscale / std::sqrt(48.0), 1e-6);
  EXPECT_NEAR(rope_frequencies(c.rope, c.n_rot, {}).mscale, 1.0f, 1e-6f);
  // One leading dense layer, then 8 experts (2 used) in 4 groups (2 used), sigmoid scores
  // renormalised and scaled by 2.5, one ungated shared expert of the experts' width.
  EXPECT_FALSE(c.layers[0].moe);
  EXPECT_TRUE(c.layers[1].moe);
  EXPECT_TRUE(c.layers[2].moe);
  EXPECT_EQ(c.expert_gating, ExpertGating::kSigmoid);
  EXPECT_TRUE(c.renormalize_experts);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
  EXPECT_EQ(c.n_expert_groups, 4);
  EXPECT_EQ(c.n_expert_groups_used, 2);
  EXPECT_EQ(c.n_ff_shared_expert, 64);
  EXPECT_FALSE(c.shared_expert_gated);
  const ModelWeights& w = model->weights();
  EXPECT_TRUE(w.layers[0].router.data == nullptr && w.layers[0].w_gate.data != nullptr);
  EXPECT_EQ(w.layers[1].expert_bias.size(), 8u);
  EXPECT_TRUE(w.layers[1].shared_expert_gate.empty());
}

// The cache keeps kv_lora_rank + rope values per token and layer, and no V.
TEST(LatentAttention, CacheHoldsOneCompressedRowPerToken) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared();
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  const int32_t block = 16;
  for (const auto& [type, elem_bytes] :
       std::vector<std::pair<KvType, size_t>>{{KvType::kF16, 2}, {KvType::kF32, 4}}) {
    const KvCacheConfig kc = model_cache_config(c, block, 4, type);
    EXPECT_TRUE(kc.k_only);
    EXPECT_EQ(KvCache::bytes_per_block(kc) / block, size_t(64 + 16) * elem_bytes * 3)
        << kv_type_name(type);
  }
  // A cache that keeps V as well does not fit the model.
  KvCacheConfig kv_too = model_cache_config(c, block, 4, KvType::kF16);
  kv_too.k_only = false;
  KvCache cache(kv_too);
  DecoderForward fwd(model, ForwardOptions{8, 8, 64, 1});
  const std::vector<int32_t> ids = {1, 2}, pos = {0, 1}, seq = {0, 0}, table = {0, 1, 2, 3},
                             want = {1};
  std::vector<float> logits(size_t(c.n_vocab));
  const Status st = fwd.forward(ForwardBatch{ids, pos, seq, table, 4, want}, cache, logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("KV cache geometry"), std::string::npos) << st.message();
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A copy of `src` with tensors replaced or added (name -> [ne, values], stored in put_type: F32,
// or Q8_0 row by row), tensors dropped and u32 metadata set or dropped.
std::vector<uint8_t> rewrite(
    const GgufFile& src,
    const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>& put,
    const std::vector<std::string>& drop,
    const std::vector<std::pair<std::string, int64_t>>& set_u32,
    GgmlType put_type = GgmlType::F32) {
  GgufWriter w;
  const auto dropped = [&](std::string_view name) {
    return std::find(drop.begin(), drop.end(), std::string(name)) != drop.end();
  };
  for (const auto& [key, value] : src.metadata()) {
    bool skip = dropped(key);
    for (const auto& s : set_u32) skip |= s.first == key;
    if (!skip) w.add_value(key, value);
  }
  for (const auto& [key, value] : set_u32) w.add_u32(key, uint32_t(value));
  for (const GgufTensorInfo& t : src.tensors()) {
    if (dropped(t.name) || put.count(std::string(t.name))) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type(), ne, {t.data, t.data + t.n_bytes}).ok());
  }
  for (const auto& [name, tensor] : put) {
    std::vector<uint8_t> bytes = f32_bytes(tensor.second);
    if (put_type == GgmlType::Q8_0) {
      const int64_t cols = tensor.first[0], rows = int64_t(tensor.second.size()) / cols;
      const int64_t row_q = cols / 32 * 34;
      bytes.assign(size_t(rows * row_q), 0);
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(GgmlType::Q8_0, tensor.second.data() + r * cols, bytes.data() + r * row_q,
                     cols);
    }
    EXPECT_TRUE(w.add_tensor(name, put_type, tensor.first, bytes).ok());
  }
  return w.to_bytes();
}

// Without a q_lora (DeepSeek-V2-Lite) the query is attn_q x. Against it, the q_lora form with
// attn_q_a the identity, a norm of ones and attn_q_b = attn_q computes attn_q rms_norm(x): the
// same where x already has an RMS of 1, as it does with attention norms of ones (up to the
// norm's eps, 1e-6 relative). Both files get the same random attn_q.
TEST(LatentAttention, LiteFormMatchesTheQLoraForm) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path(kModel).string());
  ASSERT_TRUE(src.ok()) << src.message();
  const int64_t E = 128, q_rows = 4 * 48;
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 4.0f / std::sqrt(float(E)));
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> lite, lora;
  std::vector<std::string> lite_drop = {"deepseek2.attention.q_lora_rank"};
  std::vector<float> identity(size_t(E * E), 0.0f);
  for (int64_t i = 0; i < E; ++i) identity[size_t(i * E + i)] = 1.0f;
  for (int i = 0; i < 3; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    std::vector<float> wq(size_t(q_rows * E));
    for (float& x : wq) x = normal(rng);
    const std::vector<float> ones(size_t(E), 1.0f);
    lite[p + "attn_q.weight"] = {{E, q_rows}, wq};
    lite[p + "attn_norm.weight"] = {{E}, ones};
    for (const char* t : {"attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight"})
      lite_drop.push_back(p + t);
    lora[p + "attn_q_a.weight"] = {{E, E}, identity};
    lora[p + "attn_q_a_norm.weight"] = {{E}, ones};
    lora[p + "attn_q_b.weight"] = {{E, q_rows}, wq};
    lora[p + "attn_norm.weight"] = {{E}, ones};
  }
  auto lite_model = load_bytes(rewrite(*src, lite, lite_drop, {}));
  ASSERT_TRUE(lite_model.ok()) << lite_model.message();
  auto lora_model = load_bytes(rewrite(*src, lora, {}, {{"deepseek2.attention.q_lora_rank", E}}));
  ASSERT_TRUE(lora_model.ok()) << lora_model.message();
  EXPECT_EQ((*lite_model)->config().mla.q_lora_rank, 0);
  EXPECT_NE((*lite_model)->weights().layers[0].mla.q.data, nullptr);
  EXPECT_EQ((*lora_model)->config().mla.q_lora_rank, E);

  // A prompt, then decode steps: prefill and decode both. f32 cache: no rounding flips.
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 24; ++i) tokens.push_back(1 + (i * 37) % 500);
  test::SequenceRunner a(*lite_model, KvType::kF32), b(*lora_model, KvType::kF32);
  const std::span<const int32_t> prompt(tokens.data(), 20);
  std::vector<float> la = a.append(prompt), lb = b.append(prompt);
  for (size_t i = 20; i < tokens.size(); ++i) {
    const std::span<const int32_t> one(&tokens[i], 1);
    const std::vector<float> da = a.append(one), db = b.append(one);
    la.insert(la.end(), da.begin(), da.end());
    lb.insert(lb.end(), db.begin(), db.end());
  }
  ASSERT_EQ(la.size(), lb.size());
  float worst = 0.0f, largest = 0.0f;
  for (size_t i = 0; i < la.size(); ++i) {
    worst = std::max(worst, std::abs(la[i] - lb[i]));
    largest = std::max(largest, std::abs(la[i]));
  }
  // Logits of magnitude ~10 from inputs 1e-6 apart: a few 1e-5 through three layers.
  EXPECT_LE(worst, 1e-3f) << "largest logit " << largest;
  EXPECT_GT(largest, 1.0f);
  std::printf("Lite form vs q_lora form: worst logit difference %.3g (largest logit %.3g)\n",
              double(worst), double(largest));
}

TEST(LatentAttention, ClearErrorsForBadFiles) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path(kModel).string());
  ASSERT_TRUE(src.ok()) << src.message();
  const auto load = [&](const std::vector<std::pair<std::string, int64_t>>& set,
                        const std::vector<std::string>& drop = {}) -> std::string {
    auto m = load_bytes(test::rewrite_model(*src, set, drop));
    return m ? "" : m.message();
  };
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  std::string e = load({{"deepseek2.attention.kv_lora_rank", 0}});
  EXPECT_TRUE(has(e, "metadata 'deepseek2.attention.kv_lora_rank' is missing or 0")) << e;
  e = load({}, {"deepseek2.attention.kv_lora_rank"});
  EXPECT_TRUE(has(e, "metadata 'deepseek2.attention.kv_lora_rank' is missing or 0")) << e;
  e = load({}, {"deepseek2.attention.key_length_mla"});
  EXPECT_TRUE(has(e, "missing metadata 'deepseek2.attention.key_length_mla'")) << e;
  e = load({{"deepseek2.attention.key_length", 96}});
  EXPECT_TRUE(has(e, "differ from kv_lora_rank + rope.dimension_count = 80")) << e;
  for (const char* t :
       {"blk.1.attn_k_b.weight", "blk.0.attn_v_b.weight", "blk.2.attn_kv_a_mqa.weight",
        "blk.2.attn_kv_a_norm.weight", "blk.1.attn_q_a_norm.weight", "blk.0.attn_q_b.weight"}) {
    e = load({}, {t});
    EXPECT_TRUE(has(e, std::string("missing tensor '") + t + "'")) << e;
  }
  e = load({{"deepseek2.attention.value_length_mla", 16}});
  EXPECT_TRUE(has(e, "tensor 'blk.0.attn_v_b.weight' has shape [64, 32, 4], expected [64, 16, 4]"))
      << e;
  e = load({{"deepseek2.attention.q_lora_rank", 0}});  // the Lite form, without its attn_q
  EXPECT_TRUE(has(e, "missing tensor 'blk.0.attn_q.weight'")) << e;
  e = load({{"deepseek2.expert_gating_func", 3}});
  EXPECT_TRUE(has(e, "expert_gating_func' = 3 is not supported")) << e;
  e = load({{"deepseek2.expert_group_count", 3}});
  EXPECT_TRUE(has(e, "does not split expert_count 8")) << e;
  e = load({{"deepseek2.leading_dense_block_count", 2}});  // layer 1 has no dense FFN
  EXPECT_TRUE(has(e, "missing tensor 'blk.1.ffn_gate.weight'")) << e;
}

// A tensor-parallel rank keeps its heads' rows of attn_q_b, attn_k_b and attn_v_b and its
// heads' columns of attn_output; the latent path every head shares (attn_q_a, attn_kv_a_mqa,
// their norms) stays whole, and so does the cache row: each rank's cache is the whole model's.
TEST(LatentAttention, ATensorParallelRankKeepsItsHeadsAndTheWholeLatentPath) {
  VELA_REQUIRE_SHARED();
  // The file's row-major layout, so that a row's values are where the comparisons look.
  ModelLoadOptions o;
  o.repack_weights = false;
  auto whole_model = Model::load(test::shared_path(kModel).string(), o);
  ASSERT_TRUE(whole_model.ok()) << whole_model.message();
  const std::shared_ptr<const Model>& whole = *whole_model;
  o.shard = {1, 2};
  auto rank = Model::load(test::shared_path(kModel).string(), o);
  ASSERT_TRUE(rank.ok()) << rank.message();
  const ModelConfig& c = (*rank)->config();
  EXPECT_EQ(c.n_head, 2);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.head_dim, 80);
  const KvCacheConfig mine = model_cache_config(c, 16, 4, KvType::kF16);
  const KvCacheConfig all = model_cache_config(whole->config(), 16, 4, KvType::kF16);
  EXPECT_TRUE(mine.k_only);
  EXPECT_EQ(mine.n_layer, all.n_layer);
  EXPECT_EQ(mine.n_head_kv, all.n_head_kv);
  EXPECT_EQ(mine.head_dim, all.head_dim);
  for (int32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LatentAttentionWeights& m = (*rank)->weights().layers[size_t(i)].mla;
    const LatentAttentionWeights& w = whole->weights().layers[size_t(i)].mla;
    EXPECT_EQ(m.q_a.n_rows, 96);
    EXPECT_EQ(m.q_a_norm.size(), 96u);
    EXPECT_EQ(m.kv_a.n_rows, 80);
    EXPECT_EQ(m.kv_a_norm.size(), 64u);
    // Rank 1's heads are 2 and 3: the second half of each per-head stack.
    EXPECT_EQ(m.q_b.n_rows, 2 * 48);
    EXPECT_EQ(m.k_b.n_rows, 2 * 64);
    EXPECT_EQ(m.v_b.n_rows, 2 * 32);
    EXPECT_EQ(m.k_b.n_cols, 32);
    EXPECT_EQ((*rank)->weights().layers[size_t(i)].wo.n_cols, 2 * 32);
    // The views' first rows are the whole model's head 2 rows, wo's first column its column 64.
    const auto row = [](const WeightMatrix& x, int64_t r) {
      return static_cast<const float*>(x.data)[r * x.n_cols];
    };
    EXPECT_EQ(row(m.q_b, 0), row(w.q_b, 2 * 48));
    EXPECT_EQ(row(m.k_b, 0), row(w.k_b, 2 * 64));
    EXPECT_EQ(row(m.v_b, 0), row(w.v_b, 2 * 32));
    // The expanded form's k_b_t: each local head's attn_k_b transposed, [2 * 32, 64].
    EXPECT_EQ(m.k_b_t.n_rows, 2 * 32);
    EXPECT_EQ(m.k_b_t.n_cols, 64);
    const auto at = [](const WeightMatrix& x, int64_t r, int64_t col) {
      return static_cast<const float*>(x.data)[r * x.n_cols + col];
    };
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t r : {0, 17, 63})
        for (int64_t col : {0, 5, 31})
          ASSERT_EQ(at(m.k_b_t, h * 32 + col, r), at(w.k_b, (2 + h) * 64 + r, col));
    const WeightMatrix& wo = (*rank)->weights().layers[size_t(i)].wo;
    const WeightMatrix& wo_all = whole->weights().layers[size_t(i)].wo;
    EXPECT_EQ(static_cast<const float*>(wo.data)[0],
              static_cast<const float*>(wo_all.data)[2 * 32]);
  }
}

// Latent attention's two forms over one sequence: the absorbed form for every token
// (latent_expanded_min_tokens 0) and the expanded form for every run of two or more tokens (1),
// chunks of `chunks` tokens, then decode steps. Logits of every token, [n, n_vocab].
std::vector<float> run_sequence(const std::shared_ptr<const Model>& model, KvType kv_type,
                                int32_t expanded_min_tokens, const std::vector<int32_t>& chunks,
                                const std::vector<int32_t>& tokens) {
  ForwardOptions o{256, 256, 512, 2, 0};
  o.latent_expanded_min_tokens = expanded_min_tokens;
  test::SequenceRunner runner(model, kv_type, o);
  std::vector<float> logits;
  size_t at = 0;
  for (int32_t n : chunks) {
    const std::vector<float> part = runner.append({tokens.data() + at, size_t(n)});
    logits.insert(logits.end(), part.begin(), part.end());
    at += size_t(n);
  }
  for (; at < tokens.size(); ++at) {
    const std::vector<float> part = runner.append({tokens.data() + at, 1});
    logits.insert(logits.end(), part.begin(), part.end());
  }
  return logits;
}

std::vector<int32_t> some_tokens(size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int32_t(3 + (i * 37 + 11) % 500);
  return t;
}

// The expanded form computes what the absorbed one does, within f32 rounding: over 200 prompt
// tokens (key blocks of 128 crossed, chunks deep into the context) and 6 decode steps, with f32
// cache rows every logit within 2e-4 of the largest one's magnitude (measured: 5e-5 to 8.5e-5 on
// every kernel level) and the same greedy token. Over f16 and q8_0 rows the absorbed form keeps
// their contract (f16-rounded queries and probabilities; rows requantized after any rounding
// difference), which this random-weight model amplifies, now and then into a different expert
// choice: there 4 tokens in 5 stay within 1e-2 and 9 in 10 pick the same token (measured: 184-186
// of 206 within, 203 the same pick with f16 rows; a reroute moves one by 0.6). A wrong expansion
// (k_b instead of its transpose, a value product left out, a key block's softmax step not
// rescaling) is off by the logits' own scale.
TEST(LatentAttention, ExpandedFormComputesWhatTheAbsorbedFormComputes) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared();
  ASSERT_TRUE(model);
  const size_t V = size_t(model->config().n_vocab);
  const std::vector<int32_t> tokens = some_tokens(206);
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
    SCOPED_TRACE(kv_type_name(type));
    const std::vector<int32_t> chunks = {90, 60, 50};
    const std::vector<float> absorbed = run_sequence(model, type, 0, chunks, tokens);
    const std::vector<float> expanded = run_sequence(model, type, 1, chunks, tokens);
    ASSERT_EQ(absorbed.size(), expanded.size());
    double worst = 0.0, differ = 0.0;
    int32_t within = 0, same_pick = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* a = absorbed.data() + t * V;
      const float* e = expanded.data() + t * V;
      float scale = 0.0f;
      for (size_t i = 0; i < V; ++i) scale = std::max(scale, std::fabs(a[i]));
      double token_worst = 0.0;
      for (size_t i = 0; i < V; ++i) {
        token_worst = std::max(token_worst, double(std::fabs(a[i] - e[i])) / scale);
        differ += a[i] != e[i];
      }
      worst = std::max(worst, token_worst);
      within += token_worst <= 1e-2;
      same_pick += std::max_element(a, a + V) - a == std::max_element(e, e + V) - e;
    }
    if (type == KvType::kF32) {
      EXPECT_LT(worst, 2e-4);
      EXPECT_EQ(same_pick, int32_t(tokens.size()));
    } else {
      EXPECT_GE(within, int32_t(tokens.size()) * 4 / 5);
      EXPECT_GE(same_pick, int32_t(tokens.size()) * 9 / 10);
    }
    EXPECT_GT(differ, 0.0) << "the two forms ran the same arithmetic";
  }
}

// Within the expanded form a token's logits do not depend on how its sequence was split into
// passes: one pass of 200, 70 + 130, 33 + 64 + 103 (then decode steps in the absorbed form) give
// bit-identical logits, since key blocks start at fixed positions and each token takes them in
// order.
TEST(LatentAttention, ExpandedFormDoesNotDependOnTheSplit) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared();
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = some_tokens(204);
  const std::vector<float> whole = run_sequence(model, KvType::kF16, 1, {200}, tokens);
  EXPECT_EQ(run_sequence(model, KvType::kF16, 1, {70, 130}, tokens), whole);
  EXPECT_EQ(run_sequence(model, KvType::kF16, 1, {33, 64, 103}, tokens), whole);
}

// The form is a run's own: in a batch where one sequence's 40-token chunk takes the expanded form
// and another's decode step the absorbed one, each sequence's logits equal those of the same
// passes of it alone, bit for bit.
TEST(LatentAttention, ARunsFormDoesNotDependOnTheRestOfTheBatch) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared();
  ASSERT_TRUE(model);
  const size_t V = size_t(model->config().n_vocab);
  ForwardOptions o{256, 256, 512, 2, 0};
  o.latent_expanded_min_tokens = 1;
  const std::vector<int32_t> a = some_tokens(80), b = some_tokens(31);
  // Alone: a as 40 + 40, b as 30 + 1.
  test::SequenceRunner alone_a(model, KvType::kF16, o), alone_b(model, KvType::kF16, o);
  alone_a.append({a.data(), 40});
  const std::vector<float> a_second = alone_a.append({a.data() + 40, 40});
  alone_b.append({b.data(), 30});
  const std::vector<float> b_last = alone_b.append({b.data() + 30, 1});

  // Together: the first chunks in one pass, then b's decode step before a's second chunk.
  DecoderForward fwd(model, o);
  KvCache cache(model_cache_config(model->config(), 16, 16, KvType::kF16));
  constexpr int32_t kMaxBlocks = 8;
  std::vector<int32_t> table(2 * kMaxBlocks);
  for (int32_t i = 0; i < 2 * kMaxBlocks; ++i) table[size_t(i)] = 2 * kMaxBlocks - 1 - i;
  const auto pass = [&](const std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>>& runs) {
    std::vector<int32_t> ids, pos, seq, want;
    for (const auto& [s, range] : runs)
      for (int32_t p = range.first; p < range.first + range.second; ++p) {
        want.push_back(int32_t(ids.size()));
        ids.push_back((s == 0 ? a : b)[size_t(p)]);
        pos.push_back(p);
        seq.push_back(s);
      }
    std::vector<float> logits(ids.size() * V);
    const Status st =
        fwd.forward(ForwardBatch{ids, pos, seq, table, kMaxBlocks, want}, cache, logits);
    EXPECT_TRUE(st.ok()) << st.message();
    return logits;
  };
  pass({{0, {0, 40}}, {1, {0, 30}}});
  const std::vector<float> together = pass({{1, {30, 1}}, {0, {40, 40}}});
  EXPECT_TRUE(std::equal(b_last.begin(), b_last.end(), together.begin()));
  EXPECT_TRUE(std::equal(a_second.begin(), a_second.end(), together.begin() + long(V)));
}

// Files converted before the absorbed form (early DeepSeek-V3/R1 GGUFs) hold one attn_kv_b per
// layer, [kv_lora_rank, n_head * (nope + v)] (per head its nope-key rows, then its value rows),
// no attn_k_b / attn_v_b and no *_mla keys (key_length / value_length are a head's own). Such a
// copy of the shared file, made from its attn_k_b and attn_v_b, loads into the same mixer with the
// compressed cache and computes the same logits bit for bit, in both forms; a Q8_0 attn_kv_b
// keeps its key rows as stored for k_b_t, their values transposed for attn_k_b; without attn_kv_b
// the missing *_mla key is still named.
TEST(LatentAttention, OlderLayoutWithAttnKvBLoadsAndComputesTheSame) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path(kModel).string());
  ASSERT_TRUE(src.ok()) << src.message();
  auto model = load_shared();
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  const int64_t H = c.n_head, lora = c.mla.kv_lora_rank, nope = c.mla.nope_dim,
                vd = c.mla.v_head_dim;
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> put;
  std::vector<std::string> drop = {"deepseek2.attention.key_length_mla",
                                   "deepseek2.attention.value_length_mla"};
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const GgufTensorInfo* kb = src->find_tensor(p + "attn_k_b.weight");
    const GgufTensorInfo* vb = src->find_tensor(p + "attn_v_b.weight");
    ASSERT_TRUE(kb && vb && kb->ggml_type() == GgmlType::F32 && vb->ggml_type() == GgmlType::F32);
    const auto* k = reinterpret_cast<const float*>(kb->data);  // [H][lora][nope]
    const auto* v = reinterpret_cast<const float*>(vb->data);  // [H][vd][lora]
    std::vector<float> kv;                                     // [H][nope + vd][lora]
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t n = 0; n < nope; ++n)
        for (int64_t l = 0; l < lora; ++l) kv.push_back(k[(h * lora + l) * nope + n]);
      kv.insert(kv.end(), v + h * vd * lora, v + (h + 1) * vd * lora);
    }
    put[p + "attn_kv_b.weight"] = {{lora, H * (nope + vd)}, kv};
    drop.push_back(p + "attn_k_b.weight");
    drop.push_back(p + "attn_v_b.weight");
  }
  const std::vector<uint8_t> bytes = rewrite(*src, put, drop,
                                             {{"deepseek2.attention.key_length", c.mla.key_dim()},
                                              {"deepseek2.attention.value_length", vd}});
  auto old = load_bytes(bytes);
  ASSERT_TRUE(old.ok()) << old.message();
  const ModelConfig& oc = (*old)->config();
  EXPECT_EQ(oc.mla.nope_dim, nope);
  EXPECT_EQ(oc.mla.v_head_dim, vd);
  EXPECT_EQ(oc.head_dim, c.head_dim);
  EXPECT_NEAR(oc.mla.scale, c.mla.scale, 0.0f);
  const std::vector<int32_t> tokens = some_tokens(150);
  for (int32_t expanded : {0, 1}) {
    SCOPED_TRACE(expanded ? "expanded" : "absorbed");
    EXPECT_EQ(run_sequence(*old, KvType::kF16, expanded, {140}, tokens),
              run_sequence(model, KvType::kF16, expanded, {140}, tokens));
  }
  // A tensor-parallel rank of the older file keeps its heads' rows of each split matrix: those of
  // the whole newer-layout model (row-major, so that the rows are where the comparison looks).
  ModelLoadOptions o;
  o.repack_weights = false;
  auto whole = Model::load(test::shared_path(kModel).string(), o);
  ASSERT_TRUE(whole.ok()) << whole.message();
  o.shard = {1, 2};
  auto old_gguf = GgufFile::from_bytes(bytes);
  ASSERT_TRUE(old_gguf.ok()) << old_gguf.message();
  auto rank = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*old_gguf)), o);
  ASSERT_TRUE(rank.ok()) << rank.message();
  const auto same_rows = [](const WeightMatrix& mine, const WeightMatrix& all, int64_t first) {
    const auto* a = static_cast<const float*>(mine.data);
    const auto* b = static_cast<const float*>(all.data) + first * all.n_cols;
    return mine.type == GgmlType::F32 && all.type == GgmlType::F32 && mine.n_cols == all.n_cols &&
           std::equal(a, a + mine.n_rows * mine.n_cols, b);
  };
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const LatentAttentionWeights& m = (*rank)->weights().layers[size_t(i)].mla;
    const LatentAttentionWeights& w = (*whole)->weights().layers[size_t(i)].mla;
    EXPECT_EQ(m.k_b.n_rows, 2 * lora);
    EXPECT_TRUE(same_rows(m.k_b, w.k_b, 2 * lora)) << "layer " << i;
    EXPECT_TRUE(same_rows(m.k_b_t, w.k_b_t, 2 * nope)) << "layer " << i;
    EXPECT_TRUE(same_rows(m.v_b, w.v_b, 2 * vd)) << "layer " << i;
  }
  // A quantized attn_kv_b: k_b_t keeps its key rows as stored, attn_k_b is their values transposed.
  // (Row-major, so that the rows are where the comparison looks.)
  auto q8_gguf = GgufFile::from_bytes(rewrite(*src, put, drop,
                                              {{"deepseek2.attention.key_length", c.mla.key_dim()},
                                               {"deepseek2.attention.value_length", vd}},
                                              GgmlType::Q8_0));
  ASSERT_TRUE(q8_gguf.ok()) << q8_gguf.message();
  ModelLoadOptions row_major;
  row_major.repack_weights = false;
  auto q8 = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*q8_gguf)), row_major);
  ASSERT_TRUE(q8.ok()) << q8.message();
  const auto* kv_q8 = (*q8)->gguf().find_tensor("blk.1.attn_kv_b.weight");
  ASSERT_TRUE(kv_q8 != nullptr && kv_q8->ggml_type() == GgmlType::Q8_0);
  const LatentAttentionWeights& qm = (*q8)->weights().layers[1].mla;
  ASSERT_EQ(qm.k_b_t.type, GgmlType::Q8_0);
  ASSERT_EQ(qm.k_b.type, GgmlType::F32);
  const int64_t row_q = lora / 32 * 34;
  std::vector<float> key_row(static_cast<size_t>(lora));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t n : {int64_t(0), nope - 1}) {
      // k_b_t's row h * nope + n is attn_kv_b's row h * (nope + vd) + n.
      const uint8_t* stored = kv_q8->data + (h * (nope + vd) + n) * row_q;
      ASSERT_EQ(0, std::memcmp(static_cast<const uint8_t*>(qm.k_b_t.data) + (h * nope + n) * row_q,
                               stored, size_t(row_q)));
      dequantize_row(GgmlType::Q8_0, stored, key_row.data(), lora);
      const auto* k_b = static_cast<const float*>(qm.k_b.data);  // [H][lora][nope]
      for (int64_t l = 0; l < lora; ++l)
        ASSERT_EQ(k_b[(h * lora + l) * nope + n], key_row[size_t(l)]) << h << " " << n << " " << l;
    }
  // Without attn_kv_b the file is the newer layout missing its keys.
  std::vector<std::string> no_kv_b = {"deepseek2.attention.key_length_mla"};
  auto missing = load_bytes(rewrite(*src, {}, no_kv_b, {}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing metadata 'deepseek2.attention.key_length_mla'"),
            std::string::npos)
      << missing.message();
}

}  // namespace
}  // namespace vela

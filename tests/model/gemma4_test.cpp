// Gemma 4's per-layer geometry and KV sharing as loaded from the shared tiny files: each layer's
// KV heads, head size, rotated dimensions and FFN width, which layers keep K/V, and the cache
// holding rows for those layers only.
#include <gtest/gtest.h>

#include <algorithm>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/model_config.h"
#include "support/shared_data.h"

namespace vela {
namespace {

Result<ModelConfig> load_config(const std::string& name) {
  auto g = GgufFile::open(test::shared_path("models/" + name).string());
  if (!g) return g.error();
  return ModelConfig::from_gguf(*g);
}

TEST(Gemma4, PerLayerGeometryAndSharedKv) {
  VELA_REQUIRE_SHARED();
  auto c = load_config("tiny-gemma4-F32.gguf");
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_EQ(c->n_layer, 4);
  const int32_t kv_heads[] = {2, 1, 2, 1}, head_dim[] = {32, 64, 32, 64},
                n_ff[] = {192, 192, 384, 384};
  const int32_t kv_index[] = {0, 1, -1, -1}, kv_source[] = {0, 1, 0, 1};
  for (int32_t i = 0; i < 4; ++i) {
    const LayerConfig& l = c->layers[size_t(i)];
    EXPECT_EQ(l.n_head_kv, kv_heads[i]) << i;
    EXPECT_EQ(l.head_dim, head_dim[i]) << i;
    EXPECT_EQ(l.n_rot, head_dim[i]) << i;
    EXPECT_EQ(l.n_ff, n_ff[i]) << i;
    EXPECT_EQ(l.kv_index, kv_index[i]) << i;
    EXPECT_EQ(l.kv_source, kv_source[i]) << i;
    EXPECT_EQ(l.sliding_window, i % 2 == 0 ? 8 : 0) << i;
  }
  EXPECT_EQ(c->n_kv_layers, 2);
  EXPECT_EQ(c->n_shared_kv_layers, 2);
  EXPECT_EQ(c->n_embd_per_layer, 64);
  EXPECT_EQ(c->attn_scale, 1.0f);
  EXPECT_EQ(c->n_rot_local, 32);
  // The loaded model's config (the one its passes run with) keeps every layer's geometry.
  auto model = Model::load(test::shared_path("models/tiny-gemma4-F32.gguf").string());
  ASSERT_TRUE(model.ok()) << model.message();
  for (int32_t i = 0; i < 4; ++i) {
    const LayerConfig& l = (*model)->config().layers[size_t(i)];
    EXPECT_EQ(l.n_head_kv, kv_heads[i]) << i;
    EXPECT_EQ(l.n_ff, n_ff[i]) << i;
  }
}

// A copy of the dense file with `key` replaced by an array of `values` (or dropped, when empty)
// and the tensors named in drop left out.
std::vector<uint8_t> rewritten(const GgufFile& src, const std::string& key,
                               const std::vector<int32_t>& values,
                               const std::vector<std::string>& drop = {}) {
  GgufWriter w;
  for (const auto& [k, v] : src.metadata())
    if (k != key) w.add_value(k, v);
  if (!values.empty()) w.add_i32s(key, values);
  for (const GgufTensorInfo& t : src.tensors()) {
    if (std::find(drop.begin(), drop.end(), std::string(t.name)) != drop.end()) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.ggml_type(), ne, {t.data, t.data + t.n_bytes}).ok());
  }
  return w.to_bytes();
}

std::string load_error(const std::vector<uint8_t>& bytes) {
  auto g = GgufFile::from_bytes(bytes);
  if (!g) return g.message();
  auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
  return m.ok() ? std::string() : m.message();
}

TEST(Gemma4, MalformedFilesAreClearErrors) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/tiny-gemma4-F32.gguf").string());
  ASSERT_TRUE(src.ok()) << src.message();
  const auto has = [](const std::string& e, const std::string& what) {
    return e.find(what) != std::string::npos;
  };
  std::string e = load_error(rewritten(*src, "gemma4.attention.head_count_kv", {2, 1, 2}));
  EXPECT_TRUE(has(e, "'gemma4.attention.head_count_kv' has 3 entries for 4 layers")) << e;
  e = load_error(rewritten(*src, "gemma4.feed_forward_length", {192, 192, 384, -1}));
  EXPECT_TRUE(has(e, "'gemma4.feed_forward_length' has entry -1 out of range")) << e;
  e = load_error(rewritten(*src, "gemma4.attention.head_count_kv", {4, 3, 4, 1}));
  EXPECT_TRUE(has(e, "not a multiple of layer 1's head_count_kv 3")) << e;
  e = load_error(
      rewritten(*src, "gemma4.attention.head_count_kv", {2, 1, 2, 1}, {"blk.1.attn_k.weight"}));
  EXPECT_TRUE(has(e, "blk.1.attn_k.weight")) << e;
  e = load_error(rewritten(*src, "gemma4.attention.head_count_kv", {2, 1, 2, 1},
                           {"per_layer_proj_norm.weight"}));
  EXPECT_TRUE(has(e, "per_layer_proj_norm.weight")) << e;
  // Without shared_kv_layers every layer keeps its own K/V, which layers 2 and 3 do not have.
  e = load_error(rewritten(*src, "gemma4.attention.shared_kv_layers", {}));
  EXPECT_TRUE(has(e, "blk.2.attn_k.weight")) << e;
}

TEST(Gemma4, CacheHoldsNoRowsForSharedLayers) {
  VELA_REQUIRE_SHARED();
  auto c = load_config("tiny-gemma4-F32.gguf");
  ASSERT_TRUE(c.ok()) << c.message();
  // Grouped by window: one sliding group and one global group of one layer each (layers 2 and 3
  // read layers 0 and 1's rows).
  const KvCacheConfig grouped = model_cache_config(*c, 16, 4, KvType::kF16, 0, true);
  EXPECT_EQ(grouped.n_layer, 2);
  EXPECT_EQ(grouped.group_windows, (std::vector<int32_t>{8, 0}));
  EXPECT_EQ(grouped.layer_group, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(KvCache::bytes_per_block(grouped), size_t(2 * 16 * 128));
  const KvLayerGroups groups = kv_layer_groups(*c, true);
  EXPECT_EQ(groups.group, (std::vector<int32_t>{0, 1, -1, -1}));
  // One group: the two layers with K/V.
  const KvCacheConfig flat = model_cache_config(*c, 16, 4, KvType::kF16);
  EXPECT_EQ(flat.n_layer, 2);
  // Rows of 2 heads of 32 (sliding) and 1 head of 64 (full): both 64 f16 values, no padding.
  EXPECT_EQ(flat.n_head_kv, 2);
  EXPECT_EQ(flat.head_dim, 32);
  EXPECT_EQ(flat.layer_shapes, (std::vector<KvRowShape>{{2, 32}, {1, 64}}));
  EXPECT_EQ(flat.row_bytes(0), 128u);
  EXPECT_EQ(flat.row_bytes(1), 128u);
  // K and V of 2 layers, 16 positions a block.
  EXPECT_EQ(KvCache::bytes_per_block(flat), size_t(2 * 2 * 16 * 128));
}

TEST(Gemma4, MoeFileGeometry) {
  VELA_REQUIRE_SHARED();
  auto c = load_config("tiny-gemma4moe-F32.gguf");
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_EQ(c->n_layer, 3);
  EXPECT_EQ(c->n_kv_layers, 3);
  EXPECT_EQ(c->n_embd_per_layer, 0);
  EXPECT_EQ(c->n_expert, 4);
  for (const LayerConfig& l : c->layers) EXPECT_TRUE(l.moe);
  auto model = Model::load(test::shared_path("models/tiny-gemma4moe-F32.gguf").string());
  ASSERT_TRUE(model.ok()) << model.message();
  // The full layer has no attn_v: V is its K.
  EXPECT_EQ((*model)->weights().layers[1].wv.data, nullptr);
  EXPECT_NE((*model)->weights().layers[0].wv.data, nullptr);
  EXPECT_EQ((*model)->weights().layers[1].experts.size(), 4u);
  EXPECT_EQ((*model)->weights().layers[1].expert_down_scale.size(), 4u);
}

}  // namespace
}  // namespace vela

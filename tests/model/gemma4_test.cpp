// Gemma 4's per-layer geometry and KV sharing as loaded from the shared tiny files: each layer's
// KV heads, head size, rotated dimensions and FFN width, which layers keep K/V, and the cache
// holding rows for those layers only.
#include <gtest/gtest.h>

#include "io/gguf.h"
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
}

TEST(Gemma4, CacheHoldsNoRowsForSharedLayers) {
  VELA_REQUIRE_SHARED();
  auto c = load_config("tiny-gemma4-F32.gguf");
  ASSERT_TRUE(c.ok()) << c.message();
  // Grouped by window: one sliding group and one global group of one layer each (layers 2 and 3
  // read layers 0 and 1's rows).
  const KvCacheConfig grouped = model_cache_config(*c, 16, 4, KvType::kF16, 0, true);
  EXPECT_EQ(grouped.n_layer, 1);
  EXPECT_EQ(grouped.group_windows, (std::vector<int32_t>{8, 0}));
  const KvLayerGroups groups = kv_layer_groups(*c, true);
  EXPECT_EQ(groups.group, (std::vector<int32_t>{0, 1, -1, -1}));
  // One group: the two layers with K/V.
  const KvCacheConfig flat = model_cache_config(*c, 16, 4, KvType::kF16);
  EXPECT_EQ(flat.n_layer, 2);
  // Rows of 2 heads of 32 (sliding) and 1 head of 64 (full): both 64 f16 values, no padding.
  EXPECT_EQ(flat.n_head_kv, 2);
  EXPECT_EQ(flat.head_dim, 32);
  EXPECT_EQ(flat.row_shapes, (std::vector<KvRowShape>{{1, 64}}));
  EXPECT_EQ(flat.row_bytes(), 128u);
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

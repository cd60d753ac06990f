// gpt-oss (../shared's tiny-openai-moe): what the description and the file's keys make of the
// model, the tensors a layer holds, and clear errors for files without the family's sinks and
// biases. Its logits against the reference engine: reference_logits_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/rope.h"
#include "model_rewrite.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr const char* kModel = "models/tiny-openai-moe-F32.gguf";

Result<std::shared_ptr<const Model>> load_bytes(const std::vector<uint8_t>& bytes) {
  auto g = GgufFile::from_bytes(bytes);
  if (!g) return g.error();
  return Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
}

TEST(GptOss, ConfigAndTensorsOfTheSharedFile) {
  VELA_REQUIRE_SHARED();
  auto m = Model::load(test::shared_path(kModel).string());
  ASSERT_TRUE(m.ok()) << m.message();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.arch_name, "gpt-oss");
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  // S F S: even layers windowed.
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_EQ(c.layers[0].sliding_window, 8);
  EXPECT_EQ(c.layers[1].sliding_window, 0);
  EXPECT_EQ(c.layers[2].sliding_window, 8);
  EXPECT_EQ(c.expert_gating, ExpertGating::kSoftmaxOfChosen);
  EXPECT_FALSE(c.renormalize_experts);
  EXPECT_EQ(c.arch->activation, FfnActivation::kSwigluClamped);
  // YaRN factor 4: q and k each scaled by 1 + 0.1 ln 4 through RoPE's cos/sin, the scores'
  // scale staying 1/sqrt(head_dim).
  EXPECT_EQ(c.rope.scaling, RopeScaling::kYarn);
  EXPECT_FLOAT_EQ(rope_frequencies(c.rope, c.n_rot, {}).mscale, 1.0f + 0.1f * std::log(4.0f));
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 8.0f);
  for (const LayerWeights& l : (*m)->weights().layers) {
    EXPECT_EQ(l.attn_sinks.size(), 4u);
    EXPECT_EQ(l.bo.size(), 128u);
    EXPECT_EQ(l.bq.size(), 256u);
    EXPECT_EQ(l.router_bias.size(), 8u);
    EXPECT_EQ(l.expert_gate_bias.size(), 8u * 64u);
    EXPECT_EQ(l.expert_up_bias.size(), 8u * 64u);
    EXPECT_EQ(l.expert_down_bias.size(), 8u * 128u);
  }
}

TEST(GptOss, ClearErrorsForMissingSinksAndBiases) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path(kModel).string());
  ASSERT_TRUE(src.ok()) << src.message();
  for (const char* t :
       {"blk.0.attn_sinks.weight", "blk.1.attn_output.bias", "blk.2.attn_q.bias",
        "blk.0.ffn_gate_inp.bias", "blk.1.ffn_gate_exps.bias", "blk.2.ffn_up_exps.bias",
        "blk.0.ffn_down_exps.bias", "blk.1.post_attention_norm.weight"}) {
    auto m = load_bytes(test::rewrite_model(*src, {}, {t}));
    ASSERT_FALSE(m.ok()) << t;
    EXPECT_NE(m.message().find(std::string("missing tensor '") + t + "'"), std::string::npos)
        << m.message();
  }
  // Metadata that disagrees with the tensors: a shape error naming the first one read.
  auto m = load_bytes(test::rewrite_model(*src, {{"gpt-oss.attention.head_count", 8}}));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("tensor 'blk.0.attn_q.weight' has shape"), std::string::npos)
      << m.message();
}

}  // namespace
}  // namespace vela

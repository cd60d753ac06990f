// Which type each tensor gets: the names users type, the common quantizer's output / K-mix /
// fallback rules, and (with ../shared) exactly the per-tensor types of a Q4_K_M, Q4_0, Q6_K and
// Q8_0 file made by the common quantizer.
#include <gtest/gtest.h>

#include "io/gguf.h"
#include "support/shared_data.h"
#include "tools_support/quant_recipe.h"

namespace vela {
namespace {

QuantTarget target(const char* name) {
  auto t = parse_quant_target(name);
  EXPECT_TRUE(t.ok()) << name;
  return t.ok() ? *t : QuantTarget{};
}

TEST(QuantRecipe, ParsesEveryTypeName) {
  for (const char* n : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K",
                        "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M", "q4_k_m"})
    EXPECT_TRUE(parse_quant_target(n).ok()) << n;
  EXPECT_EQ(target("q4_k_m").name, "Q4_K_M");
  EXPECT_EQ(target("Q4_K_M").file_type, 15u);
  EXPECT_EQ(target("Q5_K_M").file_type, 17u);
  EXPECT_EQ(target("Q4_0").file_type, 2u);
  EXPECT_EQ(target("Q8_0").file_type, 7u);
  EXPECT_EQ(target("BF16").file_type, 32u);
  const auto bad = parse_quant_target("Q3_K_XL");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("Q4_K_M"), std::string::npos);  // lists what is supported
}

TEST(QuantRecipe, LayerIndexFromName) {
  EXPECT_EQ(layer_of_tensor("blk.0.attn_v.weight"), 0);
  EXPECT_EQ(layer_of_tensor("blk.31.ffn_down.weight"), 31);
  EXPECT_EQ(layer_of_tensor("output.weight"), -1);
  EXPECT_EQ(layer_of_tensor("blk.x.attn_v.weight"), -1);
  EXPECT_EQ(layer_of_tensor("blk.3"), -1);
}

TEST(QuantRecipe, OutputEmbeddingMixAndFallbackRules) {
  const auto type = [](const char* t, const char* name, int64_t row, int32_t layer = -1,
                       int32_t n_layer = 32, bool has_output = true, int32_t dims = 2) {
    return choose_tensor_type(target(t), TensorRole{name, row, dims, layer, n_layer, has_output});
  };
  EXPECT_EQ(type("Q4_0", "blk.0.attn_norm.weight", 4096, 0, 32, true, 1), GgmlType::F32);
  EXPECT_EQ(type("Q4_0", "output.weight", 4096), GgmlType::Q6_K);
  EXPECT_EQ(type("Q8_0", "output.weight", 4096), GgmlType::Q8_0);
  EXPECT_EQ(type("F16", "output.weight", 4096), GgmlType::F16);
  EXPECT_EQ(type("Q4_0", "token_embd.weight", 4096), GgmlType::Q4_0);
  EXPECT_EQ(type("Q4_0", "token_embd.weight", 4096, -1, 32, false), GgmlType::Q6_K);  // tied
  EXPECT_EQ(type("Q4_K_M", "token_embd.weight", 4096), GgmlType::Q4_K);
  // 32 layers: layers 0-3 and 28-31 and every third in between (6, 9, ..., 27) get Q6_K.
  for (int32_t l = 0; l < 32; ++l) {
    const bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
    EXPECT_EQ(type("Q4_K_M", "blk.N.attn_v.weight", 4096, l),
              more ? GgmlType::Q6_K : GgmlType::Q4_K)
        << l;
    EXPECT_EQ(type("Q5_K_M", "blk.N.ffn_down.weight", 14336, l),
              more ? GgmlType::Q6_K : GgmlType::Q5_K)
        << l;
    EXPECT_EQ(type("Q4_K_M", "blk.N.attn_q.weight", 4096, l), GgmlType::Q4_K) << l;
    EXPECT_EQ(type("Q4_K", "blk.N.attn_v.weight", 4096, l), GgmlType::Q4_K) << l;  // plain: no mix
  }
  // Qwen2-0.5B's 896-wide rows do not fit 256-element K blocks: Q4_K -> Q5_0, Q6_K -> Q8_0,
  // and the tied embedding goes straight to Q8_0.
  EXPECT_EQ(type("Q4_K_M", "blk.5.attn_q.weight", 896, 5, 24), GgmlType::Q5_0);
  EXPECT_EQ(type("Q5_K_M", "blk.5.attn_q.weight", 896, 5, 24), GgmlType::Q5_1);
  EXPECT_EQ(type("Q4_K_M", "blk.0.attn_v.weight", 896, 0, 24), GgmlType::Q8_0);
  EXPECT_EQ(type("Q4_K_M", "blk.0.ffn_down.weight", 4864, 0, 24), GgmlType::Q6_K);
  EXPECT_EQ(type("Q4_K_M", "token_embd.weight", 896, -1, 24, false), GgmlType::Q8_0);
  EXPECT_EQ(type("Q4_0", "blk.0.attn_q.weight", 100, 0, 2), GgmlType::F16);  // fits no block
  // Pure: no output / mix rules.
  EXPECT_EQ(choose_tensor_type(target("Q4_0"), {"output.weight", 4096, 2, -1, 32, true}, true),
            GgmlType::Q4_0);
  EXPECT_EQ(
      choose_tensor_type(target("Q4_K_M"), {"blk.0.attn_v.weight", 4096, 2, 0, 32, true}, true),
      GgmlType::Q4_K);
}

// MoE blocks: routers stay F32 whatever the target (pure too); 3-D expert tensors follow the
// matrix rules by their row length, ffn_down_exps like ffn_down in the K mixes.
TEST(QuantRecipe, ExpertTensors) {
  const auto type = [](const char* t, const char* name, int64_t row, int32_t layer,
                       int32_t dims = 3, bool pure = false) {
    return choose_tensor_type(target(t), TensorRole{name, row, dims, layer, 16, true}, pure);
  };
  for (const char* t : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M"}) {
    EXPECT_EQ(type(t, "blk.0.ffn_gate_inp.weight", 2048, 0, 2), GgmlType::F32) << t;
    EXPECT_EQ(type(t, "blk.0.ffn_gate_inp.weight", 2048, 0, 2, true), GgmlType::F32) << t;
  }
  EXPECT_EQ(type("Q4_0", "blk.3.ffn_up_exps.weight", 2048, 3), GgmlType::Q4_0);
  EXPECT_EQ(type("F16", "blk.3.ffn_down_exps.weight", 1024, 3), GgmlType::F16);
  // 16 layers: 0-1 and 14-15 and every third in between (4, 7, 10, 13) get Q6_K.
  for (int32_t l = 0; l < 16; ++l) {
    const bool more = l < 2 || l >= 14 || (l - 2) % 3 == 2;
    EXPECT_EQ(type("Q4_K_M", "blk.N.ffn_down_exps.weight", 1024, l),
              more ? GgmlType::Q6_K : GgmlType::Q4_K)
        << l;
    EXPECT_EQ(type("Q4_K_M", "blk.N.ffn_gate_exps.weight", 2048, l), GgmlType::Q4_K) << l;
  }
  EXPECT_EQ(type("Q4_K_M", "blk.0.ffn_down_exps.weight", 1000, 0), GgmlType::F16);  // no fit
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.ffn_down_exps.weight", 1024, 0), GgmlType::MXFP4);
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.attn_q.weight", 1024, 0, 2), GgmlType::Q8_0);
}

// A Gated DeltaNet's 1-D tensors and convolution taps stay F32 in every target (engines read the
// taps as floats); its projections follow the target like any matrix.
TEST(QuantRecipe, DeltaNetTensors) {
  const auto type = [](const char* t, const char* name, int64_t row, int32_t dims,
                       bool pure = false) {
    return choose_tensor_type(target(t), TensorRole{name, row, dims, 0, 24, false}, pure);
  };
  for (const char* t : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M"}) {
    for (bool pure : {false, true}) {
      EXPECT_EQ(type(t, "blk.0.ssm_conv1d.weight", 4, 2, pure), GgmlType::F32) << t;
      EXPECT_EQ(type(t, "blk.0.ssm_a", 32, 1, pure), GgmlType::F32) << t;
      EXPECT_EQ(type(t, "blk.0.ssm_dt.bias", 32, 1, pure), GgmlType::F32) << t;
      EXPECT_EQ(type(t, "blk.0.ffn_gate_inp_shexp.weight", 1024, 1, pure), GgmlType::F32) << t;
    }
  }
  EXPECT_EQ(type("Q8_0", "blk.0.attn_qkv.weight", 1024, 2), GgmlType::Q8_0);
  EXPECT_EQ(type("Q4_0", "blk.0.ssm_alpha.weight", 1024, 2), GgmlType::Q4_0);
  EXPECT_EQ(type("Q4_K_M", "blk.0.ssm_out.weight", 128, 2), GgmlType::Q5_0);  // Q4_K's fallback
}

TEST(QuantRecipe, SameTypesAsTheCommonQuantizer) {
  VELA_REQUIRE_SHARED();
  for (const char* variant : {"Q4_K_M", "Q4_0", "Q6_K", "Q8_0"}) {
    auto g = GgufFile::open(
        test::shared_path(std::string("models/tiny-llama-256-") + variant + ".gguf").string());
    ASSERT_TRUE(g.ok()) << g.message();
    const QuantTarget t = target(variant);
    EXPECT_EQ(g->get_uint("general.file_type")->value_or(999), t.file_type) << variant;
    for (const GgufTensorInfo& info : g->tensors()) {
      const TensorRole role{info.name, info.ne[0], int32_t(info.n_dims), layer_of_tensor(info.name),
                            4,         true};
      EXPECT_EQ(uint32_t(choose_tensor_type(t, role)), info.type) << variant << " " << info.name;
    }
  }
}

}  // namespace
}  // namespace vela

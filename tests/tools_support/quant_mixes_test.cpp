// The common quantizer's file types ("mixes"): every name and file-type number; on the shared
// files, the type of every tensor of tiny-llama-256 in each mix the common quantizer made of it
// (with and without an importance matrix) and of tiny-openai-moe in MXFP4_MOE; on made-up model
// shapes, the rules those files do not reach (grouped-query and expert counts, layer positions,
// tied embeddings, the 70B V rule, fallbacks when rows are not whole blocks, the quantizer's
// tensor order); and which tensors need an importance matrix.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "support/shared_data.h"
#include "tools_support/quant_mixes.h"

namespace vela {
namespace {

using T = GgmlType;

QuantTarget target(const std::string& name) {
  auto t = parse_quant_target(name);
  EXPECT_TRUE(t.ok()) << name;
  return t.ok() ? *t : QuantTarget{};
}

TEST(QuantMixes, NamesAndFileTypes) {
  const std::map<std::string, uint32_t> expected = {
      {"F32", 0},      {"F16", 1},      {"Q4_0", 2},       {"Q4_1", 3},    {"Q8_0", 7},
      {"Q5_0", 8},     {"Q5_1", 9},     {"Q2_K", 10},      {"Q3_K_S", 11}, {"Q3_K_M", 12},
      {"Q3_K_L", 13},  {"Q4_K_S", 14},  {"Q4_K_M", 15},    {"Q5_K_S", 16}, {"Q5_K_M", 17},
      {"Q6_K", 18},    {"IQ2_XXS", 19}, {"IQ2_XS", 20},    {"Q2_K_S", 21}, {"IQ3_XS", 22},
      {"IQ3_XXS", 23}, {"IQ1_S", 24},   {"IQ4_NL", 25},    {"IQ3_S", 26},  {"IQ3_M", 27},
      {"IQ2_S", 28},   {"IQ2_M", 29},   {"IQ4_XS", 30},    {"IQ1_M", 31},  {"BF16", 32},
      {"TQ1_0", 36},   {"TQ2_0", 37},   {"MXFP4_MOE", 38}, {"Q4_K", 14},   {"Q5_K", 16}};
  EXPECT_EQ(quant_mixes().size(), expected.size());
  for (const auto& [name, ft] : expected) {
    EXPECT_EQ(target(name).file_type, ft) << name;
    EXPECT_NE(quant_target_names().find(name), std::string::npos) << name;
  }
  EXPECT_EQ(target("iq2_m").name, "IQ2_M");
  EXPECT_EQ(target("IQ2_M").base, T::IQ2_S);   // the common quantizer's default for IQ2_M
  EXPECT_EQ(target("IQ2_S").base, T::IQ2_XS);  // ... and for IQ2_S
  EXPECT_EQ(target("IQ3_XS").base, T::IQ3_S);
  EXPECT_EQ(target("MXFP4_MOE").base, T::MXFP4);
  EXPECT_TRUE(target("Q3_K_M").k_mix);
  EXPECT_TRUE(target("IQ2_S").k_mix);
  EXPECT_FALSE(target("Q2_K").k_mix);  // also a tensor type
  EXPECT_FALSE(target("IQ4_NL").k_mix);
  EXPECT_TRUE(target("Q4_K").plain);
  EXPECT_FALSE(target("Q4_K_S").plain);
  EXPECT_FALSE(parse_quant_target("Q3_K_XL").ok());
}

struct ModelTensors {
  std::vector<MixTensor> tensors;
  MixModel model;
};

ModelTensors tensors_of(const GgufFile& g) {
  ModelTensors m;
  m.model = mix_model_of(g);
  for (const GgufTensorInfo& t : g.tensors()) {
    MixTensor x;
    x.name = t.name;
    for (int i = 0; i < 4; ++i) x.ne[i] = t.ne[i];
    x.n_dims = int32_t(t.n_dims);
    x.type = t.ggml_type();
    m.tensors.push_back(x);
  }
  return m;
}

// Every tensor of `quantized` has the type the mix gives the same tensor of `f32`, and the file
// type is the mix's; the quantizer's importance-matrix use is read from its metadata.
void expect_same_types(const std::string& f32_name, const std::string& quantized_name,
                       const std::string& mix) {
  auto f32 = GgufFile::open(test::shared_path("models/" + f32_name).string());
  auto q = GgufFile::open(test::shared_path("models/" + quantized_name).string());
  ASSERT_TRUE(f32.ok() && q.ok()) << quantized_name;
  ModelTensors m = tensors_of(*f32);
  m.model.has_imatrix = q->find("quantize.imatrix.file") != nullptr;
  const QuantTarget t = target(mix);
  EXPECT_EQ(q->get_uint("general.file_type")->value_or(999), t.file_type) << mix;
  auto types = plan_tensor_types(t, m.model, m.tensors, false);
  ASSERT_TRUE(types.ok()) << types.message();
  ASSERT_EQ(q->tensors().size(), m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const GgufTensorInfo* theirs = q->find_tensor(m.tensors[i].name);
    ASSERT_NE(theirs, nullptr) << m.tensors[i].name;
    EXPECT_EQ(ggml_type_name(uint32_t((*types)[i])), ggml_type_name(theirs->type))
        << mix << " " << m.tensors[i].name;
  }
}

TEST(QuantMixes, SameTypesAsTheCommonQuantizersFiles) {
  VELA_REQUIRE_SHARED();
  for (const char* mix :
       {"Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S", "IQ2_XXS", "IQ2_XS",
        "IQ2_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0", "Q4_K_M", "Q4_0", "Q6_K", "Q8_0"})
    expect_same_types("tiny-llama-256-F32.gguf", std::string("tiny-llama-256-") + mix + ".gguf",
                      mix);
  // gpt-oss: stacked experts MXFP4, every other matrix (output and embedding too) Q8_0; routers,
  // biases (2-D for the experts) and attention sinks keep F32.
  expect_same_types("tiny-openai-moe-F32.gguf", "tiny-openai-moe-MXFP4_MOE.gguf", "MXFP4_MOE");
}

// A model shape made up of names and row lengths: `n_layer` blocks of attention and FFN, each
// tensor `width` wide (ffn_down `ffn` wide), plus embedding and (unless tied) output.
struct Synthetic {
  std::vector<std::string> names;
  std::vector<MixTensor> tensors;
  MixModel model;

  Synthetic(int32_t n_layer, int32_t n_head, int32_t n_head_kv, int64_t width, int64_t ffn,
            bool tied = false, int32_t n_expert = 0) {
    model.arch = "llama";
    model.n_layer = n_layer;
    model.n_head = n_head;
    model.n_head_kv = n_head_kv;
    model.n_expert = n_expert;
    add("token_embd.weight", width, 1000);
    for (int32_t l = 0; l < n_layer; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      add(b + "attn_norm.weight", width, 1, 1);
      for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"})
        add(b + n + ".weight", width, width);
      const std::string suffix = n_expert > 0 ? "_exps.weight" : ".weight";
      const int64_t e = std::max(n_expert, 1);
      if (n_expert > 0) add(b + "ffn_gate_inp.weight", width, n_expert);
      add(b + "ffn_gate" + suffix, width, ffn, 2, e);
      add(b + "ffn_up" + suffix, width, ffn, 2, e);
      add(b + "ffn_down" + suffix, ffn, width, 2, e);
    }
    if (!tied) add("output.weight", width, 1000);
    for (size_t i = 0; i < names.size(); ++i) tensors[i].name = names[i];
  }
  void add(const std::string& name, int64_t ne0, int64_t ne1, int32_t n_dims = 2, int64_t ne2 = 1) {
    names.push_back(name);
    MixTensor t;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2;
    t.n_dims = ne2 > 1 ? 3 : n_dims;
    tensors.push_back(t);
  }
  std::map<std::string, T> plan(const std::string& mix, bool imatrix = false) {
    model.has_imatrix = imatrix;
    auto types = plan_tensor_types(target(mix), model, tensors, false);
    EXPECT_TRUE(types.ok()) << types.message();
    std::map<std::string, T> out;
    for (size_t i = 0; types.ok() && i < names.size(); ++i) out[names[i]] = (*types)[i];
    return out;
  }
};

std::string blk(int32_t l, const char* n) {
  return "blk." + std::to_string(l) + "." + n + ".weight";
}

TEST(QuantMixes, LayerPositionAndShapeRules) {
  // 32 layers, no grouped-query attention (gqa 1), 4096 wide.
  Synthetic dense(32, 32, 32, 4096, 11008);
  auto q3m = dense.plan("Q3_K_M");
  for (int32_t l = 0; l < 32; ++l) {
    EXPECT_EQ(q3m[blk(l, "attn_v")], l < 2 ? T::Q5_K : T::Q4_K) << l;
    EXPECT_EQ(q3m[blk(l, "ffn_down")], l < 2 ? T::Q5_K : T::Q4_K) << l;  // first 1/16 Q5_K
    EXPECT_EQ(q3m[blk(l, "attn_output")], T::Q4_K);
    EXPECT_EQ(q3m[blk(l, "ffn_up")], T::Q3_K);
  }
  auto q2k = dense.plan("Q2_K");
  EXPECT_EQ(q2k[blk(5, "attn_v")], T::Q3_K);  // gqa < 4
  EXPECT_EQ(q2k[blk(5, "ffn_down")], T::Q3_K);
  EXPECT_EQ(q2k["output.weight"], T::Q6_K);
  auto q2ks = dense.plan("Q2_K_S");
  for (int32_t l = 0; l < 32; ++l)
    EXPECT_EQ(q2ks[blk(l, "ffn_down")], l < 4 ? T::Q4_K : T::Q2_K) << l;
  auto q4ks = dense.plan("Q4_K_S");
  for (int32_t l = 0; l < 32; ++l) {
    EXPECT_EQ(q4ks[blk(l, "attn_v")], l < 4 ? T::Q5_K : T::Q4_K) << l;
    EXPECT_EQ(q4ks[blk(l, "ffn_down")], l < 4 ? T::Q5_K : T::Q4_K) << l;
  }
  auto iq3xs = dense.plan("IQ3_XS", true);
  for (int32_t l = 0; l < 32; ++l) {
    const bool middle = l >= 4 && l < 28;
    EXPECT_EQ(iq3xs[blk(l, "ffn_gate")], middle ? T::IQ3_XXS : T::IQ3_S) << l;
    EXPECT_EQ(iq3xs[blk(l, "ffn_up")], middle ? T::IQ3_XXS : T::IQ3_S) << l;
    EXPECT_EQ(iq3xs[blk(l, "attn_q")], T::IQ3_XXS);
    EXPECT_EQ(iq3xs[blk(l, "attn_v")], T::IQ3_S);  // gqa < 4
  }
  // The low IQ mixes: V gets Q2_K (IQ3_S for IQ2_S / IQ2_M) below a gqa of 4, the first eighth
  // of ffn_down too; the embedding Q2_K / IQ3_S, the output Q5_K.
  auto iq2xxs = dense.plan("IQ2_XXS", true);
  auto iq2m = dense.plan("IQ2_M", true);
  for (int32_t l = 0; l < 32; ++l) {
    EXPECT_EQ(iq2xxs[blk(l, "attn_v")], T::Q2_K);
    EXPECT_EQ(iq2xxs[blk(l, "ffn_down")], l < 4 ? T::Q2_K : T::IQ2_XXS) << l;
    EXPECT_EQ(iq2m[blk(l, "ffn_down")], l < 4 ? T::IQ3_S : T::IQ2_S) << l;
    EXPECT_EQ(iq2m[blk(l, "attn_output")], T::IQ3_S);
  }
  EXPECT_EQ(iq2xxs["token_embd.weight"], T::Q2_K);
  EXPECT_EQ(iq2m["token_embd.weight"], T::IQ3_S);
  EXPECT_EQ(iq2xxs["output.weight"], T::Q5_K);
  // Without an importance matrix IQ3_XXS and IQ4_NL step up on V and ffn_down.
  auto iq3xxs = dense.plan("IQ3_XXS", false);
  EXPECT_EQ(iq3xxs[blk(0, "attn_v")], T::IQ3_S);
  EXPECT_EQ(iq3xxs[blk(0, "ffn_down")], T::Q4_K);
  EXPECT_EQ(iq3xxs[blk(9, "ffn_down")], T::Q3_K);
  EXPECT_EQ(dense.plan("IQ3_XXS", true)[blk(9, "ffn_down")], T::IQ3_XXS);
  EXPECT_EQ(dense.plan("IQ4_NL", false)[blk(3, "ffn_down")], T::Q5_K);
  EXPECT_EQ(dense.plan("IQ4_NL", true)[blk(3, "ffn_down")], T::IQ4_NL);
  // Q4_0 / Q5_0 with an importance matrix: the first eighth of ffn_down Q4_1 / Q5_1.
  EXPECT_EQ(dense.plan("Q4_0", true)[blk(3, "ffn_down")], T::Q4_1);
  EXPECT_EQ(dense.plan("Q4_0", true)[blk(4, "ffn_down")], T::Q4_0);
  EXPECT_EQ(dense.plan("Q4_0", false)[blk(3, "ffn_down")], T::Q4_0);
  EXPECT_EQ(dense.plan("Q5_0", true)[blk(0, "ffn_down")], T::Q5_1);

  // Grouped-query attention with 4+ heads per KV head: V gets more bits.
  Synthetic gqa(32, 32, 8, 4096, 14336);
  EXPECT_EQ(gqa.plan("Q2_K")[blk(7, "attn_v")], T::Q4_K);
  EXPECT_EQ(gqa.plan("Q2_K_S")[blk(7, "attn_v")], T::Q4_K);
  EXPECT_EQ(gqa.plan("IQ3_S")[blk(7, "attn_v")], T::Q4_K);
  EXPECT_EQ(gqa.plan("IQ4_XS")[blk(7, "attn_v")], T::Q5_K);
  EXPECT_EQ(gqa.plan("IQ1_S", true)[blk(7, "attn_v")], T::Q4_K);

  // Llama 70B (80 layers, GQA): Q3_K / Q4_K V becomes Q5_K.
  Synthetic l70(80, 64, 8, 8192, 28672);
  EXPECT_EQ(l70.plan("Q3_K_S")[blk(40, "attn_v")], T::Q5_K);
  EXPECT_EQ(l70.plan("Q4_K_M")[blk(40, "attn_v")], T::Q5_K);
  EXPECT_EQ(l70.plan("Q4_K_M")[blk(0, "attn_v")], T::Q6_K);
}

TEST(QuantMixes, EightExpertRules) {
  // Mixtral-like: 8 experts, V and K Q8_0 in every K mix, attention output Q5_K, ffn_down by the
  // block index in the name.
  Synthetic moe(32, 32, 8, 4096, 14336, false, 8);
  auto q4km = moe.plan("Q4_K_M");
  for (int32_t l = 0; l < 32; ++l) {
    EXPECT_EQ(q4km[blk(l, "attn_v")], T::Q8_0);
    EXPECT_EQ(q4km[blk(l, "attn_k")], T::Q8_0);
    EXPECT_EQ(q4km[blk(l, "attn_output")], T::Q5_K);
    const bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
    EXPECT_EQ(q4km[blk(l, "ffn_down_exps")], more ? T::Q6_K : T::Q4_K) << l;
    EXPECT_EQ(q4km[blk(l, "ffn_gate_inp")], T::F32);
  }
  auto iq2xs = moe.plan("IQ2_XS", true);
  EXPECT_EQ(iq2xs[blk(3, "attn_v")], T::Q4_K);
  EXPECT_EQ(iq2xs[blk(3, "attn_k")], T::Q4_K);
  EXPECT_EQ(iq2xs[blk(3, "attn_output")], T::Q5_K);
  auto iq3m = moe.plan("IQ3_M");
  EXPECT_EQ(iq3m[blk(6, "ffn_down_exps")], T::Q4_K);  // more bits with 8 experts
  EXPECT_EQ(iq3m[blk(7, "ffn_down_exps")], T::IQ3_S);
  // MXFP4_MOE: experts MXFP4 only where stacked; everything else Q8_0.
  auto mx = moe.plan("MXFP4_MOE");
  EXPECT_EQ(mx[blk(0, "ffn_up_exps")], T::MXFP4);
  EXPECT_EQ(mx[blk(0, "attn_q")], T::Q8_0);
  EXPECT_EQ(mx["token_embd.weight"], T::Q8_0);
  EXPECT_EQ(mx["output.weight"], T::Q8_0);
}

TEST(QuantMixes, TiedEmbeddingsAndFallbacks) {
  // Qwen2-0.5B-like: 896 wide (not a multiple of 256), 4864 FFN (19 x 256), tied embedding.
  Synthetic q(24, 14, 2, 896, 4864, true);
  auto iq2xxs = q.plan("IQ2_XXS", true);
  EXPECT_EQ(iq2xxs["token_embd.weight"], T::Q8_0);    // the output rule, rows not whole blocks
  EXPECT_EQ(iq2xxs[blk(5, "attn_q")], T::IQ4_NL);     // IQ -> IQ4_NL
  EXPECT_EQ(iq2xxs[blk(5, "ffn_down")], T::IQ2_XXS);  // 4864 fits
  EXPECT_EQ(iq2xxs[blk(5, "attn_v")], T::Q5_0);       // Q4_K (gqa 7) -> Q5_0
  auto q2k = q.plan("Q2_K");
  EXPECT_EQ(q2k[blk(5, "attn_q")], T::Q4_0);       // Q2_K -> Q4_0
  EXPECT_EQ(q2k[blk(5, "attn_output")], T::Q4_0);  // Q3_K -> Q4_0
  EXPECT_EQ(q.plan("TQ1_0")[blk(5, "attn_q")], T::Q4_0);
  EXPECT_EQ(q.plan("Q5_K_S")[blk(5, "attn_q")], T::Q5_1);
  EXPECT_EQ(q.plan("IQ4_XS")[blk(5, "attn_q")], T::IQ4_NL);
  // 896 is whole blocks of IQ4_NL's 32: Q6_K by the output rule, whose 256-blocks do not fit.
  EXPECT_EQ(q.plan("IQ4_NL")["token_embd.weight"], T::Q8_0);
  // Rows of 100 fit no block: F16.
  Synthetic odd(2, 4, 4, 100, 100);
  EXPECT_EQ(odd.plan("IQ2_XXS", true)[blk(0, "attn_q")], T::F16);
  // Untied: the low IQ mixes' embedding rule.
  Synthetic untied(24, 14, 2, 1024, 4864);
  EXPECT_EQ(untied.plan("IQ1_M", true)["token_embd.weight"], T::Q2_K);
  EXPECT_EQ(untied.plan("TQ2_0")["token_embd.weight"], T::Q4_K);
  EXPECT_EQ(untied.plan("IQ1_M", true)["output.weight"], T::Q5_K);
}

// The counters follow the common quantizer's order (by block index, then name), not the file's.
TEST(QuantMixes, CountsInTheQuantizersOrder) {
  Synthetic m(12, 32, 32, 4096, 11008);
  std::vector<size_t> reversed(m.names.size());
  for (size_t i = 0; i < reversed.size(); ++i) reversed[i] = reversed.size() - 1 - i;
  Synthetic r = m;
  for (size_t i = 0; i < reversed.size(); ++i) {
    r.names[i] = m.names[reversed[i]];
    r.tensors[i] = m.tensors[reversed[i]];
    r.tensors[i].name = r.names[i];
  }
  for (const char* mix : {"Q3_K_M", "Q4_K_M", "IQ2_S", "Q4_K_S"})
    EXPECT_EQ(m.plan(mix, true), r.plan(mix, true)) << mix;
  auto q3m = r.plan("Q3_K_M");
  EXPECT_EQ(q3m[blk(0, "attn_v")], T::Q5_K);
  EXPECT_EQ(q3m[blk(1, "attn_v")], T::Q5_K);
  EXPECT_EQ(q3m[blk(11, "attn_v")], T::Q4_K);
  // blk.10 sorts after blk.9 (by index, not as text).
  Synthetic q4ks(12, 32, 32, 4096, 11008);
  auto s = q4ks.plan("Q4_K_S");
  EXPECT_EQ(s[blk(3, "attn_v")], T::Q5_K);
  EXPECT_EQ(s[blk(10, "attn_v")], T::Q4_K);
}

TEST(QuantMixes, KeptTensors) {
  Synthetic m(2, 4, 4, 256, 256);
  const auto keep = [&](const std::string& name, int32_t n_dims, T type) {
    MixTensor t;
    t.name = name;
    t.ne[0] = 256, t.ne[1] = n_dims > 1 ? 8 : 1;
    t.n_dims = n_dims;
    t.type = type;
    MixPosition p;
    auto r = mix_tensor_type(target("Q4_K_M"), m.model, t, p, false);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, type) << name;
  };
  keep("blk.0.ffn_gate_exps.bias", 2, T::F32);  // 2-D but a bias
  keep("blk.0.ssm_conv1d.weight", 2, T::F16);   // kept in its own type
  keep("blk.0.attn_q_norm.weight", 2, T::F32);
  keep("blk.0.ffn_gate_inp.weight", 2, T::F32);
  keep("per_layer_model_proj.weight", 2, T::BF16);
  keep("blk.0.attn_sinks.weight", 1, T::F32);
}

TEST(QuantMixes, ExpertBlockIndexMustParse) {
  Synthetic m(2, 4, 4, 256, 256, false, 4);
  m.add("ffn_down_exps.weight", 256, 256, 3, 4);  // no block index in an expert model
  for (size_t i = 0; i < m.names.size(); ++i) m.tensors[i].name = m.names[i];
  auto r = plan_tensor_types(target("Q4_K_M"), m.model, m.tensors, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("ffn_down_exps.weight"), std::string::npos) << r.message();
}

TEST(QuantMixes, WhichTensorsNeedAnImportanceMatrix) {
  EXPECT_TRUE(tensor_needs_importance(target("IQ2_XXS"), "blk.0.attn_q.weight", T::IQ2_XXS));
  EXPECT_TRUE(tensor_needs_importance(target("IQ3_XXS"), "blk.0.ffn_up.weight", T::IQ3_XXS));
  EXPECT_TRUE(tensor_needs_importance(target("IQ1_M"), "blk.0.ffn_up.weight", T::IQ1_M));
  EXPECT_TRUE(tensor_needs_importance(target("Q2_K_S"), "blk.0.ffn_up.weight", T::Q2_K));
  EXPECT_FALSE(tensor_needs_importance(target("Q2_K"), "blk.0.ffn_up.weight", T::Q2_K));
  EXPECT_FALSE(tensor_needs_importance(target("IQ2_XXS"), "blk.0.attn_v.weight", T::Q4_K));
  EXPECT_FALSE(tensor_needs_importance(target("IQ2_XXS"), "token_embd.weight", T::IQ2_XXS));
  EXPECT_FALSE(tensor_needs_importance(target("IQ2_XXS"), "output.weight", T::IQ2_XXS));
  for (const QuantMix& m : quant_mixes()) {
    // A mix the common quantizer refuses without an importance matrix has a tensor that needs
    // one on an ordinary model.
    Synthetic s(32, 32, 8, 4096, 14336);
    auto types = s.plan(m.name, false);
    bool any = false;
    for (const auto& [name, type] : types)
      any |= tensor_needs_importance(target(m.name), name, type);
    EXPECT_EQ(any, m.needs_importance) << m.name;
  }
}

}  // namespace
}  // namespace vela

// vela synth's models: the known shapes have the published checkpoints' parameter counts and
// tensor shapes; small shapes written in several types load with Model::load with the shape's
// hyper-parameters, hold the same weights whatever the type, give the same logits with weights
// repacked for the int8 kernels as row-major, and generate with the LLM API.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "io/gguf.h"
#include "kernels/packed/packed_layout.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model/model.h"
#include "quant/dequantize.h"
#include "support/shared_data.h"
#include "tools_support/builtin_vocab.h"
#include "tools_support/synth.h"
#include "vela/llm.h"

namespace vela {
namespace {

uint64_t count_params(const ModelShape& s) {
  uint64_t n = 0;
  for (const TensorSpec& t : model_tensors(s, s.n_vocab)) n += uint64_t(t.n_elements());
  return n;
}

TEST(Synth, KnownShapesHaveThePublishedParameterCounts) {
  EXPECT_EQ(count_params(*find_shape("tinyllama-1.1b")), 1100048384u);
  EXPECT_EQ(count_params(*find_shape("qwen2-0.5b")), 494032768u);
  EXPECT_EQ(count_params(*find_shape("llama2-7b")), 6738415616u);
  EXPECT_EQ(count_params(*find_shape("llama3-8b")), 8030261248u);
  EXPECT_EQ(count_params(*find_shape("qwen3-0.6b")), 596049920u);
  EXPECT_EQ(count_params(*find_shape("olmoe-1b-7b")), 6919161856u);
  EXPECT_EQ(count_params(*find_shape("gemma3-1b")), 999885952u);
  EXPECT_EQ(count_params(*find_shape("phi3-mini")), 3821079552u);
  // Qwen3.5-0.8B's text model (without the vision encoder): 752393024 in the decoder, and its
  // multi-token-prediction layer: a gated attention layer with its FFN (18352640), eh_proj
  // 2048 x 1024 and 3 norms of 1024.
  EXPECT_EQ(count_params(*find_shape("qwen35-0.8b")), 752393024u + 18352640u + 2097152u + 3072u);
  // Its MTP layer: gated attention with the experts and gated shared expert (64818688).
  EXPECT_EQ(count_params(*find_shape("qwen35moe-mini")),
            2122595712u + 64818688u + 2097152u + 3072u);
  // Not a published checkpoint: 2 x 129280 x 2048 embeddings, 12 latent-attention layers of
  // 15341568, one dense FFN of 3 x 2048 x 5632, 11 MoE FFNs of 204603456; the MTP block one more
  // such layer and MoE FFN, eh_proj 4096 x 2048 and 3 norms of 2048.
  EXPECT_EQ(count_params(*find_shape("deepseek3-mini")),
            2998872768u + 15341568u + 204603456u + 8388608u + 6144u);
  // Gemma 4 E2B's text model: token_embd 262144 x 1536, per_layer_token_embd 262144 x 35 x 256,
  // per_layer_model_proj 1536 x 8960, output_norm, rope_freqs (256), per_layer_proj_norm (256);
  // attention: 12 windowed layers with K/V (7078400 each, heads of 256), 3 global (14156800,
  // heads of 512), 16 windowed and 4 global layers reading another's K/V (q, o and q_norm only:
  // 6291712 and 12583424); FFNs: 15 of 3 x 1536 x 6144, 20 of 3 x 1536 x 12288; in every layer
  // 5 norms of 1536, the output scale and the per-layer gate and projection (2 x 1536 x 256).
  EXPECT_EQ(count_params(*find_shape("gemma4-e2b")),
            402653184ull + 2348810240u + 13762560u + 1536u + 256u + 256u +  // outside the layers
                12u * 7078400u + 3u * 14156800u + 16u * 6291712u + 4u * 12583424u +
                15u * 28311552u + 20u * 56623104u + 35u * (5u * 1536u + 1u + 786432u));
  EXPECT_EQ(find_shape("no-such-shape"), nullptr);
}

TEST(Synth, TensorShapesFollowTheGgufLayout) {
  const ModelShape& s = *find_shape("llama3-8b");
  const auto tensors = model_tensors(s, s.n_vocab);
  EXPECT_EQ(tensors.size(), 3u + 9u * 32u);
  const auto find = [&](const std::string& name) -> const TensorSpec* {
    for (const TensorSpec& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  };
  ASSERT_NE(find("token_embd.weight"), nullptr);
  EXPECT_EQ(find("token_embd.weight")->ne, (std::vector<int64_t>{4096, 128256}));
  EXPECT_EQ(find("output.weight")->ne, (std::vector<int64_t>{4096, 128256}));
  EXPECT_EQ(find("blk.31.attn_k.weight")->ne,
            (std::vector<int64_t>{4096, 1024}));  // 8 KV heads x 128
  EXPECT_EQ(find("blk.0.ffn_down.weight")->ne, (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(find("blk.0.attn_norm.weight")->ne, (std::vector<int64_t>{4096}));

  const ModelShape& q = *find_shape("qwen2-0.5b");
  const auto qt = model_tensors(q, q.n_vocab);
  EXPECT_EQ(qt.size(), 2u + 12u * 24u);  // tied: no output.weight; Q/K/V biases
  bool has_bias = false, has_output = false;
  for (const TensorSpec& t : qt) {
    has_bias |= t.name == "blk.23.attn_v.bias" && t.ne == std::vector<int64_t>{128};
    has_output |= t.name == "output.weight";
  }
  EXPECT_TRUE(has_bias);
  EXPECT_FALSE(has_output);
}

const TensorSpec* find_spec(const std::vector<TensorSpec>& tensors, const std::string& name) {
  for (const TensorSpec& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<int64_t> spec_ne(const std::vector<TensorSpec>& tensors, const std::string& name) {
  const TensorSpec* t = find_spec(tensors, name);
  return t ? t->ne : std::vector<int64_t>{};
}

// The published checkpoints of the newer families: explicit head sizes, Q/K norms per head or
// over the whole projection, experts, post norms, fused projections.
TEST(Synth, NewFamiliesFollowTheGgufLayout) {
  using Ne = std::vector<int64_t>;
  const ModelShape& qwen3 = *find_shape("qwen3-0.6b");
  EXPECT_EQ(qwen3.head_dim(), 128);  // 16 heads x 128 = 2048 != n_embd
  const auto q3 = model_tensors(qwen3, qwen3.n_vocab);
  EXPECT_EQ(q3.size(), 2u + 11u * 28u);
  EXPECT_EQ(spec_ne(q3, "blk.0.attn_q.weight"), (Ne{1024, 2048}));
  EXPECT_EQ(spec_ne(q3, "blk.0.attn_k.weight"), (Ne{1024, 1024}));
  EXPECT_EQ(spec_ne(q3, "blk.0.attn_output.weight"), (Ne{2048, 1024}));
  EXPECT_EQ(spec_ne(q3, "blk.27.attn_q_norm.weight"), (Ne{128}));
  EXPECT_EQ(find_spec(q3, "output.weight"), nullptr);

  const ModelShape& olmoe = *find_shape("olmoe-1b-7b");
  const auto ol = model_tensors(olmoe, olmoe.n_vocab);
  EXPECT_EQ(ol.size(), 3u + 12u * 16u);
  EXPECT_EQ(spec_ne(ol, "blk.0.attn_q_norm.weight"), (Ne{2048}));
  EXPECT_EQ(spec_ne(ol, "blk.0.attn_k_norm.weight"), (Ne{2048}));
  EXPECT_EQ(spec_ne(ol, "blk.0.ffn_gate_inp.weight"), (Ne{2048, 64}));
  EXPECT_EQ(spec_ne(ol, "blk.15.ffn_gate_exps.weight"), (Ne{2048, 1024, 64}));
  EXPECT_EQ(spec_ne(ol, "blk.15.ffn_up_exps.weight"), (Ne{2048, 1024, 64}));
  EXPECT_EQ(spec_ne(ol, "blk.15.ffn_down_exps.weight"), (Ne{1024, 2048, 64}));
  EXPECT_EQ(find_spec(ol, "blk.0.ffn_gate.weight"), nullptr);

  const ModelShape& mixtral = *find_shape("mixtral-mini");
  const auto mx = model_tensors(mixtral, mixtral.n_vocab);
  EXPECT_EQ(spec_ne(mx, "blk.0.attn_k.weight"), (Ne{2048, 512}));
  EXPECT_EQ(spec_ne(mx, "blk.0.ffn_gate_exps.weight"), (Ne{2048, 5632, 8}));
  EXPECT_EQ(spec_ne(mx, "blk.0.ffn_down_exps.weight"), (Ne{5632, 2048, 8}));

  const ModelShape& gemma3 = *find_shape("gemma3-1b");
  EXPECT_EQ(gemma3.head_dim(), 256);
  const auto g3 = model_tensors(gemma3, gemma3.n_vocab);
  EXPECT_EQ(g3.size(), 2u + 13u * 26u);
  EXPECT_EQ(spec_ne(g3, "blk.0.attn_q.weight"), (Ne{1152, 1024}));
  EXPECT_EQ(spec_ne(g3, "blk.0.attn_v.weight"), (Ne{1152, 256}));
  EXPECT_EQ(spec_ne(g3, "blk.0.attn_output.weight"), (Ne{1024, 1152}));
  EXPECT_EQ(spec_ne(g3, "blk.0.attn_k_norm.weight"), (Ne{256}));
  EXPECT_EQ(spec_ne(g3, "blk.25.post_attention_norm.weight"), (Ne{1152}));
  EXPECT_EQ(spec_ne(g3, "blk.25.post_ffw_norm.weight"), (Ne{1152}));

  const ModelShape& phi3 = *find_shape("phi3-mini");
  EXPECT_EQ(phi3.head_dim(), 96);
  const auto p3 = model_tensors(phi3, phi3.n_vocab);
  EXPECT_EQ(p3.size(), 3u + 6u * 32u);
  EXPECT_EQ(spec_ne(p3, "blk.0.attn_qkv.weight"), (Ne{3072, 9216}));
  EXPECT_EQ(spec_ne(p3, "blk.0.ffn_up.weight"), (Ne{3072, 16384}));
  EXPECT_EQ(spec_ne(p3, "blk.0.ffn_down.weight"), (Ne{8192, 3072}));
  EXPECT_EQ(find_spec(p3, "blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(find_spec(p3, "blk.0.ffn_gate.weight"), nullptr);

  // Qwen3.5: layers 0-2 of every 4 Gated DeltaNet (16 key and 16 value heads of 128: q, k, v
  // are 2048 channels each), layer 3 gated attention (8 heads of 256: the query's 2048 rows and
  // as many gate rows).
  const ModelShape& q35 = *find_shape("qwen35-0.8b");
  const auto dn = model_tensors(q35, q35.n_vocab);
  EXPECT_EQ(dn.size(), 2u + 18u * 14u + 6u * 11u + 11u + 4u);  // the MTP block: attention + 4
  EXPECT_EQ(spec_ne(dn, "token_embd.weight"), (Ne{1024, 248320}));
  EXPECT_EQ(find_spec(dn, "output.weight"), nullptr);
  EXPECT_EQ(spec_ne(dn, "blk.0.attn_qkv.weight"), (Ne{1024, 6144}));
  EXPECT_EQ(spec_ne(dn, "blk.0.attn_gate.weight"), (Ne{1024, 2048}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_conv1d.weight"), (Ne{4, 6144}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_a"), (Ne{16}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_dt.bias"), (Ne{16}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_beta.weight"), (Ne{1024, 16}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_alpha.weight"), (Ne{1024, 16}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_norm.weight"), (Ne{128}));
  EXPECT_EQ(spec_ne(dn, "blk.0.ssm_out.weight"), (Ne{2048, 1024}));
  EXPECT_EQ(spec_ne(dn, "blk.0.post_attention_norm.weight"), (Ne{1024}));
  EXPECT_EQ(find_spec(dn, "blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(find_spec(dn, "blk.0.ffn_norm.weight"), nullptr);
  EXPECT_EQ(spec_ne(dn, "blk.3.attn_q.weight"), (Ne{1024, 4096}));
  EXPECT_EQ(spec_ne(dn, "blk.3.attn_k.weight"), (Ne{1024, 512}));
  EXPECT_EQ(spec_ne(dn, "blk.3.attn_output.weight"), (Ne{2048, 1024}));
  EXPECT_EQ(spec_ne(dn, "blk.3.attn_q_norm.weight"), (Ne{256}));
  EXPECT_EQ(find_spec(dn, "blk.3.attn_qkv.weight"), nullptr);
  EXPECT_EQ(find_spec(dn, "blk.3.ssm_a"), nullptr);
  EXPECT_EQ(spec_ne(dn, "blk.23.ffn_down.weight"), (Ne{3584, 1024}));
  // The multi-token-prediction block after the 24 layers attends, though (24 + 1) % 4 != 0.
  EXPECT_EQ(spec_ne(dn, "blk.24.attn_q.weight"), (Ne{1024, 4096}));
  EXPECT_EQ(spec_ne(dn, "blk.24.attn_k_norm.weight"), (Ne{256}));
  EXPECT_EQ(spec_ne(dn, "blk.24.ffn_down.weight"), (Ne{3584, 1024}));
  EXPECT_EQ(spec_ne(dn, "blk.24.nextn.eh_proj.weight"), (Ne{2048, 1024}));
  EXPECT_EQ(spec_ne(dn, "blk.24.nextn.shared_head_norm.weight"), (Ne{1024}));
  EXPECT_EQ(find_spec(dn, "blk.24.attn_qkv.weight"), nullptr);
  EXPECT_EQ(find_spec(dn, "blk.24.nextn.embed_tokens.weight"), nullptr);
  EXPECT_EQ(find_spec(dn, "blk.25.attn_norm.weight"), nullptr);

  // The MoE form: 32 value heads to 16 key heads, experts beside a gated shared expert.
  const ModelShape& q35moe = *find_shape("qwen35moe-mini");
  const auto dm = model_tensors(q35moe, q35moe.n_vocab);
  EXPECT_EQ(spec_ne(dm, "output.weight"), (Ne{1024, 248320}));
  EXPECT_EQ(spec_ne(dm, "blk.0.attn_qkv.weight"), (Ne{1024, 8192}));
  EXPECT_EQ(spec_ne(dm, "blk.0.ssm_a"), (Ne{32}));
  EXPECT_EQ(spec_ne(dm, "blk.0.ssm_out.weight"), (Ne{4096, 1024}));
  EXPECT_EQ(spec_ne(dm, "blk.3.attn_q.weight"), (Ne{1024, 8192}));
  EXPECT_EQ(spec_ne(dm, "blk.3.ffn_gate_exps.weight"), (Ne{1024, 256, 64}));
  EXPECT_EQ(spec_ne(dm, "blk.3.ffn_gate_inp_shexp.weight"), (Ne{1024}));
  EXPECT_EQ(spec_ne(dm, "blk.3.ffn_up_shexp.weight"), (Ne{1024, 256}));
  EXPECT_EQ(spec_ne(dm, "blk.3.ffn_down_shexp.weight"), (Ne{256, 1024}));
  EXPECT_EQ(spec_ne(dm, "blk.24.attn_q.weight"), (Ne{1024, 8192}));
  EXPECT_EQ(spec_ne(dm, "blk.24.ffn_gate_exps.weight"), (Ne{1024, 256, 64}));
  EXPECT_EQ(spec_ne(dm, "blk.24.ffn_gate_inp_shexp.weight"), (Ne{1024}));
  EXPECT_EQ(spec_ne(dm, "blk.24.nextn.eh_proj.weight"), (Ne{2048, 1024}));
}

TEST(Synth, ShapeConsistencyAllowsAnExplicitHeadSize) {
  for (const ModelShape& s : known_shapes()) EXPECT_EQ(shape_problem(s), "") << s.name;
  ModelShape s = *find_shape("tiny");
  s.n_head = 3;  // 256 / 3 is no head size
  EXPECT_NE(shape_problem(s), "");
  s.head_size = 96;  // 3 x 96 = 288 != 256 is fine once explicit
  s.n_head_kv = 1;
  EXPECT_EQ(shape_problem(s), "");
  EXPECT_EQ(s.head_dim(), 96);
  s = *find_shape("tiny-mixtral");
  s.n_expert_used = 9;  // more than the 8 experts
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny");
  s.sliding_window_pattern = 2;  // without a window
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-qwen35");
  s.ssm_v_heads = 3;  // not a multiple of the 2 key heads
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-qwen35");
  s.full_attention_interval = 0;  // DeltaNet geometry without a layer pattern
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-qwen35");
  s.rope_dim = 66;  // more than the 64-wide heads
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-qwen35");
  s.n_ff_shexp = 256;  // a shared expert without experts
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-qwen35");
  s.n_nextn = -1;
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-gemma4");
  s.n_kv_shared = 3;  // layer 1 (global) would share with no earlier global layer
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-gemma4");
  s.sliding_window_pattern = 0;  // per-layer head sizes without a layer pattern
  EXPECT_NE(shape_problem(s), "");
  s = *find_shape("tiny-gemma4");
  s.n_head_kv_global = 3;  // does not divide the 4 query heads
  EXPECT_NE(shape_problem(s), "");
}

TEST(Synth, WeightsAreDeterministicWithTheRequestedSpread) {
  std::vector<float> a(4096), b(4096);
  synth_rows(7, 3, TensorKind::kMatrix, 0.02f, 1024, 10, 14, a.data());
  synth_rows(7, 3, TensorKind::kMatrix, 0.02f, 1024, 10, 14, b.data());
  EXPECT_EQ(a, b);
  // A row does not depend on which range it was generated in (threads split ranges freely).
  std::vector<float> one(1024);
  synth_rows(7, 3, TensorKind::kMatrix, 0.02f, 1024, 12, 13, one.data());
  EXPECT_TRUE(std::equal(one.begin(), one.end(), a.begin() + 2 * 1024));
  synth_rows(8, 3, TensorKind::kMatrix, 0.02f, 1024, 10, 14, b.data());
  EXPECT_NE(a, b);
  double sum = 0, sum2 = 0;
  for (float x : a) sum += x, sum2 += double(x) * x;
  const double mean = sum / 4096, sd = std::sqrt(sum2 / 4096 - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.001);
  synth_rows(7, 1, TensorKind::kNorm, 0.02f, 1024, 0, 1, one.data());
  for (float x : one) ASSERT_EQ(x, 1.0f);

  // A DeltaNet's decay scales: -exp(A_log), A_log uniform in [0, ln 16), spread over the range.
  std::vector<float> decay(4096);
  synth_rows(7, 5, TensorKind::kDecay, 0.02f, 4096, 0, 1, decay.data());
  float lo = 0, hi = -100;
  for (float x : decay) {
    ASSERT_LE(x, -1.0f);
    ASSERT_GT(x, -16.0f);
    lo = std::min(lo, x), hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -15.0f);
  EXPECT_GT(hi, -1.05f);
  // Convolution taps: std 1/sqrt(taps) whatever weight_std says.
  std::vector<float> taps(4 * 2048);
  synth_rows(7, 6, TensorKind::kConv, 0.02f, 4, 0, 2048, taps.data());
  sum = sum2 = 0;
  for (float x : taps) sum += x, sum2 += double(x) * x;
  EXPECT_NEAR(std::sqrt(sum2 / double(taps.size())), 0.5, 0.02);
}

std::string synth(const std::string& shape, const std::string& type, const std::string& vocab) {
  SynthOptions o;
  o.output_path = vela::test::unique_temp_path("vela_synth_" + shape + "_" + type + ".gguf");
  o.shape = *find_shape(shape);
  o.target = *parse_quant_target(type);
  o.vocab_path = test::shared_path(vocab).string();
  o.seed = 42;
  o.n_threads = 2;
  auto summary = synthesize_model(o);
  EXPECT_TRUE(summary.ok()) << summary.message();
  if (summary.ok()) {
    EXPECT_EQ(std::filesystem::file_size(o.output_path), summary->file_bytes);
  }
  return o.output_path;
}

TEST(Synth, SmallShapesLoadInEveryType) {
  VELA_REQUIRE_SHARED();
  for (const std::string shape : {"tiny", "tiny-qwen2"}) {
    const ModelShape& s = *find_shape(shape);
    for (const std::string type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                   "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M"}) {
      const std::string path = synth(shape, type, "models/aidreams260K.gguf");
      auto model = Model::load(path);
      ASSERT_TRUE(model.ok()) << shape << " " << type << ": " << model.message();
      const ModelConfig& c = (*model)->config();
      EXPECT_EQ(c.arch_name, s.architecture);
      EXPECT_EQ(c.n_embd, s.n_embd);
      EXPECT_EQ(c.n_layer, s.n_layer);
      EXPECT_EQ(c.n_head, s.n_head);
      EXPECT_EQ(c.n_head_kv, s.n_head_kv);
      EXPECT_EQ(c.n_ff, s.n_ff);
      EXPECT_EQ(c.n_vocab, 512);
      EXPECT_EQ(c.n_ctx_train, s.n_ctx);
      EXPECT_FLOAT_EQ(c.rope.freq_base, s.rope_freq_base);
      EXPECT_FLOAT_EQ(c.rms_eps, s.rms_eps);
      EXPECT_EQ((*model)->weights().tied_embeddings, s.tied_embeddings);
      EXPECT_EQ(*(*model)->gguf().get_uint("general.file_type"),
                parse_quant_target(type)->file_type);
      std::filesystem::remove(path);
    }
  }
}

// The same seed gives the same model whatever the type: the Q8_0 file decodes to the F32
// file's weights within Q8_0's step.
TEST(Synth, SameWeightsInEveryType) {
  VELA_REQUIRE_SHARED();
  const std::string f32 = synth("tiny", "F32", "models/aidreams260K.gguf");
  const std::string q8 = synth("tiny", "Q8_0", "models/aidreams260K.gguf");
  auto a = GgufFile::open(f32);
  auto b = GgufFile::open(q8);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const GgufTensorInfo& t : a->tensors()) {
    const GgufTensorInfo* u = b->find_tensor(t.name);
    ASSERT_NE(u, nullptr);
    std::vector<float> x(size_t(t.n_elements())), y(x.size());
    dequantize_row(t.ggml_type(), t.data, x.data(), t.n_elements());
    dequantize_row(u->ggml_type(), u->data, y.data(), u->n_elements());
    float max_err = 0;
    for (size_t i = 0; i < x.size(); ++i) max_err = std::max(max_err, std::fabs(x[i] - y[i]));
    EXPECT_LT(max_err, 0.12f / 127) << t.name;  // |w| < 3.5 sigma = 0.07; Q8_0 step/2 plus fp16 d
  }
}

// Logits of every token of a short prompt, one sequence from position 0.
std::vector<float> prompt_logits(const std::shared_ptr<const Model>& model,
                                 const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model->config();
  DecoderForward fwd(model, ForwardOptions{64, 64, 64});
  KvCache cache(KvCacheConfig{c.n_layer, c.n_head_kv, c.head_dim, 16, 4, KvType::kF16});
  const std::vector<int32_t> table = {0, 1, 2, 3};
  std::vector<int32_t> pos(tokens.size()), seq(tokens.size(), 0), want(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) pos[i] = int32_t(i), want[i] = int32_t(i);
  std::vector<float> logits(tokens.size() * size_t(c.n_vocab));
  const Status st = fwd.forward(ForwardBatch{tokens, pos, seq, table, 4, want}, cache, logits);
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

// Weights repacked at load for the int8 kernels (16-row interleaved groups) give the logits of
// the row-major weights, in every type that has a packed layout (Q5_K and Q6_K through the K
// mixes): the kernels differ only in the order of float additions.
TEST(Synth, RepackedWeightsGiveTheRowMajorLogits) {
  VELA_REQUIRE_SHARED();
  const std::vector<int32_t> tokens = {1, 17, 300, 42, 511, 9, 128, 77, 3, 250, 64, 5, 400};
  for (const std::string type : {"Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    SCOPED_TRACE(type);
    const std::string path = synth("tiny", type, "models/aidreams260K.gguf");
    auto packed = Model::load(path);
    ModelLoadOptions row_major;
    row_major.repack_weights = false;
    auto plain = Model::load(path, row_major);
    ASSERT_TRUE(packed.ok() && plain.ok());
    const WeightMatrix& down = (*packed)->weights().layers[0].w_down;
    if (prefers_interleaved16(down.type, down.n_rows, down.n_cols) &&
        std::getenv("VELA_REPACK") == nullptr) {
      EXPECT_EQ(down.layout, WeightLayout::kInterleaved16) << "ffn_down was not repacked";
    }
    const std::vector<float> a = prompt_logits(*packed, tokens);
    const std::vector<float> b = prompt_logits(*plain, tokens);
    float scale = 0, worst = 0;
    for (float v : b) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    std::printf("%s: worst repacked vs row-major difference %.3g (logit scale %.3g)\n",
                type.c_str(), double(worst), double(scale));
    // The packed and row-major kernels sum each block's products in another order, so an
    // activation now and then lands on the other side of its next layer's 8-bit rounding step
    // and the flip grows through the layers (seen on the AVX2 level: Q4_0 8.1e-3 at a scale of
    // 1.2; Q8_0 1.2e-7, no flip); a layout bug moves logits by O(scale).
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 2e-2f * (1 + scale)) << "logit " << i;
    std::filesystem::remove(path);
  }
}

// Logits of every token of `tokens`, one sequence from position 0 in a state slot, run in
// passes of `chunk` tokens (1: decode steps): [n_tokens, n_vocab].
std::vector<float> sequence_logits(const std::shared_ptr<const Model>& model,
                                   const std::vector<int32_t>& tokens, int32_t chunk) {
  const ModelConfig& c = model->config();
  const int32_t n = int32_t(tokens.size());
  DecoderForward fwd(model, ForwardOptions{chunk, chunk, 128});
  KvCache cache(model_cache_config(c, 16, 8, KvType::kF32, /*n_state_slots=*/1));
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  const int32_t slot = 0;
  std::vector<float> logits(size_t(n) * size_t(c.n_vocab));
  for (int32_t p = 0; p < n; p += chunk) {
    const int32_t m = std::min(chunk, n - p);
    std::vector<int32_t> pos(static_cast<size_t>(m)), seq(static_cast<size_t>(m), 0),
        want(static_cast<size_t>(m));
    for (int32_t i = 0; i < m; ++i) pos[size_t(i)] = p + i, want[size_t(i)] = i;
    ForwardBatch b{std::span(tokens).subspan(size_t(p), size_t(m)), pos, seq, table, 8, want};
    b.state_slots = std::span<const int32_t>(&slot, 1);
    const Status st = fwd.forward(
        b, cache, std::span(logits).subspan(size_t(p) * size_t(c.n_vocab), size_t(m) * c.n_vocab));
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return logits;
}

// The Qwen3.5 shapes load with their hybrid layout (three DeltaNet layers, then an attention
// layer) and run: a 70-token prompt (past the delta rule's 64-token chunk) gives finite logits
// that depend on the token, in every type; decoding the same tokens one by one (the recurrence)
// gives the prompt's logits (the chunked form) within f32 rounding.
TEST(Synth, Qwen35ShapesRunWithFiniteLogits) {
  const std::string vocab = vela::test::unique_temp_path("vela_synth_q35_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  std::vector<int32_t> tokens(70);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % 512);
  for (const std::string shape : {"tiny-qwen35", "tiny-qwen35moe"}) {
    for (const std::string type : {"F32", "Q8_0", "Q4_K_M"}) {
      SCOPED_TRACE(shape + " " + type);
      SynthOptions o;
      o.output_path = vela::test::unique_temp_path("vela_synth_" + shape + "_" + type + ".gguf");
      o.shape = *find_shape(shape);
      o.target = *parse_quant_target(type);
      o.vocab_path = vocab;
      o.pad_vocab = true;
      o.seed = 3;
      o.n_threads = 2;
      ASSERT_TRUE(synthesize_model(o).ok());
      auto model = Model::load(o.output_path);
      ASSERT_TRUE(model.ok()) << model.message();
      const ModelConfig& c = (*model)->config();
      EXPECT_EQ(c.arch_name, o.shape.architecture);
      EXPECT_EQ(c.n_state_layers, 3);
      EXPECT_EQ(c.n_kv_layers, 1);
      for (int32_t i = 0; i < 4; ++i)
        EXPECT_EQ(c.layers[size_t(i)].mixer,
                  i == 3 ? MixerKind::kAttention : MixerKind::kGatedDeltaNet);
      EXPECT_EQ(c.delta_net.n_k_heads, 2);
      EXPECT_EQ(c.delta_net.n_v_heads, 4);
      EXPECT_EQ(c.delta_net.head_k_dim, 32);
      EXPECT_EQ(c.delta_net.head_v_dim, 32);
      EXPECT_EQ(c.delta_net.conv_kernel, 4);
      EXPECT_EQ(c.head_dim, 64);
      EXPECT_EQ(c.n_rot, 16);
      EXPECT_FLOAT_EQ(c.rope.freq_base, 1e7f);
      const LayerWeights& l0 = (*model)->weights().layers[0];
      for (float a : l0.delta_net.a) EXPECT_TRUE(a <= -1 && a > -16) << a;
      if (o.shape.n_expert > 0) {
        EXPECT_EQ(c.n_expert, 8);
        EXPECT_EQ(c.n_ff_shared_expert, 256);
        EXPECT_TRUE(c.shared_expert_gated);
        EXPECT_EQ(l0.shared_expert_gate.size(), 256u);
      }

      const std::vector<float> prompt = sequence_logits(*model, tokens, 70);
      const size_t nv = size_t(c.n_vocab);
      for (size_t i = 0; i < prompt.size(); ++i)
        ASSERT_TRUE(std::isfinite(prompt[i])) << "logit " << i % nv << " of token " << i / nv;
      float scale = 0, spread = 0, token_change = 0;
      for (size_t v = 0; v < nv; ++v) {
        const float last = prompt[69 * nv + v];
        scale = std::max(scale, std::fabs(last));
        spread = std::max(spread, std::fabs(last - prompt[69 * nv]));
        token_change = std::max(token_change, std::fabs(last - prompt[68 * nv + v]));
      }
      EXPECT_GT(spread, 1e-3f * scale) << "every logit of the last token alike";
      EXPECT_GT(token_change, 1e-3f * scale) << "the last two tokens' logits alike";
      if (type == "F32" && o.shape.n_expert == 0) {
        // (Not the MoE shape: a rounding difference may choose another expert.)
        const std::vector<float> decoded = sequence_logits(*model, tokens, 1);
        float worst = 0;
        for (size_t i = 0; i < prompt.size(); ++i)
          worst = std::max(worst, std::fabs(prompt[i] - decoded[i]));
        EXPECT_LT(worst, 2e-3f * (1 + scale))
            << "prompt and decode disagree (scale " << scale << ")";
      }
      std::filesystem::remove(o.output_path);
    }
  }
  std::filesystem::remove(vocab);
}

// "name ne0 ne1 ..." of each tensor of a file, in file order, but those named in `skip`.
std::vector<std::string> tensor_rows(const GgufFile& file,
                                     const std::vector<std::string_view>& skip = {}) {
  std::vector<std::string> rows;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (std::find(skip.begin(), skip.end(), t.name) != skip.end()) continue;
    std::string row(t.name);
    for (uint32_t d = 0; d < t.n_dims; ++d) row += " " + std::to_string(t.ne[d]);
    rows.push_back(row);
  }
  return rows;
}

// Options writing `shape` in `type` to a temporary file, with the vocabulary at vocab_path
// padded to the shape's size.
SynthOptions padded_tiny_options(const char* shape, const char* type,
                                 const std::string& vocab_path) {
  SynthOptions o;
  o.output_path = vela::test::unique_temp_path(std::string("vela_synth_") + shape + ".gguf");
  o.shape = *find_shape(shape);
  o.target = *parse_quant_target(type);
  o.vocab_path = vocab_path;
  o.pad_vocab = true;
  o.n_threads = 2;
  return o;
}

// tiny-deepseek2 writes the tensors the reference converter wrote for ../shared's file of that
// geometry (names, order, shapes; that file has no multi-token-prediction block, synth's blk.3),
// the keys the loader reads, and runs.
TEST(Synth, DeepSeekShapeMatchesTheConvertersLayoutAndRuns) {
  const std::string vocab = vela::test::unique_temp_path("vela_synth_ds_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  const SynthOptions o = padded_tiny_options("tiny-deepseek2", "F32", vocab);
  ASSERT_TRUE(synthesize_model(o).ok());
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->get_uint("deepseek2.block_count")->value_or(0), 4u);
  EXPECT_EQ(g->get_uint("deepseek2.nextn_predict_layers")->value_or(0), 1u);
  if (!vela::test::shared_dir().empty()) {
    auto ref = GgufFile::open(vela::test::shared_path("models/tiny-deepseek2-F32.gguf").string());
    ASSERT_TRUE(ref.ok()) << ref.message();
    std::vector<std::string> ours = tensor_rows(*g, {"output.weight", "output_norm.weight"});
    std::erase_if(ours, [](const std::string& row) { return row.starts_with("blk.3."); });
    EXPECT_EQ(ours, tensor_rows(*ref, {"output.weight", "output_norm.weight"}));
    for (const char* key :
         {"attention.q_lora_rank", "attention.kv_lora_rank", "attention.key_length",
          "attention.value_length", "attention.key_length_mla", "attention.value_length_mla",
          "expert_shared_count", "leading_dense_block_count", "expert_gating_func",
          "expert_group_count", "expert_group_used_count", "rope.dimension_count"}) {
      const std::string k = std::string("deepseek2.") + key;
      EXPECT_EQ(g->get_uint(k)->value_or(0), ref->get_uint(k)->value_or(1)) << k;
    }
  }
  auto model = Model::load(o.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig& c = (*model)->config();
  EXPECT_TRUE(c.latent_attention());
  EXPECT_EQ(c.mla.kv_lora_rank, 64);
  EXPECT_EQ(c.expert_gating, ExpertGating::kSigmoid);
  EXPECT_EQ(c.n_expert_groups, 4);
  EXPECT_FALSE(c.layers[0].moe);
  EXPECT_TRUE(c.layers[2].moe);
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % 512);
  const std::vector<float> logits = sequence_logits(*model, tokens, 40);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(o.output_path);
  std::filesystem::remove(vocab);
}

// tiny-glm4moe writes the tensors of ../shared's tiny-glm4moe, its multi-token-prediction block's
// included (names and shapes; the converter puts post_attention_norm after the q/k norms, synth
// right after attn_norm), and its keys, and runs.
TEST(Synth, GlmShapeMatchesTheConvertersTensorsAndRuns) {
  const std::string vocab = vela::test::unique_temp_path("vela_synth_glm_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  const SynthOptions o = padded_tiny_options("tiny-glm4moe", "F32", vocab);
  ASSERT_TRUE(synthesize_model(o).ok());
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok()) << g.message();
  if (!vela::test::shared_dir().empty()) {
    auto ref = GgufFile::open(vela::test::shared_path("models/tiny-glm4moe-F32.gguf").string());
    ASSERT_TRUE(ref.ok()) << ref.message();
    std::vector<std::string> ours = tensor_rows(*g), theirs = tensor_rows(*ref);
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    EXPECT_EQ(ours, theirs);
    for (const char* key :
         {"block_count", "nextn_predict_layers", "embedding_length", "feed_forward_length",
          "attention.head_count", "attention.head_count_kv", "attention.key_length",
          "attention.value_length", "rope.dimension_count", "expert_count", "expert_used_count",
          "expert_feed_forward_length", "expert_shared_count", "leading_dense_block_count",
          "expert_gating_func", "context_length"}) {
      const std::string k = std::string("glm4moe.") + key;
      EXPECT_EQ(g->get_uint(k)->value_or(0), ref->get_uint(k)->value_or(1)) << k;
    }
    for (const char* key :
         {"expert_weights_scale", "rope.freq_base", "attention.layer_norm_rms_epsilon"}) {
      const std::string k = std::string("glm4moe.") + key;
      EXPECT_FLOAT_EQ(float(g->get_float(k)->value_or(0)), float(ref->get_float(k)->value_or(1)))
          << k;
    }
  }
  auto model = Model::load(o.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.expert_gating, ExpertGating::kSigmoid);
  EXPECT_FALSE(c.layers[0].moe);
  EXPECT_TRUE(c.layers[2].moe);
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % 512);
  const std::vector<float> logits = sequence_logits(*model, tokens, 40);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(o.output_path);
  std::filesystem::remove(vocab);
}

// A key's array entries (integers or bools) and their type; empty when absent.
std::pair<GgufValueType, std::vector<uint64_t>> array_entries(const GgufFile& g,
                                                              const std::string& key) {
  auto array = g.get_array(key);
  if (!array.ok() || !array->has_value()) return {};
  std::vector<uint64_t> v;
  for (const GgufValue& item : (***array).items) v.push_back(item.u64);
  return {(***array).elem_type, v};
}

// tiny-gemma4 writes ../shared's tiny-gemma4 (tensor names and shapes, its keys with the
// per-layer arrays, the rope_freqs factors), which loads with each layer's geometry and runs.
TEST(Synth, Gemma4ShapeMatchesTheConvertersLayoutAndRuns) {
  const std::string vocab = vela::test::unique_temp_path("vela_synth_gemma4_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  const SynthOptions o = padded_tiny_options("tiny-gemma4", "F32", vocab);
  ASSERT_TRUE(synthesize_model(o).ok());
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(array_entries(*g, "gemma4.attention.head_count_kv").second,
            (std::vector<uint64_t>{2, 1, 2, 1}));
  if (!vela::test::shared_dir().empty()) {
    auto ref = GgufFile::open(vela::test::shared_path("models/tiny-gemma4-F32.gguf").string());
    ASSERT_TRUE(ref.ok()) << ref.message();
    std::vector<std::string> ours = tensor_rows(*g), theirs = tensor_rows(*ref);
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    EXPECT_EQ(ours, theirs);
    for (const char* key :
         {"context_length", "embedding_length", "block_count", "attention.head_count",
          "attention.key_length", "attention.value_length", "attention.key_length_swa",
          "attention.value_length_swa", "rope.dimension_count", "rope.dimension_count_swa",
          "attention.sliding_window", "attention.shared_kv_layers",
          "embedding_length_per_layer_input"}) {
      const std::string k = std::string("gemma4.") + key;
      EXPECT_EQ(g->get_uint(k)->value_or(0), ref->get_uint(k)->value_or(1)) << k;
    }
    for (const char* key : {"rope.freq_base", "rope.freq_base_swa", "final_logit_softcapping",
                            "attention.layer_norm_rms_epsilon"}) {
      const std::string k = std::string("gemma4.") + key;
      EXPECT_FLOAT_EQ(float(g->get_float(k)->value_or(0)), float(ref->get_float(k)->value_or(1)))
          << k;
    }
    for (const char* key :
         {"feed_forward_length", "attention.head_count_kv", "attention.sliding_window_pattern"}) {
      const std::string k = std::string("gemma4.") + key;
      EXPECT_EQ(array_entries(*g, k), array_entries(*ref, k)) << k;
      EXPECT_FALSE(array_entries(*g, k).second.empty()) << k;
    }
    const GgufTensorInfo* freqs = g->find_tensor("rope_freqs.weight");
    const GgufTensorInfo* ref_freqs = ref->find_tensor("rope_freqs.weight");
    ASSERT_TRUE(freqs && ref_freqs);
    ASSERT_EQ(freqs->n_bytes, ref_freqs->n_bytes);
    EXPECT_TRUE(std::equal(freqs->data, freqs->data + freqs->n_bytes, ref_freqs->data));
  }
  auto model = Model::load(o.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig& c = (*model)->config();
  const int32_t head_dim[] = {32, 64, 32, 64}, n_ff[] = {192, 192, 384, 384},
                kv_source[] = {0, 1, 0, 1};
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c.layers[size_t(i)].head_dim, head_dim[i]) << i;
    EXPECT_EQ(c.layers[size_t(i)].n_ff, n_ff[i]) << i;
    EXPECT_EQ(c.layers[size_t(i)].kv_source, kv_source[i]) << i;
  }
  EXPECT_EQ(c.n_kv_layers, 2);
  EXPECT_EQ(c.n_embd_per_layer, 64);
  std::vector<int32_t> tokens(24);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % 512);
  const std::vector<float> logits = sequence_logits(*model, tokens, 24);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(o.output_path);
  std::filesystem::remove(vocab);
}

// gemma4-e2b's layout, narrowed so a test can write it (64 wide, FFNs of 64 and 128, per-layer
// embeddings of 16, 512 tokens) but with E2B's 35 layers, heads, windows and KV sharing: its keys
// as the converter writes them (one KV head count for both kinds, FFN widths per layer), and the
// loaded layers: 4 windowed ones of 256 then a global one of 512, the first 15 keeping K/V, the
// rest reading layer 13's (windowed) or 14's (global).
TEST(Synth, Gemma4E2bLayoutLoads) {
  const ModelShape& e2b = *find_shape("gemma4-e2b");
  EXPECT_EQ(e2b.layer_ff(14), 6144);
  EXPECT_EQ(e2b.layer_ff(15), 12288);
  EXPECT_EQ(e2b.layer_head_dim(3), 256);
  EXPECT_EQ(e2b.layer_head_dim(4), 512);
  const std::string vocab = vela::test::unique_temp_path("vela_synth_e2b_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  SynthOptions o = padded_tiny_options("gemma4-e2b", "F32", vocab);
  o.shape.n_embd = 64;
  o.shape.n_ff = 64;
  o.shape.n_ff_kv_shared = 128;
  o.shape.n_embd_per_layer = 16;
  o.shape.n_vocab = 512;
  ASSERT_TRUE(synthesize_model(o).ok());
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->get_uint("gemma4.attention.head_count_kv")->value_or(0), 1u);
  std::vector<uint64_t> ff(35, 64), windowed(35, 1);
  std::fill(ff.begin() + 15, ff.end(), 128);
  for (size_t i = 4; i < 35; i += 5) windowed[i] = 0;
  EXPECT_EQ(array_entries(*g, "gemma4.feed_forward_length"),
            std::make_pair(GgufValueType::INT32, ff));
  EXPECT_EQ(array_entries(*g, "gemma4.attention.sliding_window_pattern"),
            std::make_pair(GgufValueType::BOOL, windowed));
  EXPECT_EQ(g->find_tensor("blk.15.attn_k.weight"), nullptr);
  ASSERT_NE(g->find_tensor("blk.14.attn_k.weight"), nullptr);

  auto model = Model::load(o.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(c.n_layer, 35);
  for (int32_t i = 0; i < 35; ++i) {
    const LayerConfig& l = c.layers[size_t(i)];
    const bool global = i % 5 == 4;
    EXPECT_EQ(l.sliding_window, global ? 0 : 512) << i;
    EXPECT_EQ(l.head_dim, global ? 512 : 256) << i;
    EXPECT_EQ(l.n_head_kv, 1) << i;
    EXPECT_EQ(l.n_ff, i < 15 ? 64 : 128) << i;
    EXPECT_EQ(l.kv_source, i < 15 ? i : global ? 14 : 13) << i;
  }
  EXPECT_EQ(c.n_kv_layers, 15);
  EXPECT_EQ(c.n_shared_kv_layers, 20);
  EXPECT_EQ(c.n_rot_local, 256);
  const std::vector<float>& factors = (*model)->weights().rope_freq_factors;
  ASSERT_EQ(factors.size(), 256u);
  EXPECT_EQ(std::count(factors.begin(), factors.end(), 1.0f), 64);
  // Grouped by window, the twelve sliding layers (rows of 256 values) make two groups of six
  // beside the three full ones (512): no block padded, 18,432 bytes of f16 K/V per position.
  const KvCacheConfig grouped = model_cache_config(c, 16, 1, KvType::kF16, 0, true);
  EXPECT_EQ(grouped.group_windows, (std::vector<int32_t>{512, 512, 0}));
  EXPECT_EQ(KvCache::bytes_per_block(grouped), size_t(6 * 2 * 16 * 512));
  EXPECT_EQ(KvCache::bytes_per_block(grouped) * size_t(grouped.n_groups()) / 16, 18432u);
  std::vector<int32_t> tokens(12);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % 512);
  const std::vector<float> logits = sequence_logits(*model, tokens, 12);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(o.output_path);
  std::filesystem::remove(vocab);
}

// Logits of an MTP block's pass over `tokens` (one sequence from position 0), each with its row
// of `hidden` [n_tokens, n_embd]: [n_tokens, n_vocab].
std::vector<float> mtp_logits(const std::shared_ptr<const Model>& block,
                              const std::vector<int32_t>& tokens,
                              const std::vector<float>& hidden) {
  const ModelConfig& c = block->config();
  const int32_t n = int32_t(tokens.size());
  DecoderForward fwd(block, ForwardOptions{n, n, 64, 2, 0});
  KvCache cache(model_cache_config(c, 16, 4, KvType::kF32));
  const std::vector<int32_t> table = {0, 1, 2, 3};
  std::vector<int32_t> pos(static_cast<size_t>(n)), seq(static_cast<size_t>(n), 0);
  for (int32_t i = 0; i < n; ++i) pos[size_t(i)] = i;
  std::vector<float> logits(size_t(n) * size_t(c.n_vocab));
  ForwardBatch b{tokens, pos, seq, table, 4, pos};
  b.input_hidden = hidden;
  const Status st = fwd.forward(b, cache, logits);
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

// The shapes whose checkpoints carry a multi-token-prediction block write it after the decoder's
// layers (block_count counts it): the decoder loads without it, Model::mtp_block loads it as an
// attention layer (latent for DeepSeek, full for Qwen3.5 whatever the layer pattern) with the
// last layer's FFN, and a pass over tokens with a hidden state each gives finite logits that
// depend on the hidden state. Quantized, the block's matrices get the types the decoder's
// same tensors get and eh_proj the target's; its norms and router stay F32.
TEST(Synth, MtpBlocksLoadAndRun) {
  const std::string vocab = vela::test::unique_temp_path("vela_synth_mtp_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  const std::vector<int32_t> tokens = {5, 300, 17, 511, 42, 128};
  for (const char* shape : {"tiny-qwen35", "tiny-qwen35moe", "tiny-deepseek2", "tiny-glm4moe"}) {
    for (const std::string type : {"F32", "Q4_K_M"}) {
      SCOPED_TRACE(std::string(shape) + " " + type);
      const SynthOptions o = padded_tiny_options(shape, type.c_str(), vocab);
      ASSERT_EQ(o.shape.n_nextn, 1);
      ASSERT_TRUE(synthesize_model(o).ok());
      auto target = Model::load(o.output_path);
      ASSERT_TRUE(target.ok()) << target.message();
      const ModelConfig& c = (*target)->config();
      EXPECT_EQ(c.n_layer, o.shape.n_layer);
      EXPECT_EQ(c.n_nextn_layers, 1);

      const GgufFile& g = (*target)->gguf();
      const std::string last = "blk." + std::to_string(o.shape.n_layer - 1) + ".";
      const std::string mtp = "blk." + std::to_string(o.shape.n_layer) + ".";
      for (const GgufTensorInfo& t : g.tensors()) {
        const std::string name(t.name);
        if (!name.starts_with(mtp)) continue;
        const std::string role = name.substr(mtp.size());
        if (t.n_dims == 1 || role == "ffn_gate_inp.weight") {
          EXPECT_EQ(t.ggml_type(), GgmlType::F32) << name;
        } else if (role == "nextn.eh_proj.weight") {
          EXPECT_EQ(t.ggml_type(), type == "F32" ? GgmlType::F32 : GgmlType::Q4_K) << name;
        } else if (role.find("attn_v.") == std::string::npos &&
                   role.find("ffn_down") == std::string::npos) {
          // (attn_v and ffn_down get more bits in the last blocks: the MTP block is the last.)
          const GgufTensorInfo* same = g.find_tensor(last + role);
          ASSERT_NE(same, nullptr) << name;
          EXPECT_EQ(t.ggml_type(), same->ggml_type()) << name;
        }
      }

      auto block = Model::mtp_block(*target);
      ASSERT_TRUE(block.ok()) << block.message();
      const ModelConfig& bc = (*block)->config();
      EXPECT_TRUE(bc.mtp_block);
      EXPECT_EQ(bc.first_file_layer, o.shape.n_layer);
      ASSERT_EQ(bc.layers.size(), 1u);
      EXPECT_EQ(bc.layers[0].mixer,
                o.shape.latent_attention() ? MixerKind::kLatentAttention : MixerKind::kAttention);
      EXPECT_EQ(bc.layers[0].moe, o.shape.n_expert > 0);

      const size_t E = size_t(bc.n_embd), nv = size_t(bc.n_vocab);
      std::vector<float> hidden(tokens.size() * E), other(hidden.size());
      for (size_t i = 0; i < hidden.size(); ++i) {
        hidden[i] = std::sin(0.7f * float(i));
        other[i] = std::cos(1.3f * float(i));
      }
      const std::vector<float> a = mtp_logits(*block, tokens, hidden);
      const std::vector<float> b = mtp_logits(*block, tokens, other);
      float scale = 0, change = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_TRUE(std::isfinite(a[i])) << "logit " << i % nv << " of token " << i / nv;
        scale = std::max(scale, std::fabs(a[i]));
        change = std::max(change, std::fabs(a[i] - b[i]));
      }
      EXPECT_GT(scale, 0.0f);
      EXPECT_GT(change, 1e-3f * scale) << "the block's logits do not depend on the hidden state";
      std::filesystem::remove(o.output_path);
    }
  }
  std::filesystem::remove(vocab);
}

// tiny-gpt-oss writes the tensors of ../shared's tiny-openai-moe (names and shapes; the
// converter puts post_attention_norm after the sinks, synth right after attn_norm), its keys,
// and runs; gpt-oss-20b-mini has the published layer's parameter count.
TEST(Synth, GptOssShapeMatchesTheConvertersTensorsAndRuns) {
  // Per layer: attention 2880 x (4096 + 2 x 512) + 4096 x 2880 with biases 4096 + 2 x 512 + 2880
  // and 64 sinks; 2 norms; router 2880 x 32 + 32; experts 32 x 3 x 2880 x 2880 with biases
  // 32 x 3 x 2880. Plus 2 x 201088 x 2880 embeddings and the output norm.
  const uint64_t layer = 2880ull * 5120 + 4096ull * 2880 + 5120 + 2880 + 64 + 2 * 2880 +
                         2880ull * 32 + 32 + 32ull * 3 * 2880 * 2880 + 32ull * 3 * 2880;
  EXPECT_EQ(count_params(*find_shape("gpt-oss-20b-mini")), 2ull * 201088 * 2880 + 2880 + 8 * layer);

  const std::string vocab = vela::test::unique_temp_path("vela_synth_oss_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  const SynthOptions o = padded_tiny_options("tiny-gpt-oss", "MXFP4_MOE", vocab);
  ASSERT_TRUE(synthesize_model(o).ok());
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok()) << g.message();
  for (const GgufTensorInfo& t : g->tensors()) {  // experts MXFP4, biases and sinks f32
    const std::string name(t.name);
    if (name.find("_exps.weight") != std::string::npos)
      EXPECT_EQ(t.ggml_type(), GgmlType::MXFP4) << name;
    if (name.find(".bias") != std::string::npos || name.find("sinks") != std::string::npos)
      EXPECT_EQ(t.ggml_type(), GgmlType::F32) << name;
  }
  if (!vela::test::shared_dir().empty()) {
    auto ref = GgufFile::open(vela::test::shared_path("models/tiny-openai-moe-F32.gguf").string());
    ASSERT_TRUE(ref.ok()) << ref.message();
    std::vector<std::string> ours = tensor_rows(*g), theirs = tensor_rows(*ref);
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    EXPECT_EQ(ours, theirs);
    for (const char* key :
         {"attention.sliding_window", "rope.scaling.original_context_length", "expert_count",
          "expert_used_count", "expert_feed_forward_length", "attention.key_length"}) {
      const std::string k = std::string("gpt-oss.") + key;
      EXPECT_EQ(g->get_uint(k)->value_or(0), ref->get_uint(k)->value_or(1)) << k;
    }
  }
  auto model = Model::load(o.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.rope.scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.expert_gating, ExpertGating::kSoftmaxOfChosen);
  EXPECT_EQ(c.layers[0].sliding_window, 8);
  EXPECT_EQ(c.layers[1].sliding_window, 0);
  EXPECT_EQ((*model)->weights().layers[2].attn_sinks.size(), 4u);
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % 512);
  const std::vector<float> logits = sequence_logits(*model, tokens, 40);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(o.output_path);
  std::filesystem::remove(vocab);
}

TEST(Synth, GeneratesWithTheLlmApi) {
  VELA_REQUIRE_SHARED();
  for (const std::string shape : {"tiny", "tiny-qwen2", "tiny-qwen35", "tiny-qwen35moe"}) {
    LLMConfig config;
    config.model_path = synth(shape, "Q4_K_M", "models/tiny-llama-gqa.gguf");  // Llama-2 vocabulary
    auto llm = LLM::load(config);
    ASSERT_TRUE(llm.ok()) << shape << ": " << llm.message();
    EXPECT_EQ((*llm)->info().n_vocab, 32000);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    p.ignore_eos = true;
    auto out = (*llm)->generate({"Once upon a time"}, p);
    ASSERT_TRUE(out.ok()) << out.message();
    EXPECT_EQ(out->front().outputs.at(0).token_ids.size(), 8u);
  }
}

// --pad-vocab: a shape's nominal vocabulary from a smaller tokenizer, padded with unused tokens
// that the tokenizer never produces.
TEST(Synth, PadsTheVocabularyToTheShape) {
  VELA_REQUIRE_SHARED();
  SynthOptions o;
  o.output_path = vela::test::unique_temp_path("vela_synth_padded.gguf");
  o.shape = *find_shape("tiny");
  o.shape.n_vocab = 600;  // aidreams260K has 512 tokens
  o.target = *parse_quant_target("Q8_0");
  o.vocab_path = test::shared_path("models/aidreams260K.gguf").string();
  o.pad_vocab = true;
  auto summary = synthesize_model(o);
  ASSERT_TRUE(summary.ok()) << summary.message();
  EXPECT_EQ(summary->n_vocab, 600);
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->find_tensor("token_embd.weight")->ne[1], 600);
  const auto tokens = gguf_array_strings(***g->get_array("tokenizer.ggml.tokens"));
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 600u);
  EXPECT_EQ((*tokens)[599], "[PAD599]");
  EXPECT_EQ((*gguf_array_ints(***g->get_array("tokenizer.ggml.token_type")))[512], 5);
  EXPECT_EQ((***g->get_array("tokenizer.ggml.scores")).items.size(), 600u);

  LLMConfig config;
  config.model_path = o.output_path;
  auto llm = LLM::load(config);
  ASSERT_TRUE(llm.ok()) << llm.message();
  for (int32_t id : (*llm)->tokenize("Once upon a time [PAD599]")) EXPECT_LT(id, 512);

  o.shape.n_vocab = 500;  // smaller than the tokenizer: cannot pad
  auto r = synthesize_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot pad"), std::string::npos) << r.message();
}

// What a tiny shape of each newer family writes: its keys and every tensor, in file order.
struct FamilyCase {
  std::string shape;
  std::string arch;
  bool tied = false;
  std::vector<std::pair<std::string, std::vector<int64_t>>> block;  // per-block tensors, in order
  std::vector<std::pair<std::string, uint64_t>> uints;  // keys without the "<arch>." prefix
  std::vector<std::pair<std::string, double>> floats;
  std::vector<std::string> absent;
  // Hybrid families: the layers i with (i + 1) % interval == 0 have attention_block's tensors
  // instead of block's.
  int32_t interval = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> attention_block;
  // A multi-token-prediction block after the layers: attention_block's tensors and the nextn.*.
  bool nextn = false;
  std::vector<std::pair<std::string, std::vector<int64_t>>> int_arrays;
};

std::vector<FamilyCase> family_cases() {
  using Block = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  // Blocks without Q/K norms or post norms, named once for the llama-like attention.
  const auto attention = [](int64_t q_dim, int64_t kv_dim) {
    return Block{{"attn_norm.weight", {256}},
                 {"attn_q.weight", {256, q_dim}},
                 {"attn_k.weight", {256, kv_dim}},
                 {"attn_v.weight", {256, kv_dim}},
                 {"attn_output.weight", {q_dim, 256}}};
  };
  const Block dense = {{"ffn_gate.weight", {256, 512}},
                       {"ffn_up.weight", {256, 512}},
                       {"ffn_down.weight", {512, 256}}};
  const Block moe = {{"ffn_gate_inp.weight", {256, 8}},
                     {"ffn_gate_exps.weight", {256, 256, 8}},
                     {"ffn_up_exps.weight", {256, 256, 8}},
                     {"ffn_down_exps.weight", {256, 256, 8}}};
  const auto cat = [](std::initializer_list<Block> parts) {
    Block out;
    for (const Block& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const Block ffn_norm = {{"ffn_norm.weight", {256}}};
  std::vector<FamilyCase> cases;
  cases.push_back({"tiny-qwen3",
                   "qwen3",
                   true,
                   cat({attention(512, 256),
                        {{"attn_q_norm.weight", {128}}, {"attn_k_norm.weight", {128}}},
                        ffn_norm,
                        dense}),
                   {{"attention.key_length", 128},
                    {"attention.value_length", 128},
                    {"rope.dimension_count", 128},
                    {"attention.head_count", 4},
                    {"attention.head_count_kv", 2},
                    {"feed_forward_length", 512},
                    {"embedding_length", 256},
                    {"block_count", 2}},
                   {{"rope.freq_base", 1e6}, {"attention.layer_norm_rms_epsilon", 1e-6}},
                   {"expert_count", "attention.sliding_window", "nextn_predict_layers"}});
  cases.push_back({"tiny-qwen3moe",
                   "qwen3moe",
                   false,
                   cat({attention(256, 128),
                        {{"attn_q_norm.weight", {64}}, {"attn_k_norm.weight", {64}}},
                        ffn_norm,
                        moe}),
                   {{"attention.key_length", 64},
                    {"expert_count", 8},
                    {"expert_used_count", 2},
                    {"expert_feed_forward_length", 256},
                    {"feed_forward_length", 512}},
                   {{"rope.freq_base", 1e6}},
                   {}});
  cases.push_back({"tiny-olmoe",
                   "olmoe",
                   false,
                   cat({attention(256, 256),
                        {{"attn_q_norm.weight", {256}}, {"attn_k_norm.weight", {256}}},
                        ffn_norm,
                        moe}),
                   {{"expert_count", 8},
                    {"expert_used_count", 2},
                    {"expert_feed_forward_length", 256},
                    {"feed_forward_length", 256},
                    {"rope.dimension_count", 64}},
                   {{"attention.layer_norm_rms_epsilon", 1e-5}},
                   {"attention.key_length"}});
  cases.push_back({"tiny-mixtral",
                   "llama",
                   false,
                   cat({attention(256, 128), ffn_norm, moe}),
                   {{"expert_count", 8}, {"expert_used_count", 2}, {"feed_forward_length", 256}},
                   {{"rope.freq_base", 1e6}},
                   {"expert_feed_forward_length", "attention.key_length"}});
  cases.push_back({"tiny-gemma2",
                   "gemma2",
                   true,
                   cat({attention(256, 128),
                        {{"post_attention_norm.weight", {256}}},
                        ffn_norm,
                        dense,
                        {{"post_ffw_norm.weight", {256}}}}),
                   {{"attention.key_length", 64},
                    {"attention.value_length", 64},
                    {"attention.sliding_window", 8}},
                   {{"attn_logit_softcapping", 50.0}, {"final_logit_softcapping", 30.0}},
                   {"attention.sliding_window_pattern", "rope.freq_base_swa", "expert_count"}});
  cases.push_back({"tiny-gemma3",
                   "gemma3",
                   true,
                   cat({attention(512, 128),
                        {{"attn_q_norm.weight", {128}},
                         {"attn_k_norm.weight", {128}},
                         {"post_attention_norm.weight", {256}}},
                        ffn_norm,
                        dense,
                        {{"post_ffw_norm.weight", {256}}}}),
                   {{"attention.key_length", 128},
                    {"attention.value_length", 128},
                    {"attention.sliding_window", 8},
                    {"attention.sliding_window_pattern", 3},
                    {"block_count", 3}},
                   {{"rope.freq_base", 1e6}, {"rope.freq_base_swa", 1e4}},
                   {"attn_logit_softcapping", "final_logit_softcapping"}});
  cases.push_back({"tiny-phi3",
                   "phi3",
                   false,
                   {{"attn_norm.weight", {256}},
                    {"attn_qkv.weight", {256, 768}},
                    {"attn_output.weight", {256, 256}},
                    {"ffn_norm.weight", {256}},
                    {"ffn_up.weight", {256, 1024}},
                    {"ffn_down.weight", {512, 256}}},
                   {{"attention.sliding_window", 2047},
                    {"rope.dimension_count", 64},
                    {"feed_forward_length", 512}},
                   {},
                   {"attention.key_length", "attention.sliding_window_pattern"}});
  // Qwen3.5: DeltaNet layers (2 key heads and 4 value heads of 32: q, k 64 channels each, v
  // 128), then a gated attention layer (attn_q: 4 heads of 64 and as many gate rows); the FFN's
  // norm is post_attention_norm, written after attn_norm.
  const Block delta_net = {{"attn_norm.weight", {256}},
                           {"post_attention_norm.weight", {256}},
                           {"attn_qkv.weight", {256, 256}},
                           {"attn_gate.weight", {256, 128}},
                           {"ssm_conv1d.weight", {4, 256}},
                           {"ssm_dt.bias", {4}},
                           {"ssm_a", {4}},
                           {"ssm_beta.weight", {256, 4}},
                           {"ssm_alpha.weight", {256, 4}},
                           {"ssm_norm.weight", {32}},
                           {"ssm_out.weight", {128, 256}}};
  const Block gated_attention = {
      {"attn_norm.weight", {256}},   {"post_attention_norm.weight", {256}},
      {"attn_q.weight", {256, 512}}, {"attn_k.weight", {256, 128}},
      {"attn_v.weight", {256, 128}}, {"attn_output.weight", {256, 256}},
      {"attn_q_norm.weight", {64}},  {"attn_k_norm.weight", {64}}};
  const Block shared_expert = {{"ffn_gate_inp_shexp.weight", {256}},
                               {"ffn_gate_shexp.weight", {256, 256}},
                               {"ffn_up_shexp.weight", {256, 256}},
                               {"ffn_down_shexp.weight", {256, 256}}};
  const std::vector<std::pair<std::string, uint64_t>> ssm_keys = {
      {"full_attention_interval", 4}, {"ssm.conv_kernel", 4},
      {"ssm.state_size", 32},         {"ssm.group_count", 2},
      {"ssm.time_step_rank", 4},      {"ssm.inner_size", 128},
      {"attention.key_length", 64},   {"attention.value_length", 64},
      {"rope.dimension_count", 16},   {"block_count", 5},
      {"nextn_predict_layers", 1}};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> sections = {
      {"rope.dimension_sections", {3, 3, 2, 0}}};
  FamilyCase q35{"tiny-qwen35",
                 "qwen35",
                 true,
                 cat({delta_net, dense}),
                 ssm_keys,
                 {{"rope.freq_base", 1e7}},
                 {"expert_count", "expert_shared_feed_forward_length", "attention.sliding_window"}};
  q35.uints.push_back({"feed_forward_length", 512});
  q35.interval = 4;
  q35.attention_block = cat({gated_attention, dense});
  q35.nextn = true;
  q35.int_arrays = sections;
  cases.push_back(q35);
  const Block moe_ffn = {{"ffn_gate_inp.weight", {256, 8}},
                         {"ffn_gate_exps.weight", {256, 256, 8}},
                         {"ffn_up_exps.weight", {256, 256, 8}},
                         {"ffn_down_exps.weight", {256, 256, 8}}};
  FamilyCase q35moe{"tiny-qwen35moe",
                    "qwen35moe",
                    false,
                    cat({delta_net, moe_ffn, shared_expert}),
                    ssm_keys,
                    {{"rope.freq_base", 1e7}},
                    {}};
  for (const auto& kv :
       std::vector<std::pair<std::string, uint64_t>>{{"expert_count", 8},
                                                     {"expert_used_count", 2},
                                                     {"expert_feed_forward_length", 256},
                                                     {"expert_shared_feed_forward_length", 256}})
    q35moe.uints.push_back(kv);
  q35moe.interval = 4;
  q35moe.attention_block = cat({gated_attention, moe_ffn, shared_expert});
  q35moe.nextn = true;
  q35moe.int_arrays = sections;
  cases.push_back(q35moe);
  return cases;
}

// Each newer family's tiny shape written in Q4_0 with the builtin vocabulary (no test data
// needed): the family's keys, every tensor's name and shape in the converters' order, routers
// F32, expert tensors 3-D and quantized, every norm 1.
TEST(Synth, TinyShapesOfTheNewFamiliesHaveTheirKeysAndTensors) {
  const std::string vocab = vela::test::unique_temp_path("vela_synth_builtin_vocab.gguf");
  ASSERT_TRUE(write_builtin_vocab(vocab).ok());
  for (const FamilyCase& c : family_cases()) {
    SCOPED_TRACE(c.shape);
    SynthOptions o;
    o.output_path = vela::test::unique_temp_path("vela_synth_" + c.shape + ".gguf");
    o.shape = *find_shape(c.shape);
    o.target = *parse_quant_target("Q4_0");
    o.vocab_path = vocab;
    o.pad_vocab = true;  // the builtin vocabulary's 354 tokens padded to the shapes' 512
    o.n_threads = 2;
    auto summary = synthesize_model(o);
    ASSERT_TRUE(summary.ok()) << summary.message();
    EXPECT_EQ(std::filesystem::file_size(o.output_path), summary->file_bytes);
    auto g = GgufFile::open(o.output_path);
    ASSERT_TRUE(g.ok()) << g.message();

    EXPECT_EQ(g->get_string("general.architecture")->value_or(""), c.arch);
    EXPECT_EQ(g->get_uint(c.arch + ".vocab_size")->value_or(0), 512u);
    for (const auto& [key, value] : c.uints)
      EXPECT_EQ(g->get_uint(c.arch + "." + key)->value_or(0), value) << key;
    for (const auto& [key, value] : c.floats) {
      auto v = g->get_float(c.arch + "." + key);
      ASSERT_TRUE(v.ok() && v->has_value()) << key;
      EXPECT_FLOAT_EQ(float(**v), float(value)) << key;
    }
    for (const std::string& key : c.absent) EXPECT_EQ(g->find(c.arch + "." + key), nullptr) << key;
    for (const auto& [key, values] : c.int_arrays) {
      auto array = g->get_array(c.arch + "." + key);
      ASSERT_TRUE(array.ok() && array->has_value()) << key;
      EXPECT_EQ((***array).elem_type, GgufValueType::INT32) << key;
      EXPECT_EQ(*gguf_array_ints(***array), values) << key;
    }

    std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
        {"token_embd.weight", {256, 512}}, {"output_norm.weight", {256}}};
    if (!c.tied) want.push_back({"output.weight", {256, 512}});
    for (int32_t i = 0; i < o.shape.n_layer; ++i) {
      const bool attends = c.interval > 0 && (i + 1) % c.interval == 0;
      for (const auto& [name, ne] : attends ? c.attention_block : c.block)
        want.push_back({"blk." + std::to_string(i) + "." + name, ne});
    }
    if (c.nextn) {
      const std::string p = "blk." + std::to_string(o.shape.n_layer) + ".";
      for (const auto& [name, ne] : c.attention_block) want.push_back({p + name, ne});
      want.push_back({p + "nextn.eh_proj.weight", {512, 256}});
      for (const char* norm : {"enorm", "hnorm", "shared_head_norm"})
        want.push_back({p + "nextn." + norm + ".weight", {256}});
    }
    ASSERT_EQ(g->tensors().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const GgufTensorInfo& t = g->tensors()[i];
      const std::string name(t.name);
      EXPECT_EQ(name, want[i].first);
      EXPECT_EQ(std::vector<int64_t>(t.ne, t.ne + t.n_dims), want[i].second) << name;
      const bool router = name.ends_with("ffn_gate_inp.weight");
      const bool experts = name.ends_with("_exps.weight");
      if (t.n_dims == 1 || router) {
        EXPECT_EQ(t.ggml_type(), GgmlType::F32) << name;
      }
      if (experts) {
        EXPECT_EQ(t.n_dims, 3u) << name;
        EXPECT_EQ(t.ggml_type(), GgmlType::Q4_0) << name;
      }
      if (name.ends_with("ssm_conv1d.weight")) {
        EXPECT_EQ(t.ggml_type(), GgmlType::F32) << name;
      }
      const auto* v = reinterpret_cast<const float*>(t.data);
      if (t.n_dims == 1 && name.ends_with("norm.weight")) {
        for (int64_t k = 0; k < t.ne[0]; ++k) ASSERT_EQ(v[k], 1.0f) << name;
      } else if (name.ends_with("ssm_a")) {  // -exp(A_log): a decaying state
        for (int64_t k = 0; k < t.ne[0]; ++k) ASSERT_TRUE(v[k] <= -1 && v[k] > -16) << v[k];
      } else if (t.n_dims == 1) {  // biases and the shared expert's gate: small, not all zero
        float largest = 0;
        for (int64_t k = 0; k < t.ne[0]; ++k) largest = std::max(largest, std::fabs(v[k]));
        EXPECT_GT(largest, 0.0f) << name;
        EXPECT_LT(largest, 0.1f) << name;
      }
    }
    std::filesystem::remove(o.output_path);
  }
  std::filesystem::remove(vocab);
}

TEST(Synth, ErrorsNameTheProblem) {
  VELA_REQUIRE_SHARED();
  SynthOptions o;
  o.output_path = vela::test::unique_temp_path("vela_synth_error.gguf");
  o.shape = *find_shape("tiny");
  o.target = *parse_quant_target("Q4_0");
  o.vocab_path = "/nonexistent/vocab.gguf";
  auto r = synthesize_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/nonexistent/vocab.gguf"), std::string::npos) << r.message();
  EXPECT_FALSE(std::filesystem::exists(o.output_path));
}

}  // namespace
}  // namespace vela

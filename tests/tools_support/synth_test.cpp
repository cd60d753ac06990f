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
#include "model/llama_forward.h"
#include "model/model.h"
#include "quant/dequantize.h"
#include "support/shared_data.h"
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
      EXPECT_FLOAT_EQ(c.rope_freq_base, s.rope_freq_base);
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
  LlamaForward fwd(model, ForwardOptions{64, 64, 64});
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
    float scale = 0;
    for (float v : b) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-4f * (1 + scale)) << "logit " << i;
    std::filesystem::remove(path);
  }
}

TEST(Synth, GeneratesWithTheLlmApi) {
  VELA_REQUIRE_SHARED();
  for (const std::string shape : {"tiny", "tiny-qwen2"}) {
    LLMConfig config;
    config.model_path = synth(shape, "Q4_K_M", "models/tiny-llama-gqa.gguf");  // Llama-2 vocabulary
    auto llm = LLM::load(config);
    ASSERT_TRUE(llm.ok()) << llm.message();
    EXPECT_EQ((*llm)->info().n_vocab, 32000);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    p.ignore_eos = true;
    auto out = (*llm)->generate({"Once upon a time"}, p);
    ASSERT_TRUE(out.ok()) << out.message();
    EXPECT_EQ(out->front().output.token_ids.size(), 8u);
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

// quantize_model() with an importance matrix: each expert of a stacked tensor is quantized with
// its own importance (byte for byte as quantize_row_weighted() makes it), the file records the
// matrix as the common quantizer does; refusals come before anything is written: a tensor that
// needs an importance matrix without one (saying how to make one), an entry missing for such a
// tensor, an entry of another width, and types without a quantizer in this build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "quant/quantize.h"
#include "support/shared_data.h"
#include "tools_support/quant_mixes.h"
#include "tools_support/quantize_model.h"

namespace vela {
namespace {

QuantizeOptions options(const std::string& input, const std::string& mix, const std::string& tag) {
  QuantizeOptions o;
  o.input_path = test::shared_path("models/" + input).string();
  o.output_path = test::unique_temp_path("vela_qimatrix_" + mix + tag + ".gguf");
  o.target = *parse_quant_target(mix);
  o.n_threads = 2;
  return o;
}

ImportanceMatrix shared_imatrix() {
  auto m = read_imatrix(test::shared_path("imatrix/tiny-llama-256.imatrix.gguf").string());
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : ImportanceMatrix{};
}

TEST(QuantizeImatrix, EachExpertGetsItsOwnImportance) {
  VELA_REQUIRE_SHARED();
  if (!can_quantize_weighted(GgmlType::Q2_K)) GTEST_SKIP() << "no Q2_K quantizer in this build";
  const std::string name = "blk.1.ffn_gate_exps.weight";  // [256, 384, 4 experts]
  ImportanceMatrix m;
  m.datasets = {"made-up.txt"};
  m.chunk_count = 3;
  m.chunk_size = 16;
  ImatrixEntry e;
  e.n_cols = 256;
  e.n_mat = 4;
  for (int32_t x = 0; x < 4; ++x)  // expert x cares for columns c with c % 4 == x
    for (int64_t c = 0; c < 256; ++c) e.sum2.push_back(c % 4 == x ? 50.0f : 0.01f);
  e.counts = {2, 2, 2, 2};
  e.update_importance();
  m.entries[name] = e;

  QuantizeOptions o = options("tiny-mixtral-F32.gguf", "Q2_K", "_experts");
  o.imatrix = &m;
  o.imatrix_path = "made-up.imatrix.gguf";
  auto summary = quantize_model(o);
  ASSERT_TRUE(summary.ok()) << summary.message();
  // Every other block tensor went without (the matrix has one entry).
  EXPECT_NE(std::find(summary->without_importance.begin(), summary->without_importance.end(),
                      "blk.0.attn_q.weight"),
            summary->without_importance.end());

  auto in = GgufFile::open(o.input_path);
  auto out = GgufFile::open(o.output_path);
  ASSERT_TRUE(in.ok() && out.ok());
  EXPECT_EQ(out->get_string("quantize.imatrix.file")->value_or(""), "made-up.imatrix.gguf");
  EXPECT_EQ(out->get_string("quantize.imatrix.dataset")->value_or(""), "made-up.txt");
  EXPECT_EQ(out->get_uint("quantize.imatrix.entries_count")->value_or(0), 1u);
  EXPECT_EQ(out->get_uint("quantize.imatrix.chunks_count")->value_or(0), 3u);

  const GgufTensorInfo* src = in->find_tensor(name);
  const GgufTensorInfo* q = out->find_tensor(name);
  ASSERT_TRUE(src && q);
  ASSERT_EQ(q->ggml_type(), GgmlType::Q2_K);
  const int64_t n = src->ne[0], rows = src->ne[1];
  const size_t row_size = size_t(row_bytes(*ggml_type_info(q->type), n));
  std::vector<uint8_t> mine(row_size), other(row_size);
  int differs_with_other_importance = 0;
  for (int64_t x = 0; x < src->ne[2]; ++x) {
    for (int64_t r = 0; r < rows; r += 37) {
      const float* row = reinterpret_cast<const float*>(src->data) + (x * rows + r) * n;
      quantize_row_weighted(GgmlType::Q2_K, row, mine.data(), n, e.importance.data() + x * n);
      ASSERT_EQ(std::memcmp(q->data + (x * rows + r) * row_size, mine.data(), row_size), 0)
          << "expert " << x << " row " << r;
      const int64_t y = (x + 1) % 4;
      quantize_row_weighted(GgmlType::Q2_K, row, other.data(), n, e.importance.data() + y * n);
      differs_with_other_importance += std::memcmp(mine.data(), other.data(), row_size) != 0;
    }
  }
  EXPECT_GT(differs_with_other_importance, 0);  // the importance changes the rounding
  std::filesystem::remove(o.output_path);
}

TEST(QuantizeImatrix, RefusesWithoutAnImportanceMatrix) {
  VELA_REQUIRE_SHARED();
  // Q2_K_S: its Q2_K tensors need one (IQ mixes too, once their quantizers exist).
  QuantizeOptions o = options("tiny-llama-256-F32.gguf", "Q2_K_S", "_none");
  auto r = quantize_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("needs an importance matrix"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("vela imatrix"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("--imatrix"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("blk.0."), std::string::npos) << r.message();
  EXPECT_FALSE(std::filesystem::exists(o.output_path));

  // With the shared matrix it goes through and records it.
  ImportanceMatrix m = shared_imatrix();
  o.imatrix = &m;
  o.imatrix_path = "imatrix/tiny-llama-256.imatrix.gguf";
  auto ok = quantize_model(o);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_TRUE(ok->without_importance.empty());
  auto g = GgufFile::open(o.output_path);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->get_uint("general.file_type")->value_or(0), 21u);
  EXPECT_EQ(g->get_uint("quantize.imatrix.entries_count")->value_or(0), 28u);
  EXPECT_EQ(g->get_uint("quantize.imatrix.chunks_count")->value_or(0), 9u);
  EXPECT_EQ(g->find_tensor("blk.1.attn_v.weight")->ggml_type(), GgmlType::Q4_K);  // gqa 4
  EXPECT_EQ(g->find_tensor("blk.1.ffn_down.weight")->ggml_type(), GgmlType::Q2_K);
  std::filesystem::remove(o.output_path);
}

TEST(QuantizeImatrix, MissingOrMismatchedEntries) {
  VELA_REQUIRE_SHARED();
  ImportanceMatrix m = shared_imatrix();
  m.entries.erase("blk.2.ffn_up.weight");
  QuantizeOptions o = options("tiny-llama-256-F32.gguf", "Q2_K_S", "_missing");
  o.imatrix = &m;
  o.imatrix_path = "trimmed.imatrix.gguf";
  auto r = quantize_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("no entry for tensor 'blk.2.ffn_up.weight'"), std::string::npos)
      << r.message();
  EXPECT_FALSE(std::filesystem::exists(o.output_path));
  // A mix that needs none goes on without the entry and says so.
  o.target = *parse_quant_target("Q4_K_M");
  auto ok = quantize_model(o);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->without_importance, std::vector<std::string>{"blk.2.ffn_up.weight"});
  std::filesystem::remove(o.output_path);

  // An entry of another width (another model's) is an error whatever the mix.
  ImportanceMatrix w = shared_imatrix();
  ImatrixEntry& e = w.entries.at("blk.1.attn_q.weight");
  e.n_cols = 128;
  e.sum2.assign(128, 1.0f);
  e.update_importance();
  o.imatrix = &w;
  auto bad = quantize_model(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'blk.1.attn_q.weight' has 128 values per row"), std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("rows have 256"), std::string::npos) << bad.message();
  EXPECT_FALSE(std::filesystem::exists(o.output_path));
}

// Mixes whose types this build cannot make yet are refused up front, naming the types; the
// others are made (with the shared importance matrix where they need one).
TEST(QuantizeImatrix, EveryMixIsMadeOrClearlyRefused) {
  VELA_REQUIRE_SHARED();
  ImportanceMatrix m = shared_imatrix();
  auto f32 = GgufFile::open(test::shared_path("models/tiny-llama-256-F32.gguf").string());
  ASSERT_TRUE(f32.ok());
  MixModel model = mix_model_of(*f32);
  model.has_imatrix = true;
  std::vector<MixTensor> tensors;
  for (const GgufTensorInfo& t : f32->tensors()) {
    MixTensor x;
    x.name = t.name;
    for (int i = 0; i < 4; ++i) x.ne[i] = t.ne[i];
    x.n_dims = int32_t(t.n_dims);
    tensors.push_back(x);
  }
  for (const QuantMix& mix : quant_mixes()) {
    auto types = plan_tensor_types(*parse_quant_target(mix.name), model, tensors, false);
    ASSERT_TRUE(types.ok()) << mix.name;
    std::string missing;
    for (GgmlType t : *types)
      if (!can_quantize_weighted(t) &&
          missing.find(ggml_type_name(uint32_t(t))) == std::string::npos)
        missing += ggml_type_name(uint32_t(t)) + " ";
    QuantizeOptions o = options("tiny-llama-256-F32.gguf", mix.name, "_every");
    o.imatrix = &m;
    o.imatrix_path = "shared.imatrix.gguf";
    if (missing.empty()) continue;  // made in the CLI test, against the shared files
    auto r = quantize_model(o);
    ASSERT_FALSE(r.ok()) << mix.name;
    EXPECT_NE(r.message().find("cannot make yet"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(missing.substr(0, missing.find(' '))), std::string::npos)
        << r.message();
    EXPECT_FALSE(std::filesystem::exists(o.output_path)) << mix.name;
  }
}

}  // namespace
}  // namespace vela

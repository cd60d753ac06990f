// Loading repacks the matrices the int8 kernels want interleaved (model_weights.h): every row of
// every repacked matrix unpacks to the file's bytes, the rest stay views of the file, and loading
// from an in-memory image leaves that image intact (its pages are never dropped).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "kernels/packed/packed_layout.h"
#include "model/model.h"
#include "support/shared_data.h"

namespace vela {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Each layer matrix with the name of its tensor.
std::vector<std::pair<std::string, const WeightMatrix*>> layer_matrices(const ModelWeights& w) {
  std::vector<std::pair<std::string, const WeightMatrix*>> out;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    out.push_back({p + "attn_q.weight", &l.wq});
    out.push_back({p + "attn_k.weight", &l.wk});
    out.push_back({p + "attn_v.weight", &l.wv});
    out.push_back({p + "attn_output.weight", &l.wo});
    out.push_back({p + "ffn_gate.weight", &l.w_gate});
    out.push_back({p + "ffn_up.weight", &l.w_up});
    out.push_back({p + "ffn_down.weight", &l.w_down});
  }
  return out;
}

class ModelWeightsRepack : public testing::TestWithParam<std::string> {};

TEST_P(ModelWeightsRepack, RepackedRowsEqualTheFileAndAnInMemoryImageStaysIntact) {
  VELA_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/" + GetParam()).string();
  const std::vector<uint8_t> bytes = read_file(path);
  ASSERT_FALSE(bytes.empty()) << path;
  auto image = GgufFile::from_bytes(bytes);
  ASSERT_TRUE(image) << image.message();
  auto gguf = std::make_shared<const GgufFile>(std::move(*image));
  auto model = Model::from_gguf(gguf);
  ASSERT_TRUE(model) << model.message();
  const ModelWeights& w = (*model)->weights();

  int repacked = 0;
  for (const auto& [name, m] : layer_matrices(w)) {
    const GgufTensorInfo* t = gguf->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    const auto* file_rows = static_cast<const uint8_t*>(t->data);
    // The image's own bytes are untouched by loading: still those of the file.
    const size_t file_pos = size_t(gguf->data_offset() + t->offset);
    ASSERT_EQ(std::memcmp(file_rows, bytes.data() + file_pos, size_t(m->n_rows * m->row_bytes)), 0)
        << name << " changed in the in-memory image";
    if (m->layout == WeightLayout::kRowMajor) {
      EXPECT_EQ(m->data, t->data) << name << " should stay a view of the file";
      continue;
    }
    ++repacked;
    EXPECT_TRUE(prefers_interleaved16(m->type, m->n_rows, m->n_cols));
    std::vector<uint8_t> row(size_t(m->row_bytes));
    for (int64_t r = 0; r < m->n_rows; ++r) {
      unpack_interleaved16_row(m->type, m->data, m->n_cols, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), file_rows + r * m->row_bytes, row.size()), 0)
          << name << " row " << r;
    }
  }
  const char* env = std::getenv("VELA_REPACK");
  const bool packs = prefers_interleaved16(w.layers[0].wq.type, w.layers[0].wq.n_rows,
                                           w.layers[0].wq.n_cols) &&
                     !(env != nullptr && std::string(env) == "0");
  EXPECT_EQ(repacked > 0, packs) << "repacking should follow the selected kernels and VELA_REPACK";
}

INSTANTIATE_TEST_SUITE_P(Models, ModelWeightsRepack,
                         testing::Values("tiny-llama-256-Q8_0.gguf", "tiny-llama-256-Q4_0.gguf",
                                         "tiny-llama-256-Q4_K_M.gguf", "tiny-llama-256-Q6_K.gguf",
                                         "tiny-llama-256-F16.gguf", "tiny-llama-256-IQ4_NL.gguf"),
                         [](const auto& info) {
                           std::string s = info.param.substr(15, info.param.size() - 20);
                           for (char& c : s)
                             if (c == '-' || c == '.') c = '_';
                           return s;
                         });

// A mixture's stacked experts are repacked as its dense matrices are (gpt-oss: MXFP4 experts):
// every row of every repacked expert unpacks to its slice of the file's stacked tensor.
TEST(ModelWeightsRepackExperts, RepackedExpertRowsEqualTheFile) {
  VELA_REQUIRE_SHARED();
  const std::string path = test::shared_path("models/tiny-openai-moe-MXFP4_MOE.gguf").string();
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf) << gguf.message();
  auto file = std::make_shared<const GgufFile>(std::move(*gguf));
  auto model = Model::from_gguf(file);
  ASSERT_TRUE(model) << model.message();
  const ModelWeights& w = (*model)->weights();
  int repacked = 0, mxfp4 = 0;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const auto& experts = w.layers[i].experts;
    for (size_t e = 0; e < experts.size(); ++e) {
      const std::pair<const char*, const WeightMatrix*> parts[] = {
          {"gate", &experts[e].gate}, {"up", &experts[e].up}, {"down", &experts[e].down}};
      for (const auto& [part, m] : parts) {
        const std::string name = "blk." + std::to_string(i) + ".ffn_" + part + "_exps.weight";
        const GgufTensorInfo* t = file->find_tensor(name);
        ASSERT_NE(t, nullptr) << name;
        mxfp4 += m->type == GgmlType::MXFP4;
        if (m->layout != WeightLayout::kInterleaved16) continue;
        ++repacked;
        const uint8_t* file_rows = t->data + e * size_t(m->n_rows * m->row_bytes);
        std::vector<uint8_t> row(size_t(m->row_bytes));
        for (int64_t r = 0; r < m->n_rows; ++r) {
          unpack_interleaved16_row(m->type, m->data, m->n_cols, r, row.data());
          ASSERT_EQ(std::memcmp(row.data(), file_rows + r * m->row_bytes, row.size()), 0)
              << name << " expert " << e << " row " << r;
        }
      }
    }
  }
  ASSERT_GT(mxfp4, 0) << "the file's experts should be MXFP4";
  const WeightMatrix& gate = w.layers[0].experts[0].gate;
  const char* env = std::getenv("VELA_REPACK");
  const bool packs = prefers_interleaved16(gate.type, gate.n_rows, gate.n_cols) &&
                     !(env != nullptr && std::string(env) == "0");
  EXPECT_EQ(repacked > 0, packs) << "repacking should follow the selected kernels and VELA_REPACK";
}

}  // namespace
}  // namespace vela

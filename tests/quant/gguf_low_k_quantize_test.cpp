// Real GGUF files: for every Q2_K, Q3_K, TQ1_0 and TQ2_0 tensor of the tiny-llama-256-*.gguf
// files (made from tiny-llama-256-F32.gguf by a widely used quantizer), our quantizer, run on the
// F32 file's tensor, must come within 1.10 x that file's relative RMS error on the tensor. Files
// made with the shared importance matrix (those whose metadata names it: the IQ3_XXS, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ1_S and IQ1_M files, per shared/README.md) are matched with that importance
// for every tensor it covers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"
#include "quant_test_rows.h"
#include "support/shared_data.h"

namespace vela {
namespace {

using test::relative_rms_error;

bool is_low_k(GgmlType type) {
  return type == GgmlType::Q2_K || type == GgmlType::Q3_K || type == GgmlType::TQ1_0 ||
         type == GgmlType::TQ2_0;
}

// The importance matrix's entry for a tensor: in_sum2 / counts per input column, or empty where
// the matrix has none (the token embedding: it is looked up, not multiplied).
std::vector<float> importance_of(const GgufFile& imatrix, const std::string& name, int64_t cols) {
  const GgufTensorInfo* sum2 = imatrix.find_tensor(name + ".in_sum2");
  const GgufTensorInfo* counts = imatrix.find_tensor(name + ".counts");
  if (sum2 == nullptr || counts == nullptr) return {};
  EXPECT_EQ(sum2->ggml_type(), GgmlType::F32) << name;
  EXPECT_EQ(counts->ggml_type(), GgmlType::F32) << name;
  EXPECT_EQ(sum2->n_elements(), cols) << name;
  const float count = reinterpret_cast<const float*>(counts->data)[0];
  EXPECT_GT(count, 0.0f) << name;
  std::vector<float> imp(static_cast<size_t>(cols));
  const auto* s = reinterpret_cast<const float*>(sum2->data);
  for (int64_t i = 0; i < cols; ++i) imp[size_t(i)] = s[i] / count;
  return imp;
}

struct Worst {
  int tensors = 0;
  double ratio = 0;
  std::string where;
};

TEST(GgufLowKQuantize, MatchesReferenceQuantizerError) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path dir = test::shared_path("models");
  auto f32 = GgufFile::open((dir / "tiny-llama-256-F32.gguf").string());
  ASSERT_TRUE(f32.ok()) << f32.message();
  auto imatrix = GgufFile::open(test::shared_path("imatrix/tiny-llama-256.imatrix.gguf").string());
  ASSERT_TRUE(imatrix.ok()) << imatrix.message();

  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tiny-llama-256-", 0) == 0 && entry.path().extension() == ".gguf") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());

  std::map<std::string, Worst> worst;  // by type, "+imatrix" where the importance was used
  for (const auto& path : files) {
    auto quant = GgufFile::open(path.string());
    ASSERT_TRUE(quant.ok()) << path << ": " << quant.message();
    const bool made_with_imatrix = quant->find("quantize.imatrix.file") != nullptr;
    for (const GgufTensorInfo& qt : quant->tensors()) {
      const GgmlType type = qt.ggml_type();
      if (!is_low_k(type)) continue;
      const std::string name(qt.name);
      const GgufTensorInfo* ref = f32->find_tensor(qt.name);
      ASSERT_NE(ref, nullptr) << name;
      ASSERT_EQ(ref->ggml_type(), GgmlType::F32) << name;
      ASSERT_EQ(ref->n_elements(), qt.n_elements()) << name;
      const int64_t n = qt.n_elements(), cols = qt.ne[0], rows = n / cols;
      const auto* x = reinterpret_cast<const float*>(ref->data);

      std::vector<float> theirs(static_cast<size_t>(n)), ours(static_cast<size_t>(n));
      dequantize_row(type, qt.data, theirs.data(), n);
      const std::vector<float> imp =
          made_with_imatrix ? importance_of(*imatrix, name, cols) : std::vector<float>();
      const auto info = ggml_type_info(uint32_t(type));
      std::vector<uint8_t> row(size_t(cols / info->block_size * info->type_size));
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row_weighted(type, x + r * cols, row.data(), cols,
                              imp.empty() ? nullptr : imp.data());
        dequantize_row(type, row.data(), ours.data() + r * cols, cols);
      }
      const double their_err = relative_rms_error(x, theirs.data(), n);
      const double our_err = relative_rms_error(x, ours.data(), n);
      EXPECT_LE(our_err, 1.10 * their_err)
          << path.filename() << " " << name << (imp.empty() ? "" : " (importance)");
      Worst& w = worst[ggml_type_name(uint32_t(type)) + (imp.empty() ? "" : "+imatrix")];
      ++w.tensors;
      if (our_err / their_err > w.ratio) {
        w.ratio = our_err / their_err;
        w.where = path.filename().string() + " " + name;
      }
    }
  }
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    EXPECT_GT(worst[ggml_type_name(uint32_t(type))].tensors, 0)
        << "no " << ggml_type_name(uint32_t(type)) << " tensor in any file";
  }
  for (const auto& [key, w] : worst) {
    std::printf("%-14s %3d tensors, worst ours / reference relative RMS %.3f (%s)\n", key.c_str(),
                w.tensors, w.ratio, w.where.c_str());
  }
}

// On the real importance matrix (layer 0's tensors, all of which it covers): quantizing with the
// importance lowers the importance-weighted error sum imp (x - x')^2 against quantizing without
// it. This matrix is fairly flat (per-column importance within 0.24 .. 2.6 of its mean), so the
// gain is small: for Q2_K and Q3_K, whose 16-element sub-blocks can follow it, every tensor must
// gain; the ternary types have one scale per 256 weights and little to trade, so only their
// total over the layer must (a single tensor may come out level, within 1e-3).
TEST(GgufLowKQuantize, RealImportanceLowersWeightedError) {
  VELA_REQUIRE_SHARED();
  auto f32 = GgufFile::open(test::shared_path("models/tiny-llama-256-F32.gguf").string());
  ASSERT_TRUE(f32.ok()) << f32.message();
  auto imatrix = GgufFile::open(test::shared_path("imatrix/tiny-llama-256.imatrix.gguf").string());
  ASSERT_TRUE(imatrix.ok()) << imatrix.message();
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    const bool ternary = type == GgmlType::TQ1_0 || type == GgmlType::TQ2_0;
    int tensors = 0;
    double worst = 0, total_with = 0, total_without = 0;
    for (const GgufTensorInfo& t : f32->tensors()) {
      const std::string name(t.name);
      if (name.rfind("blk.0.", 0) != 0 || t.n_dims != 2) continue;
      const int64_t n = t.n_elements(), cols = t.ne[0], rows = n / cols;
      const std::vector<float> imp = importance_of(*imatrix, name, cols);
      ASSERT_FALSE(imp.empty()) << name;
      const auto* x = reinterpret_cast<const float*>(t.data);
      const auto info = ggml_type_info(uint32_t(type));
      std::vector<uint8_t> q(size_t(cols / info->block_size * info->type_size));
      std::vector<float> y(static_cast<size_t>(cols));
      double with = 0, without = 0;
      for (int64_t r = 0; r < rows; ++r) {
        for (const bool use : {true, false}) {
          quantize_row_weighted(type, x + r * cols, q.data(), cols, use ? imp.data() : nullptr);
          dequantize_row(type, q.data(), y.data(), cols);
          double e = 0;
          for (int64_t i = 0; i < cols; ++i) {
            const double diff = double(x[r * cols + i]) - double(y[size_t(i)]);
            e += double(imp[size_t(i)]) * diff * diff;
          }
          (use ? with : without) += e;
        }
      }
      EXPECT_LT(with, (ternary ? 1.001 : 1.0) * without)
          << ggml_type_name(uint32_t(type)) << " " << name;
      worst = std::max(worst, with / without);
      total_with += with;
      total_without += without;
      ++tensors;
    }
    EXPECT_EQ(tensors, 7);
    EXPECT_LT(total_with, total_without) << ggml_type_name(uint32_t(type));
    std::printf(
        "%-6s importance-weighted error with / without the importance: layer %.4f, "
        "worst tensor %.4f\n",
        ggml_type_name(uint32_t(type)).c_str(), total_with / total_without, worst);
  }
}

}  // namespace
}  // namespace vela

// Real GGUF files: every IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S tensor of the
// tiny-llama-256-*.gguf files (made from the F32 file by a widely used quantizer) is re-made from
// the F32 file's tensor by our quantizer (quant/quantize_iq23.h), with the importance matrix where
// the shared file was made with one, and ours must decode at least about as close to the F32
// weights: relative RMS error <= 1.10 x theirs on every tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant_test_rows.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr double kMaxRatio = 1.10;

const GgmlType kTypes[] = {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                           GgmlType::IQ3_S};

using test::importance_of;
using test::relative_rms_error;

TEST(GgufIq23Quantize, MatchesSharedFiles) {
  VELA_REQUIRE_SHARED();
  const auto models = test::shared_path("models");
  auto f32 = GgufFile::open((models / "tiny-llama-256-F32.gguf").string());
  ASSERT_TRUE(f32.ok()) << (f32.ok() ? "" : f32.message());
  auto imatrix = GgufFile::open(test::shared_path("imatrix/tiny-llama-256.imatrix.gguf").string());
  ASSERT_TRUE(imatrix.ok()) << (imatrix.ok() ? "" : imatrix.message());

  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(models)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("tiny-llama-256-") && name.ends_with(".gguf")) files.push_back(entry);
  }
  std::sort(files.begin(), files.end());

  // Per ../shared/README.md, these file types were made with the importance matrix (the files
  // also say so in their metadata, which is checked against this list).
  const std::set<std::string> made_with_imatrix = {"IQ3_XXS", "IQ2_XXS", "IQ2_XS",
                                                   "IQ2_S",   "IQ1_S",   "IQ1_M"};
  std::map<GgmlType, int> found;
  std::map<GgmlType, double> worst_ratio, sum_ratio;
  std::map<GgmlType, std::string> worst_tensor;
  for (const auto& path : files) {
    auto quant = GgufFile::open(path.string());
    if (!quant.ok()) {
      // Files holding types the loader does not know are not this test's concern.
      std::printf("skipped %s: %s\n", path.filename().c_str(), quant.message().c_str());
      continue;
    }
    const std::string file_type =
        path.stem().string().substr(std::string("tiny-llama-256-").size());
    const bool with_imatrix = made_with_imatrix.count(file_type) > 0;
    EXPECT_EQ(with_imatrix, quant->find("quantize.imatrix.file") != nullptr) << path.filename();
    for (const GgufTensorInfo& qt : quant->tensors()) {
      const GgmlType type = qt.ggml_type();
      if (std::find(std::begin(kTypes), std::end(kTypes), type) == std::end(kTypes)) continue;
      const std::string name(qt.name);
      const GgufTensorInfo* ref = f32->find_tensor(qt.name);
      ASSERT_NE(ref, nullptr) << name;
      ASSERT_EQ(ref->ggml_type(), GgmlType::F32) << name;
      ASSERT_EQ(ref->n_elements(), qt.n_elements()) << name;
      const int64_t n = qt.n_elements(), cols = qt.ne[0];
      const auto* x = reinterpret_cast<const float*>(ref->data);
      std::vector<float> imp;
      if (with_imatrix) {
        imp = importance_of(*imatrix, name);
        if (!imp.empty()) {
          ASSERT_EQ(int64_t(imp.size()), cols) << name << ": importance entry";
        }
      }

      const auto info = ggml_type_info(qt.type);
      ASSERT_TRUE(info.has_value());
      std::vector<uint8_t> ours(size_t(n / info->block_size * info->type_size));
      const size_t row_bytes = size_t(cols / info->block_size * info->type_size);
      for (int64_t r = 0; r < n / cols; ++r) {
        quantize_row_weighted(type, x + r * cols, ours.data() + r * row_bytes, cols,
                              imp.empty() ? nullptr : imp.data());
      }
      std::vector<float> y_ours(static_cast<size_t>(n)), y_theirs(static_cast<size_t>(n));
      dequantize_row(type, ours.data(), y_ours.data(), n);
      dequantize_row(type, qt.data, y_theirs.data(), n);
      const double e_ours = relative_rms_error(x, y_ours.data(), n);
      const double e_theirs = relative_rms_error(x, y_theirs.data(), n);
      const double ratio = e_ours / e_theirs;
      std::printf("%-24s %-26s %-7s %s ours %.4f theirs %.4f ratio %.4f\n", path.filename().c_str(),
                  name.c_str(), ggml_type_name(qt.type).c_str(), imp.empty() ? "      " : "imatrix",
                  e_ours, e_theirs, ratio);
      EXPECT_LE(ratio, kMaxRatio) << path.filename() << " " << name;
      if (ratio > worst_ratio[type]) {
        worst_ratio[type] = ratio;
        worst_tensor[type] = path.filename().string() + " " + name;
      }
      sum_ratio[type] += ratio;
      ++found[type];
    }
  }
  for (GgmlType type : kTypes) {
    EXPECT_GT(found[type], 0) << "no " << ggml_type_name(uint32_t(type)) << " tensor in any file";
    if (found[type] == 0) continue;
    std::printf("%-7s %3d tensors: relative RMS error ours / theirs worst %.4f (%s) mean %.4f\n",
                ggml_type_name(uint32_t(type)).c_str(), found[type], worst_ratio[type],
                worst_tensor[type].c_str(), sum_ratio[type] / found[type]);
  }
}

}  // namespace
}  // namespace vela

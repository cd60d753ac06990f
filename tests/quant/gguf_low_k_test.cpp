// Real GGUF files: every Q2_K, Q3_K, TQ1_0 and TQ2_0 tensor in any tiny-llama-256-*.gguf (the
// same random-weight Llama quantized by a widely used quantizer; a file type mixes types) decodes
// to the F32 file's tensor within a per-type relative RMS error, and each type occurs at least
// once across the files.
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
#include "support/shared_data.h"

namespace vela {
namespace {

// ||x - y|| / ||x|| over n elements. x: [n] f32 reference; y: [n] f32 decoded.
double relative_rms_error(const float* x, const float* y, int64_t n) {
  double err2 = 0, sig2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    err2 += double(x[i] - y[i]) * double(x[i] - y[i]);
    sig2 += double(x[i]) * double(x[i]);
  }
  return std::sqrt(err2 / sig2);
}

// Per-type bound on the relative RMS error of a tensor, a little above the worst measured over
// all files: Q2_K 0.2976 (21 tensors), Q3_K 0.1518 (54), TQ1_0 and TQ2_0 0.8187 (28 each). The
// ternary quantizer maps each weight to round(x / amax) * amax, which on these Gaussian weights
// leaves about 0.81 of the signal as error by itself (a misplaced element would push it past 1).
double rms_bound(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return 0.32;
    case GgmlType::Q3_K:
      return 0.17;
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
      return 0.84;
    default:
      return 0;
  }
}

struct Measured {
  int tensors = 0;
  double worst = 0;
};

TEST(GgufLowK, EveryTensorMatchesF32) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path dir = test::shared_path("models");
  auto f32 = GgufFile::open((dir / "tiny-llama-256-F32.gguf").string());
  ASSERT_TRUE(f32.ok()) << f32.message();

  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tiny-llama-256-", 0) == 0 && entry.path().extension() == ".gguf") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());

  std::map<GgmlType, Measured> measured;
  for (const auto& path : files) {
    auto quant = GgufFile::open(path.string());
    ASSERT_TRUE(quant.ok()) << path << ": " << quant.message();
    for (const GgufTensorInfo& qt : quant->tensors()) {
      const GgmlType type = qt.ggml_type();
      if (rms_bound(type) == 0) continue;
      const GgufTensorInfo* ref = f32->find_tensor(qt.name);
      ASSERT_NE(ref, nullptr) << qt.name;
      ASSERT_EQ(ref->ggml_type(), GgmlType::F32) << qt.name;
      ASSERT_EQ(ref->n_elements(), qt.n_elements()) << qt.name;
      const int64_t n = qt.n_elements();
      std::vector<float> y(static_cast<size_t>(n));
      dequantize_row(type, qt.data, y.data(), n);
      const double err = relative_rms_error(reinterpret_cast<const float*>(ref->data), y.data(), n);
      EXPECT_LE(err, rms_bound(type)) << path.filename() << " " << qt.name;
      Measured& m = measured[type];
      ++m.tensors;
      m.worst = std::max(m.worst, err);
    }
  }
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    const Measured& m = measured[type];
    EXPECT_GT(m.tensors, 0) << "no " << ggml_type_name(uint32_t(type)) << " tensor in any file";
    std::printf("%-6s %3d tensors, worst relative RMS error %.4f\n",
                ggml_type_name(uint32_t(type)).c_str(), m.tensors, m.worst);
  }
}

// The quantizer writes both ternary types from the same per-block choice (d = amax, trit =
// round(x / d) + 1), so a tensor stored as TQ1_0 in one file and TQ2_0 in the other must decode
// to the same values: this pins TQ1_0's base-3 packing to TQ2_0's plain 2-bit one.
TEST(GgufLowK, TernaryFilesDecodeAlike) {
  VELA_REQUIRE_SHARED();
  auto tq1 = GgufFile::open(test::shared_path("models/tiny-llama-256-TQ1_0.gguf").string());
  auto tq2 = GgufFile::open(test::shared_path("models/tiny-llama-256-TQ2_0.gguf").string());
  ASSERT_TRUE(tq1.ok()) << tq1.message();
  ASSERT_TRUE(tq2.ok()) << tq2.message();
  int compared = 0;
  for (const GgufTensorInfo& t1 : tq1->tensors()) {
    const GgufTensorInfo* t2 = tq2->find_tensor(t1.name);
    if (t1.ggml_type() != GgmlType::TQ1_0 || t2 == nullptr || t2->ggml_type() != GgmlType::TQ2_0)
      continue;
    ASSERT_EQ(t1.n_elements(), t2->n_elements()) << t1.name;
    const int64_t n = t1.n_elements();
    std::vector<float> y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
    dequantize_row(GgmlType::TQ1_0, t1.data, y1.data(), n);
    dequantize_row(GgmlType::TQ2_0, t2->data, y2.data(), n);
    EXPECT_TRUE(y1 == y2) << t1.name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

}  // namespace
}  // namespace vela

// Real GGUF files: every IQ4_NL, IQ4_XS and MXFP4 tensor in the shared models decodes to within
// its type's relative RMS error of the same tensor in the F32 file it was quantized from. The
// tiny-llama-256-* files (one Llama quantized to each file type, several mixing types) are
// compared with tiny-llama-256-F32; the gpt-oss file's 3-D MXFP4 expert tensors with
// tiny-openai-moe-F32. A wrong level table, nibble order or scale decoding gives errors of order
// 1; the bounds sit a little above the quantizers' own error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "support/shared_data.h"

namespace vela {
namespace {

// Measured worst tensor per type (relative RMS error over a whole tensor): IQ4_NL 0.0764,
// IQ4_XS 0.0770 (25 tensors each), MXFP4 0.1164 (9 expert tensors).
double relative_rms_bound(GgmlType type) {
  switch (type) {
    case GgmlType::IQ4_NL:
      return 0.085;
    case GgmlType::IQ4_XS:
      return 0.085;
    case GgmlType::MXFP4:
      return 0.125;
    default:
      return 0.0;
  }
}

bool is_nonlinear4(GgmlType type) {
  return type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS || type == GgmlType::MXFP4;
}

double relative_rms_error(const float* ref, const float* y, int64_t n) {
  double err2 = 0, sig2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    err2 += (double(ref[i]) - double(y[i])) * (double(ref[i]) - double(y[i]));
    sig2 += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(err2 / sig2);
}

struct TypeStats {
  int tensors = 0;
  double worst = 0.0;
};

// Checks every tensor of our types in `quantized` against `reference` (F32), adding to stats.
void compare_file(const std::filesystem::path& quantized, const std::filesystem::path& reference,
                  std::map<GgmlType, TypeStats>* stats) {
  auto q = GgufFile::open(quantized.string());
  auto f32 = GgufFile::open(reference.string());
  ASSERT_TRUE(q.ok()) << quantized << ": " << (q.ok() ? "" : q.message());
  ASSERT_TRUE(f32.ok()) << reference << ": " << (f32.ok() ? "" : f32.message());
  for (const GgufTensorInfo& t : q->tensors()) {
    const GgmlType type = t.ggml_type();
    if (!is_nonlinear4(type)) continue;
    const GgufTensorInfo* ref = f32->find_tensor(t.name);
    ASSERT_NE(ref, nullptr) << quantized.filename() << " " << t.name;
    ASSERT_EQ(ref->ggml_type(), GgmlType::F32) << t.name;
    ASSERT_EQ(ref->n_elements(), t.n_elements()) << t.name;
    const int64_t n = t.n_elements();
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(type, t.data, y.data(), n);
    const double err = relative_rms_error(reinterpret_cast<const float*>(ref->data), y.data(), n);
    EXPECT_LE(err, relative_rms_bound(type))
        << quantized.filename() << " " << t.name << " (" << ggml_type_name(t.type) << ")";
    TypeStats& s = (*stats)[type];
    ++s.tensors;
    s.worst = std::max(s.worst, err);
  }
}

TEST(GgufNonlinear4, TensorsMatchF32) {
  VELA_REQUIRE_SHARED();
  const std::filesystem::path models = test::shared_path("models");
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> pairs;
  for (const auto& entry : std::filesystem::directory_iterator(models)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tiny-llama-256-", 0) == 0 && entry.path().extension() == ".gguf" &&
        name != "tiny-llama-256-F32.gguf") {
      pairs.emplace_back(entry.path(), models / "tiny-llama-256-F32.gguf");
    }
  }
  pairs.emplace_back(models / "tiny-openai-moe-MXFP4_MOE.gguf",
                     models / "tiny-openai-moe-F32.gguf");

  std::map<GgmlType, TypeStats> stats;
  for (const auto& [quantized, reference] : pairs) {
    SCOPED_TRACE(quantized.filename().string());
    compare_file(quantized, reference, &stats);
  }
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    const TypeStats& s = stats[type];
    EXPECT_GE(s.tensors, 1) << "no " << ggml_type_name(uint32_t(type)) << " tensor in " << models;
    std::printf("%-7s %3d tensors, worst relative RMS error %.4f (bound %.3f)\n",
                std::string(ggml_type_name(uint32_t(type))).c_str(), s.tensors, s.worst,
                relative_rms_bound(type));
  }
}

}  // namespace
}  // namespace vela

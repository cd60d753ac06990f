// Real GGUF files: every tensor of the tiny-llama-256 model stored in each quantized type decodes
// to the same tensor of the F32 file within the format's error; for the types ggml quantizes
// deterministically without search (F16, BF16, Q8_0, Q4_0), re-quantizing the F32 tensor must
// reproduce the file's bytes exactly; for the K types, our quantizer's error must be close to
// the file's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "error_bounds.h"
#include "io/gguf.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "support/shared_data.h"

namespace vela {
namespace {

struct Comparison {
  int tensors_checked = 0;
  int tensors_bit_exact = 0;
};

double relative_rms_error(const float* x, const float* y, int64_t n) {
  double err2 = 0, sig2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    err2 += double(x[i] - y[i]) * double(x[i] - y[i]);
    sig2 += double(x[i]) * double(x[i]);
  }
  return std::sqrt(err2 / sig2);
}

bool requantizes_exactly(GgmlType t) {
  return t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_0;
}

Comparison compare_with_f32(const std::string& variant) {
  Comparison result;
  auto f32 = GgufFile::open(test::shared_path("models/tiny-llama-256-F32.gguf").string());
  auto quant =
      GgufFile::open(test::shared_path("models/tiny-llama-256-" + variant + ".gguf").string());
  EXPECT_TRUE(f32.ok()) << (f32.ok() ? "" : f32.message());
  EXPECT_TRUE(quant.ok()) << (quant.ok() ? "" : quant.message());
  if (!f32.ok() || !quant.ok()) return result;

  for (const GgufTensorInfo& qt : quant->tensors()) {
    const GgmlType type = qt.ggml_type();
    const GgufTensorInfo* ref = f32->find_tensor(qt.name);
    EXPECT_NE(ref, nullptr) << qt.name;
    if (ref == nullptr) continue;
    EXPECT_EQ(ref->n_elements(), qt.n_elements()) << qt.name;
    EXPECT_EQ(ref->ggml_type(), GgmlType::F32) << qt.name;
    if (type == GgmlType::F32) continue;
    EXPECT_TRUE(can_dequantize(type)) << qt.name << " " << ggml_type_name(qt.type);
    if (!can_dequantize(type)) continue;

    const int64_t n = qt.n_elements();
    const auto* x = reinterpret_cast<const float*>(ref->data);
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(type, qt.data, y.data(), n);
    ++result.tensors_checked;

    const auto info = *ggml_type_info(qt.type);
    const int64_t bs = info.block_size == 1 ? 32 : info.block_size;
    if (const double rms_bound = test::k_type_relative_rms_bound(type); rms_bound > 0) {
      const double file_error = relative_rms_error(x, y.data(), n);
      EXPECT_LE(file_error, rms_bound) << variant << " " << qt.name;
      // Our own K quantizer (a different scale search) must be about as good as the one that
      // wrote the file: within 5% of its error on the same tensor.
      std::vector<uint8_t> mine(size_t(row_bytes(info, n)));
      quantize_row(type, x, mine.data(), n);
      std::vector<float> z(static_cast<size_t>(n));
      dequantize_row(type, mine.data(), z.data(), n);
      EXPECT_LE(relative_rms_error(x, z.data(), n), 1.05 * file_error) << variant << " " << qt.name;
    } else {
      int64_t first_bad = -1;  // report only the first element over its bound
      for (int64_t b = 0; b < n / bs && first_bad < 0; ++b) {
        const float bound = test::block_error_bound(type, x + b * bs, bs);
        for (int64_t i = b * bs; i < (b + 1) * bs; ++i) {
          if (!(std::fabs(x[i] - y[size_t(i)]) <= bound)) {
            ADD_FAILURE() << variant << " " << qt.name << " element " << i << ": " << x[i]
                          << " decoded as " << y[size_t(i)] << ", bound " << bound;
            first_bad = i;
            break;
          }
        }
      }
    }

    if (requantizes_exactly(type)) {
      std::vector<uint8_t> mine(size_t(row_bytes(info, n)));
      quantize_row(type, x, mine.data(), n);
      EXPECT_EQ(mine.size(), qt.n_bytes) << qt.name;
      const bool same =
          mine.size() == qt.n_bytes && std::memcmp(mine.data(), qt.data, mine.size()) == 0;
      EXPECT_TRUE(same) << variant << " " << qt.name << ": re-quantized bytes differ from ggml's";
      result.tensors_bit_exact += same ? 1 : 0;
    }
  }
  return result;
}

TEST(GgufDequantize, Q8_0MatchesF32) {
  VELA_REQUIRE_SHARED();
  const auto r = compare_with_f32("Q8_0");
  EXPECT_GT(r.tensors_checked, 10);
  EXPECT_GT(r.tensors_bit_exact, 10);
}

TEST(GgufDequantize, Q4_0MatchesF32) {
  VELA_REQUIRE_SHARED();
  const auto r = compare_with_f32("Q4_0");
  EXPECT_GT(r.tensors_checked, 10);
  EXPECT_GT(r.tensors_bit_exact, 10);
}

TEST(GgufDequantize, Q6_KMatchesF32) {
  VELA_REQUIRE_SHARED();
  EXPECT_GT(compare_with_f32("Q6_K").tensors_checked, 10);
}

TEST(GgufDequantize, Q4_K_MMatchesF32) {
  VELA_REQUIRE_SHARED();
  EXPECT_GT(compare_with_f32("Q4_K_M").tensors_checked, 10);
}

TEST(GgufDequantize, F16AndBF16MatchF32) {
  VELA_REQUIRE_SHARED();
  for (const char* variant : {"F16", "BF16"}) {
    const auto r = compare_with_f32(variant);
    EXPECT_GT(r.tensors_checked, 10) << variant;
    EXPECT_EQ(r.tensors_bit_exact, r.tensors_checked) << variant;
  }
}

}  // namespace
}  // namespace vela

// Helpers shared by the quantizer tests of the low-bit weight types: type names, row sizes,
// quantize / round trip of one row, random rows and importances, weighted error sums.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"

namespace vela::test {

// The type's ggml name, for test messages.
inline std::string name_of(GgmlType type) {
  return ggml_type_name(uint32_t(type));
}

// Bytes of one quantized row of n elements (n a multiple of the block size).
inline size_t row_bytes(GgmlType type, int64_t n) {
  const auto info = ggml_type_info(uint32_t(type));
  return size_t(n / info->block_size * info->type_size);
}

// Quantizes one row. x: [n] f32, importance: [n] f32 or nullptr; returns row_bytes(type, n).
inline std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& x,
                                     const float* importance) {
  std::vector<uint8_t> q(row_bytes(type, int64_t(x.size())));
  quantize_row_weighted(type, x.data(), q.data(), int64_t(x.size()), importance);
  return q;
}

// Quantizes then decodes one row. x: [n] f32, importance: [n] f32 or nullptr; returns [n] f32.
inline std::vector<float> round_trip(GgmlType type, const std::vector<float>& x,
                                     const float* importance) {
  const std::vector<uint8_t> q = quantize(type, x, importance);
  std::vector<float> y(x.size());
  dequantize_row(type, q.data(), y.data(), int64_t(x.size()));
  return y;
}

// A random row of N(0, 0.02^2) weights, [n] f32; with `outliers`, one element in 64 (in n when
// n < 64) is 8 to 16 times larger, as in real checkpoints' heavy-tailed columns.
inline std::vector<float> random_row(std::mt19937& rng, bool outliers, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> factor(8.0f, 16.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  if (outliers) {
    const int64_t span = std::min<int64_t>(64, n);
    for (int64_t i = 0; i < n; i += span) x[size_t(i + int64_t(rng() % span))] *= factor(rng);
  }
  return x;
}

// A per-column importance, [n] f32, spread like an importance matrix's: log-normal over four
// orders of magnitude.
inline std::vector<float> random_importance(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> imp(static_cast<size_t>(n));
  for (float& v : imp) v = std::exp(normal(rng));
  return imp;
}

// Adds sum w (x - y)^2 to err and sum w x^2 to sig. x, y: [n] f32, w: [n] f32 or nullptr (ones).
inline void accumulate(const std::vector<float>& x, const std::vector<float>& y, const float* w,
                       double* err, double* sig) {
  for (size_t i = 0; i < x.size(); ++i) {
    const double wi = w ? w[i] : 1.0;
    *err += wi * double(x[i] - y[i]) * double(x[i] - y[i]);
    *sig += wi * double(x[i]) * double(x[i]);
  }
}

// ||y - x|| / ||x|| over a whole tensor. x, y: [n] f32.
inline double relative_rms_error(const float* x, const float* y, int64_t n) {
  double err2 = 0, sig2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    err2 += double(x[i] - y[i]) * double(x[i] - y[i]);
    sig2 += double(x[i]) * double(x[i]);
  }
  return std::sqrt(err2 / sig2);
}

// The importance of tensor `name` in an imatrix file, [in_sum2 elements] f32: in_sum2 / counts
// (0 when counts is 0); empty when the imatrix has no entry for it.
inline std::vector<float> importance_of(const GgufFile& imatrix, const std::string& name) {
  const GgufTensorInfo* sum2 = imatrix.find_tensor(name + ".in_sum2");
  const GgufTensorInfo* counts = imatrix.find_tensor(name + ".counts");
  if (sum2 == nullptr || counts == nullptr) return {};
  EXPECT_EQ(sum2->ggml_type(), GgmlType::F32) << name;
  EXPECT_EQ(counts->ggml_type(), GgmlType::F32) << name;
  const float count = reinterpret_cast<const float*>(counts->data)[0];
  const auto* s = reinterpret_cast<const float*>(sum2->data);
  std::vector<float> imp(static_cast<size_t>(sum2->n_elements()));
  for (size_t i = 0; i < imp.size(); ++i) imp[i] = count > 0 ? s[i] / count : 0.0f;
  return imp;
}

}  // namespace vela::test

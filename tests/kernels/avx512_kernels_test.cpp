// The AVX-512 kernels against the scalar reference table, in every variant this CPU can run:
// with and without VNNI (vpdpbusd / vpdpwssd vs vpmaddubsw + vpmaddwd) and with and without
// AVX512-BF16 (vdpbf16ps vs widening by shifts). Variants are built directly with
// avx512::register_kernels, so the fallbacks are covered on a CPU that has the extensions.
// Skipped on CPUs without AVX-512.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/type_traits.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/blocks.h"
#include "quant/quantize.h"
#include "util/half.h"

namespace vela {
namespace {

using kernels::TraitsTable;
using kernels::avx512::Avx512Extensions;

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

constexpr double kUnitRoundoff = 1.0 / 16777216.0;  // 2^-24

const TypeTraits& scalar(GgmlType type) {
  return *type_traits_for(KernelIsa::kScalar, type);
}

int64_t block_size(GgmlType type) {
  return ggml_type_info(uint32_t(type))->block_size;
}

size_t bytes_of(GgmlType type, int64_t n) {
  return size_t(row_bytes(*ggml_type_info(uint32_t(type)), n));
}

// The scalar table with the AVX-512 kernels installed for the given extensions. Built only when
// the CPU has AVX-512 (the tests skip otherwise).
const TraitsTable& avx512_table(Avx512Extensions ext) {
  static const auto make = [](Avx512Extensions e) {
    TraitsTable t;
    for (size_t i = 0; i < t.size(); ++i) {
      const TypeTraits* s = type_traits_for(KernelIsa::kScalar, static_cast<GgmlType>(i));
      t[i] = s != nullptr ? *s : TypeTraits{GgmlType::F32, nullptr, nullptr, nullptr};
    }
    kernels::avx512::register_kernels(t, e);
    return t;
  };
  static const TraitsTable tables[4] = {make({false, false}), make({false, true}),
                                        make({true, false}), make({true, true})};
  return tables[(ext.vnni ? 2 : 0) + (ext.bf16 ? 1 : 0)];
}

std::vector<float> decode(GgmlType type, const uint8_t* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  scalar(type).to_float(row, out.data(), n);
  return out;
}

// A weight row of n elements: reference-quantized normal values whose magnitude varies per
// block (some blocks zero), shifted on odd seeds so the affine offsets matter.
std::vector<uint8_t> make_weights(GgmlType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    const float block_scale = (i / 32 % 5 == 3) ? 30.0f : (i / 32 % 7 == 2 ? 0.0f : 1.0f);
    v[i] = 0.02f * block_scale * normal(rng) + (seed % 2 ? 0.03f : 0.0f);
  }
  std::vector<uint8_t> row(bytes_of(type, n));
  quantize_row(type, v.data(), row.data(), n);
  return row;
}

// Activations for n elements (scale `sigma`, with outliers), converted by the scalar from_float
// to the weight type's vec_dot_type.
std::vector<uint8_t> make_activations(GgmlType w_type, int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (size_t i = 5; i < x.size(); i += 97) x[i] *= 40.0f;
  const GgmlType act_type = scalar(w_type).vec_dot_type;
  std::vector<uint8_t> act(bytes_of(act_type, n));
  scalar(act_type).from_float(x.data(), act.data(), n);
  return act;
}

// Bound on |kernel - scalar| for one dot product of n elements. Both kernels compute the same
// exact integer block sums; they differ only in float rounding: a sum of at most
// n + n/block + 8 terms (per-lane partial sums times scale products, or element products),
// each carrying a few roundings, so each is within (n + n/block + 8) u M of the exact value
// and the two within twice that. M = sum |terms|, where an affine weight counts as its two
// parts (|d q| + |m|, or |d sc q| + |dmin mn|), which the kernels scale and round separately.
double tolerance(GgmlType w_type, const uint8_t* w, const uint8_t* act, int64_t n) {
  const auto a = decode(scalar(w_type).vec_dot_type, act, n);
  std::vector<std::vector<float>> parts;
  const bool affine = w_type == GgmlType::Q4_1 || w_type == GgmlType::Q5_1 ||
                      w_type == GgmlType::Q4_K || w_type == GgmlType::Q5_K;
  if (affine) {  // d at byte 0 and m / dmin at byte 2 of every block: zero one at a time
    const size_t block = size_t(ggml_type_info(uint32_t(w_type))->type_size);
    for (size_t field : {0, 2}) {
      std::vector<uint8_t> copy(w, w + bytes_of(w_type, n));
      for (size_t at = field; at < copy.size(); at += block) std::memset(&copy[at], 0, 2);
      parts.push_back(decode(w_type, copy.data(), n));
    }
  } else {
    parts.push_back(decode(w_type, w, n));
  }
  double m = 0;
  for (const auto& p : parts)
    for (int64_t i = 0; i < n; ++i) m += std::fabs(double(p[size_t(i)]) * a[size_t(i)]);
  const double terms = double(n + n / block_size(w_type) + 8);
  return 2.0 * terms * kUnitRoundoff * (1.01 * m) + 1e-30;  // 1.01: Q8_1's rounded s
}

std::vector<int64_t> lengths(GgmlType type) {
  if (block_size(type) == 1) return {1, 15, 16, 17, 31, 33, 64, 100, 257, 4099};
  if (block_size(type) == kQK_K) return {256, 512, 768, 2816};
  return {32, 64, 96, 160, 288, 4128};  // odd block counts leave a single-block tail
}

using Param = std::tuple<int, GgmlType>;  // extensions: bit 1 = VNNI, bit 0 = BF16

Avx512Extensions extensions(int bits) {
  return {.vnni = (bits & 2) != 0, .bf16 = (bits & 1) != 0};
}

class Avx512Kernels : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!cpu_features().avx512) GTEST_SKIP() << "CPU without AVX-512";
    type_ = std::get<1>(GetParam());
    const TraitsTable& table = avx512_table(extensions(std::get<0>(GetParam())));
    simd_ = &table[static_cast<size_t>(type_)];
    ASSERT_NE(simd_->vec_dot, nullptr);
    ASSERT_NE(simd_->vec_dot_rows, nullptr);
    ASSERT_NE(simd_->vec_dot, scalar(type_).vec_dot) << "no AVX-512 kernel installed";
  }
  float scalar_dot(int64_t n, const uint8_t* w, const uint8_t* a) const {
    return scalar(type_).vec_dot(n, w, a);
  }
  GgmlType type_ = GgmlType::F32;
  const TypeTraits* simd_ = nullptr;
};

TEST_P(Avx512Kernels, VecDotMatchesScalar) {
  for (const int64_t n : lengths(type_)) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type_, n, seed);
      const auto act = make_activations(type_, n, 1.0f, seed + 50);
      EXPECT_NEAR(simd_->vec_dot(n, w.data(), act.data()), scalar_dot(n, w.data(), act.data()),
                  tolerance(type_, w.data(), act.data(), n))
          << "n=" << n << " seed=" << seed;
    }
  }
}

// Row tiles of 8, 4, 2 and 1 and their combinations, padded activation rows, strided output;
// each row's result is bit-identical to vec_dot's.
TEST_P(Avx512Kernels, VecDotRowsMatchesScalar) {
  for (const int64_t n : lengths(type_)) {
    const auto w = make_weights(type_, n, uint32_t(n));
    const size_t act_bytes = bytes_of(scalar(type_).vec_dot_type, n);
    const size_t stride = act_bytes + 36;
    for (const int64_t n_act : {1, 2, 3, 7, 8, 15, 16}) {
      std::vector<uint8_t> acts(stride * size_t(n_act), 0xEE);
      for (int64_t t = 0; t < n_act; ++t) {
        const auto act = make_activations(type_, n, 1.0f, uint32_t(100 + t));
        std::memcpy(&acts[size_t(t) * stride], act.data(), act_bytes);
      }
      constexpr int64_t kOutStride = 5;
      std::vector<float> out(size_t(n_act * kOutStride), -3.0f);
      simd_->vec_dot_rows(n, w.data(), acts.data(), stride, n_act, out.data(), kOutStride);
      for (int64_t t = 0; t < n_act; ++t) {
        const uint8_t* a = &acts[size_t(t) * stride];
        EXPECT_NEAR(out[size_t(t * kOutStride)], scalar_dot(n, w.data(), a),
                    tolerance(type_, w.data(), a, n))
            << "n=" << n << " n_act=" << n_act << " row " << t;
        // Batch invariance: a row's result does not depend on the tile it falls in.
        EXPECT_EQ(out[size_t(t * kOutStride)], simd_->vec_dot(n, w.data(), a))
            << "n=" << n << " n_act=" << n_act << " row " << t;
        if (t + 1 < n_act) {
          EXPECT_EQ(out[size_t(t * kOutStride + 1)], -3.0f) << "wrote between outputs";
        }
      }
    }
  }
}

// Scales at the ends of the fp16 range: the 32-element kernels convert activation scales with
// integer shifts (exact for fp16 subnormals too) and carry 2^112 in the weight scale.
TEST_P(Avx512Kernels, ExtremeScales) {
  const int64_t n = block_size(type_) == kQK_K ? 512 : 128;
  for (const float w_mag : {1e-7f, 0.02f, 3000.0f}) {
    for (const float a_sigma : {1e-6f, 1.0f, 3e4f}) {
      std::mt19937 rng(7);
      std::normal_distribution<float> normal(0.0f, w_mag);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = normal(rng);
      std::vector<uint8_t> w(bytes_of(type_, n));
      quantize_row(type_, v.data(), w.data(), n);
      const auto act = make_activations(type_, n, a_sigma, 9);
      const float expect = scalar_dot(n, w.data(), act.data());
      if (!std::isfinite(expect)) continue;  // the f16/bf16 weights themselves overflow
      EXPECT_NEAR(simd_->vec_dot(n, w.data(), act.data()), expect,
                  tolerance(type_, w.data(), act.data(), n))
          << "weights ~" << w_mag << " activations ~" << a_sigma;
    }
  }
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  const int ext = std::get<0>(info.param);
  return std::string((ext & 2) ? "vnni" : "novnni") + ((ext & 1) ? "_bf16_" : "_nobf16_") +
         ggml_type_name(uint32_t(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Avx512Kernels,
                         testing::Combine(testing::Values(0, 1, 2, 3), testing::ValuesIn(kTypes)),
                         param_name);

// Small integers with unit scales: every partial sum is exact, so each variant must return the
// integer dot product exactly. Covers Q8_0's -128 weight (|w| = 128 as an unsigned byte).
TEST(Avx512KernelsExact, Q8_0IncludingMinus128) {
  if (!cpu_features().avx512) GTEST_SKIP() << "CPU without AVX-512";
  constexpr int kBlocks = 3;
  BlockQ8_0 w[kBlocks], a[kBlocks];
  int expect = 0;
  for (int b = 0; b < kBlocks; ++b) {
    w[b].d = a[b].d = 0x3C00;  // 1.0
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = int8_t(j == 5 ? -128 : (j * 37 + b * 11) % 255 - 127);
      a[b].qs[j] = int8_t((j * 53 + b) % 255 - 127);
      expect += w[b].qs[j] * a[b].qs[j];
    }
  }
  for (int ext = 0; ext < 4; ++ext) {
    const TypeTraits& t = avx512_table(extensions(ext))[size_t(GgmlType::Q8_0)];
    EXPECT_EQ(t.vec_dot(32 * kBlocks, w, a), float(expect)) << "variant " << ext;
  }
}

// The table type_traits() uses on this CPU carries the kernels for the detected extensions.
TEST(Avx512KernelsTable, ActiveTableUsesDetectedExtensions) {
  if (!cpu_features().avx512) GTEST_SKIP() << "CPU without AVX-512";
  const TraitsTable& expect = avx512_table(kernels::avx512::detected_extensions());
  for (GgmlType type : kTypes) {
    const TypeTraits* t = type_traits_for(KernelIsa::kAvx512, type);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->vec_dot, expect[size_t(type)].vec_dot) << ggml_type_name(uint32_t(type));
    EXPECT_EQ(t->vec_dot_rows, expect[size_t(type)].vec_dot_rows);
    EXPECT_EQ(t->vec_dot_type, scalar(type).vec_dot_type);
  }
}

}  // namespace
}  // namespace vela

// Dot products of the E8-lattice codebook types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) with
// Q8_K activations, on random valid blocks (arbitrary bytes, finite fp16 scales):
//  * the scalar vec_dot equals the double-precision dot of the decoded operands within
//    4e-5 * sum |w_i a_i|;
//  * every kernel table this CPU runs (supported_kernel_isas(); for AVX-512 also each
//    VNNI / non-VNNI variant) agrees with the scalar vec_dot within that bound, and exactly where
//    no float operation can round;
//  * each table's vec_dot_rows equals its own vec_dot bit for bit (batch invariance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "block_kernel_checks.h"
#include "dot_reference.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/type_traits.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/blocks.h"
#include "quant/blocks_iq23.h"
#include "util/half.h"

namespace vela {
namespace {

const GgmlType kTypes[] = {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                           GgmlType::IQ3_S};

// 256, 4096, and 7 super-blocks: not a multiple of any kernel's unroll (1, 2 or 4 blocks).
const int64_t kLengths[] = {256, 1792, 4096};

using test::bytes_of;
using test::decode_scalar;
using test::make_integer_activations;
using test::scalar_traits;
using test::Table;
using test::tables;

// A weight row of n elements: arbitrary bytes, with each super-block's fp16 d (the first two
// bytes of every block type here) set to `d` (0 = a random finite value of either sign).
std::vector<uint8_t> make_weights(GgmlType type, int64_t n, uint32_t seed, float d = 0.0f) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(bytes_of(type, n));
  for (uint8_t& b : row) b = uint8_t(rng());
  std::normal_distribution<float> normal(0.0f, 0.01f);
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(type))->type_size);
  for (size_t at = 0; at < row.size(); at += block_bytes) {
    const uint16_t h = fp32_to_fp16(d != 0.0f ? d : normal(rng));
    std::memcpy(row.data() + at, &h, sizeof(h));
  }
  return row;
}

// Q8_K activations of n normal values with outliers and an all-zero block when n >= 512.
std::vector<uint8_t> make_activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (size_t i = 5; i < x.size(); i += 89) x[i] *= 30.0f;
  if (n >= 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  std::vector<uint8_t> act(bytes_of(GgmlType::Q8_K, n));
  scalar_traits(GgmlType::Q8_K).from_float(x.data(), act.data(), n);
  return act;
}

// ---------------------------------------------------------------------------------------------
// Tables under test

// ---------------------------------------------------------------------------------------------
// Scalar reference against the decoded operands

class Iq23Scalar : public testing::TestWithParam<GgmlType> {};

TEST_P(Iq23Scalar, VecDotEqualsDoubleDotOfDecodedOperands) {
  const GgmlType type = GetParam();
  const TypeTraits& traits = scalar_traits(type);
  ASSERT_EQ(traits.vec_dot_type, GgmlType::Q8_K);
  for (const int64_t n : kLengths) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type, n, seed);
      const auto a = make_activations(n, seed + 50);
      const test::DotReference ref = test::dot_reference(type, w.data(), a.data(), n);
      EXPECT_NEAR(traits.vec_dot(n, w.data(), a.data()), ref.value, ref.tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

// d = 1 and activation scales +-1: every partial sum is an integer below 2^24, so the scalar
// result must be the exact dot product (a wrong element or scale cannot hide in rounding).
TEST_P(Iq23Scalar, IntegerOperandsGiveExactResult) {
  const GgmlType type = GetParam();
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const auto w = make_weights(type, 256, seed, 1.0f);
    const auto a = make_integer_activations(256, 40, seed + 7);
    const auto wd = decode_scalar(type, w.data(), 256);
    const auto ad = decode_scalar(GgmlType::Q8_K, a.data(), 256);
    double exact = 0;
    for (size_t i = 0; i < 256; ++i) exact += double(wd[i]) * double(ad[i]);
    EXPECT_EQ(scalar_traits(type).vec_dot(256, w.data(), a.data()), float(exact)) << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Iq23Scalar, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return ggml_type_name(uint32_t(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Every table against the scalar one

using TableType = std::tuple<int, GgmlType>;  // index into tables(), weight type

class Iq23Tables : public testing::TestWithParam<TableType> {
 protected:
  void SetUp() override {
    const std::vector<Table> all = tables();
    table_ = all[size_t(std::get<0>(GetParam()))];
    type_ = std::get<1>(GetParam());
    traits_ = table_.get(type_);
    ASSERT_NE(traits_, nullptr);
    ASSERT_NE(traits_->vec_dot, nullptr);
    ASSERT_EQ(traits_->vec_dot_type, GgmlType::Q8_K);
  }

  Table table_;
  GgmlType type_ = GgmlType::F32;
  const TypeTraits* traits_ = nullptr;
};

TEST_P(Iq23Tables, VecDotMatchesScalarWithinBound) {
  for (const int64_t n : kLengths) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type_, n, seed);
      const auto a = make_activations(n, seed + 100);
      const test::DotReference ref = test::dot_reference(type_, w.data(), a.data(), n);
      const float expect = scalar_traits(type_).vec_dot(n, w.data(), a.data());
      EXPECT_NEAR(traits_->vec_dot(n, w.data(), a.data()), expect, ref.tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

// Extreme operands: activations all +-127; the first super-block all ones after d (every index,
// sign and scale bit set: the largest codebook entries, ls = 31), the second with the top 4 bits
// of every byte set. The results must stay within the bound (no int16 step may saturate).
TEST_P(Iq23Tables, ExtremeOperandsWithinBound) {
  const int64_t n = 512;
  auto w = make_weights(type_, n, 3);
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(type_))->type_size);
  for (size_t i = 2; i < block_bytes; ++i) {
    w[i] = 0xFF;
    w[block_bytes + i] |= 0xF0;
  }
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i * 7 % 3 == 0) ? 1.0f : -1.0f;
  std::vector<uint8_t> a(bytes_of(GgmlType::Q8_K, n));
  scalar_traits(GgmlType::Q8_K).from_float(x.data(), a.data(), n);
  const test::DotReference ref = test::dot_reference(type_, w.data(), a.data(), n);
  const float expect = scalar_traits(type_).vec_dot(n, w.data(), a.data());
  EXPECT_NEAR(expect, ref.value, ref.tolerance);
  EXPECT_NEAR(traits_->vec_dot(n, w.data(), a.data()), expect, ref.tolerance);
}

// As Iq23Scalar.IntegerOperandsGiveExactResult: no rounding anywhere, so every table is exact.
TEST_P(Iq23Tables, IntegerOperandsGiveExactResult) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const auto w = make_weights(type_, 256, seed, 1.0f);
    const auto a = make_integer_activations(256, 40, seed + 7);
    const float expect = scalar_traits(type_).vec_dot(256, w.data(), a.data());
    EXPECT_EQ(traits_->vec_dot(256, w.data(), a.data()), expect) << seed;
    if (traits_->vec_dot_rows != nullptr) {
      float out = -1.0f;
      traits_->vec_dot_rows(256, w.data(), a.data(), a.size(), 1, &out, 1);
      EXPECT_EQ(out, expect) << seed;
    }
  }
}

// Batch invariance: vec_dot_rows over n_act rows (padded stride, strided output) gives each row
// exactly this table's vec_dot of it, and writes nothing between the output slots.
TEST_P(Iq23Tables, VecDotRowsIsBitIdenticalToVecDot) {
  if (table_.name == "scalar" && traits_->vec_dot_rows == nullptr)
    GTEST_SKIP() << "the scalar table has no batched kernel (matmul loops vec_dot)";
  ASSERT_NE(traits_->vec_dot_rows, nullptr) << "every SIMD table has a batched kernel";
  for (const int64_t n : kLengths) {
    const auto w = make_weights(type_, n, uint32_t(n));
    const size_t act_bytes = bytes_of(GgmlType::Q8_K, n);
    const size_t stride = act_bytes + 64;
    constexpr int64_t kMaxActs = 8;
    std::vector<uint8_t> acts(stride * kMaxActs, 0xCD);
    for (int64_t t = 0; t < kMaxActs; ++t) {
      const auto a = make_activations(n, uint32_t(1000 + t));
      std::memcpy(acts.data() + size_t(t) * stride, a.data(), act_bytes);
    }
    for (const int64_t n_act : {1, 2, 3, 5, 8}) {
      constexpr int64_t kOutStride = 3;
      std::vector<float> out(size_t(n_act * kOutStride), -7.0f);
      traits_->vec_dot_rows(n, w.data(), acts.data(), stride, n_act, out.data(), kOutStride);
      for (int64_t t = 0; t < n_act; ++t) {
        const uint8_t* a = acts.data() + size_t(t) * stride;
        const float single = traits_->vec_dot(n, w.data(), a);
        EXPECT_EQ(out[size_t(t * kOutStride)], single)
            << "n=" << n << " n_act=" << n_act << " t=" << t;
        EXPECT_EQ(out[size_t(t * kOutStride + 1)], -7.0f);
        EXPECT_EQ(out[size_t(t * kOutStride + 2)], -7.0f);
      }
    }
  }
}

std::vector<TableType> table_params() {
  std::vector<TableType> out;
  const int n_tables = int(tables().size());
  for (int i = 0; i < n_tables; ++i)
    for (GgmlType t : kTypes) out.emplace_back(i, t);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, Iq23Tables, testing::ValuesIn(table_params()),
                         [](const testing::TestParamInfo<TableType>& info) {
                           return tables()[size_t(std::get<0>(info.param))].name + "_" +
                                  ggml_type_name(uint32_t(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace vela

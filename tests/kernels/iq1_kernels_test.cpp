// Dot products of the 1-bit codebook types (IQ1_S, IQ1_M) with Q8_K activations, on random
// valid blocks (arbitrary bytes, finite fp16 super-scales) and random activations:
//  * the scalar vec_dot equals the double-precision dot of the decoded operands within
//    4e-5 * sum |w_i a_i|, and exactly where no float operation can round;
//  * every kernel table this CPU runs (supported_kernel_isas(); for AVX-512 also the VNNI and
//    the plain variant) agrees with the scalar vec_dot within that bound, and exactly where no
//    float operation can round;
//  * each table's vec_dot_rows equals its own vec_dot bit for bit (batch invariance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "block_kernel_checks.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/type_traits.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/blocks.h"
#include "quant/blocks_iq1.h"
#include "util/half.h"

namespace vela {
namespace {

const GgmlType kTypes[] = {GgmlType::IQ1_S, GgmlType::IQ1_M};

// One block, 16 blocks, and 11 blocks: not a multiple of any kernel's unroll or row tile.
const int64_t kLengths[] = {256, 2816, 4096};

using test::bytes_of;
using test::decode_scalar;
using test::make_integer_activations;
using test::scalar_traits;
using test::Table;
using test::tables;

// Sets the fp16 super-scale of the block at `blk`: IQ1_S's d field, or IQ1_M's four nibbles in
// the top of its scale words (the 3-bit scales below them are kept).
void set_scale(GgmlType type, uint8_t* blk, uint16_t d) {
  if (type == GgmlType::IQ1_S) {
    std::memcpy(blk + offsetof(BlockIQ1_S, d), &d, sizeof(d));
    return;
  }
  uint8_t* scales = blk + offsetof(BlockIQ1_M, scales);
  for (int i = 0; i < 4; ++i) {
    uint8_t& top = scales[2 * i + 1];  // high byte of word i
    top = uint8_t((top & 0x0F) | ((d >> (4 * i)) & 0x0F) << 4);
  }
}

// A weight row of n elements: arbitrary bytes, each block's super-scale set to `d` (0 = a random
// finite value of either sign).
std::vector<uint8_t> make_weights(GgmlType type, int64_t n, uint32_t seed, float d = 0.0f) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(bytes_of(type, n));
  for (uint8_t& b : row) b = uint8_t(rng());
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(type))->type_size);
  for (size_t at = 0; at < row.size(); at += block_bytes) {
    set_scale(type, row.data() + at, fp32_to_fp16(d != 0.0f ? d : normal(rng)));
  }
  return row;
}

// Q8_K activations of n normal values with outliers, and an all-zero block when n >= 512.
std::vector<uint8_t> make_activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (size_t i = 3; i < x.size(); i += 71) x[i] *= 25.0f;
  if (n >= 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  std::vector<uint8_t> act(bytes_of(GgmlType::Q8_K, n));
  scalar_traits(GgmlType::Q8_K).from_float(x.data(), act.data(), n);
  return act;
}

struct Reference {
  double value = 0;      // sum w_i a_i of the decoded operands, in double
  double tolerance = 0;  // 4e-5 * sum |w_i a_i|
};

Reference reference(GgmlType type, const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto wd = decode_scalar(type, w, n);
  const auto ad = decode_scalar(GgmlType::Q8_K, a, n);
  Reference r;
  double magnitude = 0;
  for (size_t i = 0; i < wd.size(); ++i) {
    r.value += double(wd[i]) * double(ad[i]);
    magnitude += std::fabs(double(wd[i]) * double(ad[i]));
  }
  r.tolerance = 4e-5 * magnitude + 1e-30;
  return r;
}

// The exact dot of integer-valued activations (scale 1) with weights of d = 1, whose decoded
// values are multiples of 1/8: the double sum is exact, and so is its float.
float exact_dot(GgmlType type, const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto wd = decode_scalar(type, w, n);
  const auto ad = decode_scalar(GgmlType::Q8_K, a, n);
  double exact = 0;
  for (size_t i = 0; i < wd.size(); ++i) exact += double(wd[i]) * double(ad[i]);
  EXPECT_EQ(exact * 8, std::round(exact * 8)) << "operands are not multiples of 1/8";
  EXPECT_LT(std::fabs(exact), 1 << 20);
  return float(exact);
}

// ---------------------------------------------------------------------------------------------
// Tables under test

// ---------------------------------------------------------------------------------------------
// Scalar reference against the decoded operands

class Iq1Scalar : public testing::TestWithParam<GgmlType> {};

TEST_P(Iq1Scalar, VecDotEqualsDoubleDotOfDecodedOperands) {
  const GgmlType type = GetParam();
  const TypeTraits& traits = scalar_traits(type);
  ASSERT_EQ(traits.vec_dot_type, GgmlType::Q8_K);
  for (const int64_t n : kLengths) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type, n, seed);
      const auto a = make_activations(n, seed + 50);
      const Reference ref = reference(type, w.data(), a.data(), n);
      EXPECT_NEAR(traits.vec_dot(n, w.data(), a.data()), ref.value, ref.tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

// d = 1 and activation scales 1: every partial sum is a multiple of 1/8 below 2^20, so the
// result must be the exact dot product (a wrong element, scale or delta cannot hide in rounding).
TEST_P(Iq1Scalar, IntegerOperandsGiveExactResult) {
  const GgmlType type = GetParam();
  for (const int64_t n : {256, 512}) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      const auto w = make_weights(type, n, seed, 1.0f);
      const auto a = make_integer_activations(n, 40, seed + 7);
      EXPECT_EQ(scalar_traits(type).vec_dot(n, w.data(), a.data()),
                exact_dot(type, w.data(), a.data(), n))
          << "n=" << n << " seed=" << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Iq1Scalar, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return ggml_type_name(uint32_t(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Every table against the scalar one

using TableType = std::tuple<int, GgmlType>;  // index into tables(), weight type

class Iq1Tables : public testing::TestWithParam<TableType> {
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

  // out[t] for t < n_act: vec_dot_rows over activation rows `stride` bytes apart, written
  // kOutStride apart; the slots in between must stay untouched.
  std::vector<float> rows(int64_t n, const uint8_t* w, const uint8_t* acts, size_t stride,
                          int64_t n_act) const {
    constexpr int64_t kOutStride = 3;
    std::vector<float> out(size_t(n_act * kOutStride), -7.0f);
    const auto fn = traits_->vec_dot_rows;
    if (fn != nullptr) {
      fn(n, w, acts, stride, n_act, out.data(), kOutStride);
    } else {  // no batched kernel: matmul loops vec_dot, trivially invariant
      for (int64_t t = 0; t < n_act; ++t) {
        out[size_t(t * kOutStride)] = traits_->vec_dot(n, w, acts + size_t(t) * stride);
      }
    }
    std::vector<float> result(static_cast<size_t>(n_act));
    for (int64_t t = 0; t < n_act; ++t) {
      result[size_t(t)] = out[size_t(t * kOutStride)];
      EXPECT_EQ(out[size_t(t * kOutStride + 1)], -7.0f);
      EXPECT_EQ(out[size_t(t * kOutStride + 2)], -7.0f);
    }
    return result;
  }

  Table table_;
  GgmlType type_ = GgmlType::F32;
  const TypeTraits* traits_ = nullptr;
};

TEST_P(Iq1Tables, VecDotMatchesScalarWithinBound) {
  for (const int64_t n : kLengths) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type_, n, seed);
      const auto a = make_activations(n, seed + 100);
      const Reference ref = reference(type_, w.data(), a.data(), n);
      const float expect = scalar_traits(type_).vec_dot(n, w.data(), a.data());
      EXPECT_NEAR(traits_->vec_dot(n, w.data(), a.data()), expect, ref.tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

// Extreme operands, activations all +-127: the first block with every bit set after d (index
// 2047 = all +1, ls = 15, negative deltas), the second with every bit clear (index 0 = all -1,
// ls = 1, positive deltas). No integer step may saturate or overflow.
TEST_P(Iq1Tables, ExtremeOperandsWithinBound) {
  const int64_t n = 512;
  auto w = make_weights(type_, n, 3);
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(type_))->type_size);
  std::memset(w.data(), 0xFF, block_bytes);
  std::memset(w.data() + block_bytes, 0x00, block_bytes);
  set_scale(type_, w.data(), fp32_to_fp16(0.03f));
  set_scale(type_, w.data() + block_bytes, fp32_to_fp16(-0.05f));
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i * 5 % 3 == 0) ? -1.0f : 1.0f;
  std::vector<uint8_t> a(bytes_of(GgmlType::Q8_K, n));
  scalar_traits(GgmlType::Q8_K).from_float(x.data(), a.data(), n);
  const Reference ref = reference(type_, w.data(), a.data(), n);
  const float expect = scalar_traits(type_).vec_dot(n, w.data(), a.data());
  EXPECT_NEAR(expect, ref.value, ref.tolerance);
  EXPECT_NEAR(traits_->vec_dot(n, w.data(), a.data()), expect, ref.tolerance);
  EXPECT_EQ(rows(n, w.data(), a.data(), a.size(), 1)[0], traits_->vec_dot(n, w.data(), a.data()));
}

// As Iq1Scalar.IntegerOperandsGiveExactResult: no rounding anywhere, so every table is exact.
TEST_P(Iq1Tables, IntegerOperandsGiveExactResult) {
  for (const int64_t n : {256, 512}) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      const auto w = make_weights(type_, n, seed, 1.0f);
      const auto a = make_integer_activations(n, 40, seed + 7);
      const float exact = exact_dot(type_, w.data(), a.data(), n);
      EXPECT_EQ(traits_->vec_dot(n, w.data(), a.data()), exact) << "n=" << n << " seed=" << seed;
      EXPECT_EQ(rows(n, w.data(), a.data(), a.size(), 1)[0], exact) << "n=" << n;
    }
  }
}

// Batch invariance: vec_dot_rows over n_act rows (padded stride, strided output) gives each row
// exactly this table's vec_dot of it.
TEST_P(Iq1Tables, VecDotRowsIsBitIdenticalToVecDot) {
  for (const int64_t n : kLengths) {
    const auto w = make_weights(type_, n, uint32_t(n));
    const size_t act_bytes = bytes_of(GgmlType::Q8_K, n);
    const size_t stride = act_bytes + 64;  // rows need not be packed
    constexpr int64_t kMaxActs = 8;
    std::vector<uint8_t> acts(stride * kMaxActs, 0xCD);
    for (int64_t t = 0; t < kMaxActs; ++t) {
      const auto a = make_activations(n, uint32_t(1000 + t));
      std::memcpy(acts.data() + size_t(t) * stride, a.data(), act_bytes);
    }
    for (const int64_t n_act : {1, 2, 3, 5, 8}) {
      const auto out = rows(n, w.data(), acts.data(), stride, n_act);
      for (int64_t t = 0; t < n_act; ++t) {
        const uint8_t* a = acts.data() + size_t(t) * stride;
        EXPECT_EQ(out[size_t(t)], traits_->vec_dot(n, w.data(), a))
            << "n=" << n << " n_act=" << n_act << " t=" << t;
      }
    }
  }
}

std::vector<TableType> table_types() {
  std::vector<TableType> out;
  const size_t n_tables = tables().size();
  for (size_t i = 0; i < n_tables; ++i) {
    for (const GgmlType t : kTypes) out.emplace_back(int(i), t);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, Iq1Tables, testing::ValuesIn(table_types()),
                         [](const testing::TestParamInfo<TableType>& info) {
                           return tables()[size_t(std::get<0>(info.param))].name + "_" +
                                  ggml_type_name(uint32_t(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace vela

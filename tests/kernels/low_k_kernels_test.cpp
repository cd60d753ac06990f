// Q2_K, Q3_K, TQ1_0 and TQ2_0 dot products with Q8_K activations, in every kernel table this CPU
// can run (supported_kernel_isas()): the scalar vec_dot equals the double-precision dot of the
// decoded operands within 4e-5 * sum |w_i a_i|; every table's vec_dot agrees with the scalar one
// within that bound (exactly, where all operands are small integers); and every table's
// vec_dot_rows gives exactly its own vec_dot for each activation row (batch invariance).
// Weights are arbitrary bytes with finite fp16 scales: every bit pattern is a valid block.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "block_kernel_checks.h"
#include "dot_reference.h"
#include "kernels/cpu_features.h"
#include "kernels/type_traits.h"
#include "quant/blocks_low_k.h"
#include "util/half.h"

namespace vela {
namespace {

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0, GgmlType::TQ2_0};

// Lengths: one super-block, a typical row, and 13 super-blocks (odd, and a multiple of no SIMD
// unroll or row tile).
const int64_t kLengths[] = {256, 4096, 13 * 256};

using test::bytes_of;
using test::scalar_traits;

void set_half(uint8_t* p, float value) {
  const uint16_t h = fp32_to_fp16(value);
  std::memcpy(p, &h, sizeof(h));
}

// Byte offsets of a block's fp16 scale fields (Q2_K: d and dmin).
std::vector<size_t> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case GgmlType::TQ1_0:
      return {offsetof(BlockTQ1_0, d)};
    default:
      return {offsetof(BlockTQ2_0, d)};
  }
}

// One weight row of n elements: arbitrary bytes, then each fp16 scale set to scale().
template <class ScaleFn>
std::vector<uint8_t> weights(GgmlType type, int64_t n, uint32_t seed, ScaleFn scale) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(bytes_of(type, n));
  for (uint8_t& b : row) b = uint8_t(rng());
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(type))->type_size);
  for (size_t at = 0; at < row.size(); at += block_bytes) {
    for (size_t off : scale_offsets(type)) set_half(row.data() + at + off, scale(rng));
  }
  return row;
}

std::vector<uint8_t> random_weights(GgmlType type, int64_t n, uint32_t seed) {
  return weights(type, n, seed, [](std::mt19937& rng) {
    return 0.01f * std::normal_distribution<float>(0.0f, 1.0f)(rng);  // either sign
  });
}

// Activations [n] f32 -> n / 256 Q8_K blocks (the scalar table's conversion, which every table
// shares bit for bit). Normal values with outliers and an all-zero super-block where there is
// room; kInteger: small integers with a +-127 in each 32, so every quant is the value itself
// (up to the block scale's sign).
std::vector<uint8_t> activations(int64_t n, uint32_t seed, bool integer = false) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  if (integer) {
    std::uniform_int_distribution<int> small(-4, 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 32 == 0) ? 127.0f : float(small(rng));
  } else {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    for (size_t i = 7; i < x.size(); i += 97) x[i] *= 40.0f;
    if (n >= 1024) std::fill(x.begin() + 512, x.begin() + 768, 0.0f);
  }
  std::vector<uint8_t> act(bytes_of(GgmlType::Q8_K, n));
  scalar_traits(GgmlType::Q8_K).from_float(x.data(), act.data(), n);
  return act;
}

// ---------------------------------------------------------------------------------------------
// The scalar reference against the decoded operands

class LowKScalar : public testing::TestWithParam<GgmlType> {};

TEST_P(LowKScalar, VecDotEqualsDoubleDotOfDecodedOperands) {
  const GgmlType type = GetParam();
  const TypeTraits& traits = scalar_traits(type);
  ASSERT_EQ(traits.vec_dot_type, GgmlType::Q8_K);
  for (const int64_t n : kLengths) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      const auto w = random_weights(type, n, seed);
      const auto a = activations(n, seed + 50);
      const test::DotReference ref = test::dot_reference(type, w.data(), a.data(), n);
      EXPECT_NEAR(traits.vec_dot(n, w.data(), a.data()), ref.value, ref.tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

// Every level and scale at its extreme, against activations of +-127: the integer sums reach
// their largest magnitudes (no intermediate may saturate or wrap in any kernel).
TEST_P(LowKScalar, ExtremeLevelsAndScales) {
  const GgmlType type = GetParam();
  const int64_t n = 1024;
  for (const uint8_t fill : {uint8_t(0x00), uint8_t(0xFF), uint8_t(0xAA)}) {
    auto w = weights(type, n, 1, [](std::mt19937&) { return 1.0f; });
    const size_t block_bytes = size_t(ggml_type_info(uint32_t(type))->type_size);
    for (size_t at = 0; at < w.size(); at += block_bytes) {
      std::memset(w.data() + at, fill, size_t(scale_offsets(type).front()));
    }
    for (const float sign : {1.0f, -1.0f}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0 ? -sign : sign) * 127.0f;
      x[0] = sign * 127.0f;
      std::vector<uint8_t> a(bytes_of(GgmlType::Q8_K, n));
      scalar_traits(GgmlType::Q8_K).from_float(x.data(), a.data(), n);
      const test::DotReference ref = test::dot_reference(type, w.data(), a.data(), n);
      for (const KernelIsa isa : supported_kernel_isas()) {
        const TypeTraits* t = type_traits_for(isa, type);
        ASSERT_NE(t, nullptr);
        EXPECT_NEAR(t->vec_dot(n, w.data(), a.data()), ref.value, ref.tolerance)
            << kernel_isa_name(isa) << " fill=" << int(fill) << " sign=" << sign;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LowKScalar, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return ggml_type_name(uint32_t(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Every table against the scalar one

using IsaType = std::tuple<KernelIsa, GgmlType>;

class LowKTables : public testing::TestWithParam<IsaType> {
 protected:
  void SetUp() override {
    isa_ = std::get<0>(GetParam());
    type_ = std::get<1>(GetParam());
    traits_ = type_traits_for(isa_, type_);
    ASSERT_NE(traits_, nullptr);
    ASSERT_NE(traits_->vec_dot, nullptr);
    ASSERT_EQ(traits_->vec_dot_type, GgmlType::Q8_K);
  }

  KernelIsa isa_ = KernelIsa::kScalar;
  GgmlType type_ = GgmlType::Q2_K;
  const TypeTraits* traits_ = nullptr;
};

TEST_P(LowKTables, VecDotMatchesScalarWithinBound) {
  for (const int64_t n : kLengths) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      const auto w = random_weights(type_, n, seed);
      const auto a = activations(n, seed + 100);
      const double tolerance = test::dot_reference(type_, w.data(), a.data(), n).tolerance;
      EXPECT_NEAR(traits_->vec_dot(n, w.data(), a.data()),
                  scalar_traits(type_).vec_dot(n, w.data(), a.data()), tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

// Unit scales and integer activation quants: every partial sum is an integer below 2^24, so
// every table must give the exact dot product of the decoded operands.
TEST_P(LowKTables, IntegerDataIsExact) {
  for (const int64_t n : {int64_t(256), int64_t(512)}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = weights(type_, n, seed, [](std::mt19937&) { return 1.0f; });
      const auto a = activations(n, seed + 200, /*integer=*/true);
      const auto w_dec = test::decode(type_, w.data(), n);
      const auto a_dec = test::decode(GgmlType::Q8_K, a.data(), n);
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(w_dec[size_t(i)]) * a_dec[size_t(i)];
        magnitude += std::fabs(double(w_dec[size_t(i)]) * a_dec[size_t(i)]);
      }
      ASSERT_EQ(exact, std::round(exact));
      ASSERT_LT(magnitude, 16777216.0);
      EXPECT_EQ(traits_->vec_dot(n, w.data(), a.data()), float(exact))
          << "n=" << n << " seed=" << seed;
      if (traits_->vec_dot_rows != nullptr) {
        float out = -1.0f;
        traits_->vec_dot_rows(n, w.data(), a.data(), a.size(), 1, &out, 1);
        EXPECT_EQ(out, float(exact)) << "n=" << n << " seed=" << seed;
      }
    }
  }
}

// vec_dot_rows over n_act activation rows (padded stride, strided output) equals this table's
// vec_dot of each row bit for bit, and writes only its output slots. Every SIMD table has one;
// the scalar table leaves it null (matmul then loops vec_dot).
TEST_P(LowKTables, VecDotRowsIsBitIdenticalToVecDot) {
  if (isa_ == KernelIsa::kScalar && traits_->vec_dot_rows == nullptr) {
    GTEST_SKIP() << "the scalar table has no batched kernel";
  }
  ASSERT_NE(traits_->vec_dot_rows, nullptr);
  for (const int64_t n : kLengths) {
    const auto w = random_weights(type_, n, uint32_t(n));
    const size_t act_bytes = bytes_of(GgmlType::Q8_K, n);
    const size_t stride = act_bytes + 64;
    constexpr int64_t kMaxActs = 8;
    std::vector<uint8_t> acts(stride * kMaxActs, 0xCD);
    for (int64_t t = 0; t < kMaxActs; ++t) {
      const auto a = activations(n, uint32_t(7 * t + 1));
      std::memcpy(acts.data() + size_t(t) * stride, a.data(), act_bytes);
    }
    for (const int64_t n_act : {1, 2, 3, 5, 8}) {
      constexpr int64_t kOutStride = 3;
      std::vector<float> out(size_t(n_act * kOutStride), -7.0f);
      traits_->vec_dot_rows(n, w.data(), acts.data(), stride, n_act, out.data(), kOutStride);
      for (int64_t t = 0; t < n_act; ++t) {
        const uint8_t* a = acts.data() + size_t(t) * stride;
        EXPECT_EQ(out[size_t(t * kOutStride)], traits_->vec_dot(n, w.data(), a))
            << "n=" << n << " n_act=" << n_act << " t=" << t;
        EXPECT_EQ(out[size_t(t * kOutStride + 1)], -7.0f);
        EXPECT_EQ(out[size_t(t * kOutStride + 2)], -7.0f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, LowKTables,
                         testing::Combine(testing::ValuesIn(supported_kernel_isas()),
                                          testing::ValuesIn(kTypes)),
                         [](const testing::TestParamInfo<IsaType>& info) {
                           return std::string(kernel_isa_name(std::get<0>(info.param))) + "_" +
                                  ggml_type_name(uint32_t(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace vela

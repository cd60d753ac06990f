// Dot products of the 4-bit non-linear types (IQ4_NL and MXFP4 against Q8_0, IQ4_XS against
// Q8_K) on random valid blocks: arbitrary code and sub-scale bytes, finite sane block scales.
//  * The scalar vec_dot equals the double-precision dot of the decoded operands within
//    4e-5 * sum |w_i a_i| (tests/kernels/dot_reference.h).
//  * Every kernel table this CPU runs (supported_kernel_isas(), and for AVX-512 both the VNNI and
//    the vpmaddubsw fallback variant) agrees with the scalar vec_dot within that bound, and
//    exactly on integer operands, where no float operation rounds.
//  * Each table's vec_dot_rows equals its own vec_dot bit for bit (batch invariance), for
//    several activation counts and row lengths, one of which is no multiple of any unroll.
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
#include "quant/blocks_nonlinear4.h"
#include "util/half.h"

namespace vela {
namespace {

const GgmlType kTypes[] = {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

// Row lengths: 256 and 4096, and one that is no multiple of any kernel's unroll: 23 blocks of 32
// (the 512-bit kernels take 4, then 2, then 1 block; the 256-bit ones 2, then 1), 7 IQ4_XS
// super-blocks.
std::vector<int64_t> lengths(GgmlType type) {
  return {256, 4096, type == GgmlType::IQ4_XS ? 7 * 256 : 23 * 32};
}

int64_t block_elements(GgmlType type) {
  return ggml_type_info(uint32_t(type))->block_size;
}

size_t block_bytes(GgmlType type) {
  return size_t(ggml_type_info(uint32_t(type))->type_size);
}

using test::bytes_of;
using test::decode_scalar;
using test::scalar_traits;

// Sets a block's scale field: the fp16 d of IQ4_NL / IQ4_XS (first two bytes), or MXFP4's e8m0
// byte, to `scale` (fp16 value, or the e8m0 byte for MXFP4).
void set_block_scale(GgmlType type, uint8_t* block, float scale) {
  if (type == GgmlType::MXFP4) {
    block[0] = uint8_t(scale);
  } else {
    const uint16_t h = fp32_to_fp16(scale);
    std::memcpy(block, &h, sizeof(h));
  }
}

// A weight row of n elements: arbitrary bytes, each block's scale random and finite (fp16 d of
// either sign around 0.01; MXFP4 exponents 2^-9 .. 2^7), every 7th block's zero.
std::vector<uint8_t> make_weights(GgmlType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(bytes_of(type, n));
  for (uint8_t& b : row) b = uint8_t(rng());
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::uniform_int_distribution<int> exponent(119, 135);
  size_t index = 0;
  for (size_t at = 0; at < row.size(); at += block_bytes(type), ++index) {
    const bool zero = index % 7 == 6;
    if (type == GgmlType::MXFP4) {
      set_block_scale(type, &row[at], zero ? 0.0f : float(exponent(rng)));
      if (zero) std::memset(&row[at + 1], 0x88, 16);  // codes 8: -0, so the block is zero
    } else {
      set_block_scale(type, &row[at], zero ? 0.0f : normal(rng));
    }
  }
  return row;
}

// Activations of the weight type's vec_dot_type from n normal values with outliers (which
// quantize to +-127 in their block) and, for n >= 512, a zero super-block.
std::vector<uint8_t> make_activations(GgmlType w_type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (size_t i = 3; i < x.size(); i += 71) x[i] *= 30.0f;
  if (n >= 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  const TypeTraits& t = scalar_traits(w_type);
  std::vector<uint8_t> act(bytes_of(t.vec_dot_type, n));
  t.from_float(x.data(), act.data(), n);
  return act;
}

// Activations whose quants are integers in [-limit, limit] with a scale of exactly +-1: every
// activation block (32 or 256 elements) starts with 127.
std::vector<uint8_t> make_integer_activations(GgmlType w_type, int64_t n, int limit,
                                              uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-limit, limit);
  const TypeTraits& t = scalar_traits(w_type);
  const int64_t act_block = block_elements(t.vec_dot_type);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % act_block == 0 ? 127.0f : float(value(rng));
  std::vector<uint8_t> act(bytes_of(t.vec_dot_type, n));
  t.from_float(x.data(), act.data(), n);
  return act;
}

// ---------------------------------------------------------------------------------------------
// Tables under test

struct Table {
  std::string name;
  const TypeTraits* (*get)(GgmlType);
};

// The AVX-512 table with VNNI forced on or off (so the fallback is covered on a VNNI CPU); only
// built where the CPU runs AVX-512.
template <bool kVnni>
const TypeTraits* avx512_with_vnni(GgmlType type) {
  static const kernels::TraitsTable table = [] {
    kernels::TraitsTable t;
    for (size_t i = 0; i < t.size(); ++i) {
      const TypeTraits* avx2 = type_traits_for(KernelIsa::kAvx2, static_cast<GgmlType>(i));
      t[i] = avx2 != nullptr ? *avx2 : TypeTraits{GgmlType::F32, nullptr, nullptr, nullptr};
    }
    kernels::avx512::register_kernels(t, {.vnni = kVnni, .bf16 = false});
    return t;
  }();
  return &table[static_cast<size_t>(type)];
}

std::vector<Table> tables() {
  std::vector<Table> out;
  for (const KernelIsa isa : supported_kernel_isas()) {
    if (isa == KernelIsa::kScalar) {
      out.push_back({"scalar", [](GgmlType t) { return type_traits_for(KernelIsa::kScalar, t); }});
    } else if (isa == KernelIsa::kAvx2) {
      out.push_back({"avx2", [](GgmlType t) { return type_traits_for(KernelIsa::kAvx2, t); }});
    } else if (isa == KernelIsa::kAvx512) {
      out.push_back({"avx512", [](GgmlType t) { return type_traits_for(KernelIsa::kAvx512, t); }});
      out.push_back({"avx512_vnni", avx512_with_vnni<true>});
      out.push_back({"avx512_novnni", avx512_with_vnni<false>});
    }
  }
  return out;
}

std::string type_name(GgmlType type) {
  return ggml_type_name(uint32_t(type));
}

// ---------------------------------------------------------------------------------------------
// The scalar reference

class Nonlinear4Scalar : public testing::TestWithParam<GgmlType> {};

TEST_P(Nonlinear4Scalar, PairsAsGgml) {
  const GgmlType type = GetParam();
  const TypeTraits& t = scalar_traits(type);
  EXPECT_EQ(t.vec_dot_type, type == GgmlType::IQ4_XS ? GgmlType::Q8_K : GgmlType::Q8_0);
  EXPECT_NE(t.vec_dot, nullptr);
  EXPECT_NE(t.from_float, nullptr);
  EXPECT_EQ(type_traits(type)->vec_dot_type, t.vec_dot_type);
}

TEST_P(Nonlinear4Scalar, VecDotEqualsDoubleDotOfDecodedOperands) {
  const GgmlType type = GetParam();
  for (const int64_t n : lengths(type)) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type, n, seed);
      const auto a = make_activations(type, n, seed + 100);
      const test::DotReference ref = test::dot_reference(type, w.data(), a.data(), n);
      EXPECT_NEAR(scalar_traits(type).vec_dot(n, w.data(), a.data()), ref.value, ref.tolerance)
          << "n=" << n << " seed=" << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Nonlinear4Scalar, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return type_name(info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Every table against the scalar one

class Nonlinear4Tables : public testing::TestWithParam<std::tuple<int, GgmlType>> {
 protected:
  void SetUp() override {
    const std::vector<Table> all = tables();
    const size_t index = size_t(std::get<0>(GetParam()));
    if (index >= all.size()) GTEST_SKIP() << "this CPU does not run that table";
    table_ = all[index];
    type_ = std::get<1>(GetParam());
    traits_ = table_.get(type_);
    ASSERT_NE(traits_, nullptr);
    ASSERT_NE(traits_->vec_dot, nullptr);
    ASSERT_EQ(traits_->vec_dot_type, scalar_traits(type_).vec_dot_type);
  }

  Table table_;
  GgmlType type_ = GgmlType::F32;
  const TypeTraits* traits_ = nullptr;
};

TEST_P(Nonlinear4Tables, VecDotMatchesScalarWithinBound) {
  for (const int64_t n : lengths(type_)) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto w = make_weights(type_, n, seed);
      const auto a = make_activations(type_, n, seed + 200);
      const test::DotReference ref = test::dot_reference(type_, w.data(), a.data(), n);
      const float expected = scalar_traits(type_).vec_dot(n, w.data(), a.data());
      EXPECT_NEAR(traits_->vec_dot(n, w.data(), a.data()), expected, ref.tolerance)
          << table_.name << " n=" << n << " seed=" << seed;
    }
  }
}

// Scale 1 weights (fp16 d = 1, MXFP4 e = 128) and integer activations with scale +-1: every
// partial sum is an integer below 2^24, so each table must give the exact dot product.
TEST_P(Nonlinear4Tables, IntegerOperandsGiveExactResult) {
  // IQ4_XS: |sub-scale| <= 32 multiplies its sums, so smaller activations keep a super-block
  // below 2^24 (32 * (127 * 127 + 255 * 127 * 8) < 2^24).
  const int limit = type_ == GgmlType::IQ4_XS ? 8 : 40;
  const int64_t n = type_ == GgmlType::IQ4_XS ? 256 : 23 * 32;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    auto w = make_weights(type_, n, seed);
    for (size_t at = 0; at < w.size(); at += block_bytes(type_))
      set_block_scale(type_, &w[at], type_ == GgmlType::MXFP4 ? 128.0f : 1.0f);
    const auto a = make_integer_activations(type_, n, limit, seed + 300);
    const auto wd = decode_scalar(type_, w.data(), n);
    const auto ad = decode_scalar(traits_->vec_dot_type, a.data(), n);
    double exact = 0;
    for (size_t i = 0; i < size_t(n); ++i) exact += double(wd[i]) * double(ad[i]);
    ASSERT_LT(std::fabs(exact), 16777216.0);
    EXPECT_EQ(traits_->vec_dot(n, w.data(), a.data()), float(exact))
        << table_.name << " seed=" << seed;
  }
}

TEST_P(Nonlinear4Tables, VecDotRowsIsBitIdenticalToVecDot) {
  if (traits_->vec_dot_rows == nullptr) {
    // Only the scalar table leaves it unset (the matmul then loops vec_dot).
    EXPECT_EQ(table_.name, "scalar");
    return;
  }
  const GgmlType act_type = traits_->vec_dot_type;
  for (const int64_t n : lengths(type_)) {
    const auto w = make_weights(type_, n, 7);
    // Rows padded by 64 bytes, to catch a kernel that ignores act_stride.
    const size_t stride = bytes_of(act_type, n) + 64;
    for (const int64_t n_act : {1, 2, 3, 5, 8}) {
      std::vector<uint8_t> act(stride * size_t(n_act), 0xCD);
      for (int64_t r = 0; r < n_act; ++r) {
        const auto row = make_activations(type_, n, uint32_t(400 + r));
        std::memcpy(act.data() + size_t(r) * stride, row.data(), row.size());
      }
      constexpr int64_t kOutStride = 3;
      std::vector<float> out(size_t(n_act * kOutStride), -1.0f);
      traits_->vec_dot_rows(n, w.data(), act.data(), stride, n_act, out.data(), kOutStride);
      for (int64_t r = 0; r < n_act; ++r) {
        const float one = traits_->vec_dot(n, w.data(), act.data() + size_t(r) * stride);
        const float batched = out[size_t(r * kOutStride)];
        EXPECT_EQ(std::memcmp(&one, &batched, sizeof(float)), 0)
            << table_.name << " n=" << n << " n_act=" << n_act << " row " << r << ": " << one
            << " vs " << batched;
      }
    }
  }
}

// Table indices cover the most any CPU has (scalar, avx2, avx512 and its two variants); those
// this CPU does not run skip.
std::string table_type_name(const testing::TestParamInfo<std::tuple<int, GgmlType>>& info) {
  static const char* const kNames[] = {"scalar", "avx2", "avx512", "avx512_vnni", "avx512_novnni"};
  return std::string(kNames[std::get<0>(info.param)]) + "_" + type_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, Nonlinear4Tables,
                         testing::Combine(testing::Range(0, 5), testing::ValuesIn(kTypes)),
                         table_type_name);

}  // namespace
}  // namespace vela

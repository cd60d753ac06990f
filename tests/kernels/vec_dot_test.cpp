// The dispatch table pairs types as ggml's CPU backend does, and every scalar vec_dot equals the
// float dot product of its decoded operands.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "dot_reference.h"
#include "kernels/type_traits.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"

namespace vela {
namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

TEST(TypeTraits, VecDotTypePairs) {
  struct Pair {
    GgmlType weight, activation;
  };
  const Pair pairs[] = {
      {GgmlType::F32, GgmlType::F32},   {GgmlType::F16, GgmlType::F32},
      {GgmlType::BF16, GgmlType::BF16}, {GgmlType::Q4_0, GgmlType::Q8_0},
      {GgmlType::Q5_0, GgmlType::Q8_0}, {GgmlType::Q8_0, GgmlType::Q8_0},
      {GgmlType::Q4_1, GgmlType::Q8_1}, {GgmlType::Q5_1, GgmlType::Q8_1},
      {GgmlType::Q4_K, GgmlType::Q8_K}, {GgmlType::Q5_K, GgmlType::Q8_K},
      {GgmlType::Q6_K, GgmlType::Q8_K},
  };
  for (const Pair& p : pairs) {
    const TypeTraits* t = type_traits(p.weight);
    ASSERT_NE(t, nullptr) << ggml_type_name(uint32_t(p.weight));
    EXPECT_EQ(t->vec_dot_type, p.activation) << ggml_type_name(uint32_t(p.weight));
    EXPECT_NE(t->vec_dot, nullptr);
    EXPECT_NE(t->to_float, nullptr);
    EXPECT_NE(t->from_float, nullptr);
    // from_float produces the activation type: it is that type's own from_float.
    EXPECT_EQ(t->from_float, type_traits(p.activation)->from_float);
  }
}

TEST(TypeTraits, ActivationOnlyAndUnsupportedTypes) {
  for (GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K}) {
    const TypeTraits* traits = type_traits(t);
    ASSERT_NE(traits, nullptr);
    EXPECT_EQ(traits->vec_dot, nullptr);
    EXPECT_NE(traits->from_float, nullptr);
    EXPECT_NE(traits->to_float, nullptr);
  }
  for (GgmlType t : {GgmlType::I8, GgmlType::I32, GgmlType::F64}) {
    EXPECT_EQ(type_traits(t), nullptr) << ggml_type_name(uint32_t(t));
  }
  EXPECT_EQ(type_traits(static_cast<GgmlType>(33)), nullptr);  // a removed type number
  EXPECT_EQ(type_traits(static_cast<GgmlType>(1000)), nullptr);
  EXPECT_EQ(type_traits_for(active_kernel_isa(), GgmlType::Q4_K), type_traits(GgmlType::Q4_K));
}

// Whatever the reader accepts as a weight type decodes, quantizes and multiplies in every table:
// a file that opens never meets a missing kernel, and `vela quantize` can make every type.
TEST(TypeTraits, EveryLoadableWeightTypeHasItsKernels) {
  int loadable = 0;
  for (uint32_t type = 0; type < 64; ++type) {
    if (!is_supported_weight_type(type)) continue;
    ++loadable;
    const GgmlType t = static_cast<GgmlType>(type);
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(type);
    EXPECT_TRUE(can_quantize(t)) << ggml_type_name(type);
    for (KernelIsa isa : supported_kernel_isas()) {
      const TypeTraits* traits = type_traits_for(isa, t);
      ASSERT_NE(traits, nullptr) << ggml_type_name(type);
      EXPECT_NE(traits->to_float, nullptr) << ggml_type_name(type);
      EXPECT_NE(traits->vec_dot, nullptr) << ggml_type_name(type);
      EXPECT_NE(traits->from_float, nullptr) << ggml_type_name(type);
    }
  }
  EXPECT_EQ(loadable, 25);  // F32, F16, BF16, 8 legacy and K types, 14 low-bit types
}

class VecDot : public testing::TestWithParam<GgmlType> {};

TEST_P(VecDot, EqualsFloatDotOfDecodedOperands) {
  const GgmlType w_type = GetParam();
  const TypeTraits* traits = type_traits(w_type);
  const auto act_info = *ggml_type_info(uint32_t(traits->vec_dot_type));
  for (const int64_t n : {int64_t(256), int64_t(4096)}) {
    for (uint32_t seed = 0; seed < 8; ++seed) {
      auto w = test::normal_values(n, 0.02f, seed);
      auto x = test::normal_values(n, 1.0f, seed + 1000);
      if (seed % 2 == 1) {  // shifted weights exercise the affine offsets; spikes the scales
        for (auto& v : w) v += 0.03f;
        x[size_t(seed * 7)] = 25.0f;
      }
      const auto w_row = test::encode(w_type, w);
      std::vector<uint8_t> act(size_t(row_bytes(act_info, n)));
      traits->from_float(x.data(), act.data(), n);
      const float got = traits->vec_dot(n, w_row.data(), act.data());
      const auto ref = test::dot_reference(w_type, w_row.data(), act.data(), n);
      EXPECT_NEAR(got, ref.value, ref.tolerance)
          << ggml_type_name(uint32_t(w_type)) << " n=" << n << " seed=" << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, VecDot, testing::ValuesIn(kWeightTypes),
                         [](const auto& info) { return ggml_type_name(uint32_t(info.param)); });

// Small integers with unit scales: every step is exact, so the result must be exactly the
// integer dot product.
TEST(VecDotExact, Q8_0UnitScales) {
  BlockQ8_0 w[2], a[2];
  int expect = 0;
  for (int b = 0; b < 2; ++b) {
    w[b].d = 0x3C00;  // 1.0
    a[b].d = 0x3C00;
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = int8_t((j * 7 + b) % 255 - 127);
      a[b].qs[j] = int8_t(j - 16 + b);
      expect += w[b].qs[j] * a[b].qs[j];
    }
  }
  EXPECT_EQ(type_traits(GgmlType::Q8_0)->vec_dot(64, w, a), float(expect));
}

TEST(VecDotExact, Q4_KUsesMinsThroughBlockSums) {
  // All weights level 0 with min 1 and dmin 1: each weight is -1 (scales 0), so the dot is
  // -sum(activations), computed purely from Q8_K's bsums.
  BlockQ4_K w;
  std::memset(&w, 0, sizeof(w));
  w.d = 0x3C00;
  w.dmin = 0x3C00;
  uint8_t sc[8] = {}, mn[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  k_pack_scale_min(sc, mn, w.scales);
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[size_t(i)] = float(i % 9) - 4.0f;
  x[0] = -127.0f;  // makes the Q8_K scale exactly 1
  BlockQ8_K a;
  type_traits(GgmlType::Q4_K)->from_float(x.data(), &a, 256);
  ASSERT_EQ(a.d, 1.0f);
  float sum = 0;
  for (float v : x) sum += v;
  EXPECT_EQ(type_traits(GgmlType::Q4_K)->vec_dot(256, &w, &a), -sum);
}

}  // namespace
}  // namespace vela

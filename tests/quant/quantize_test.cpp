// Quantize -> dequantize round trips within each format's error bound, fp16/bf16 conversions, and
// the ggml rounding rules that make activations quantize identically to ggml.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "error_bounds.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "util/half.h"

namespace vela {
namespace {

int64_t block_size(GgmlType t) {
  return ggml_type_info(uint32_t(t))->block_size;
}
size_t bytes_for(GgmlType t, int64_t n) {
  return size_t(row_bytes(*ggml_type_info(uint32_t(t)), n));
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const auto n = int64_t(x.size());
  std::vector<uint8_t> q(bytes_for(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// Test data: normal values, with every 7th block scaled up (wide dynamic range across blocks),
// a few outliers, an all-zero block, a constant block and a single-spike block.
std::vector<float> test_data(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float block_scale = (i / 256) % 7 == 3 ? 40.0f : ((i / 32) % 5 == 1 ? 0.01f : 1.0f);
    x[size_t(i)] = normal(rng) * block_scale;
  }
  for (int64_t i = 97; i < n; i += 613) x[size_t(i)] *= 9.0f;          // outliers
  for (int64_t i = 256; i < 512 && i < n; ++i) x[size_t(i)] = 0.0f;    // zero block
  for (int64_t i = 512; i < 768 && i < n; ++i) x[size_t(i)] = -0.75f;  // constant block
  if (n >= 1024) {
    for (int64_t i = 768; i < 1024; ++i) x[size_t(i)] = 0.0f;
    x[800] = 3.0f;  // single spike
  }
  return x;
}

class RoundTrip : public testing::TestWithParam<GgmlType> {};

TEST_P(RoundTrip, WithinClosedFormBound) {
  const GgmlType type = GetParam();
  const int64_t n = 4096;
  const auto x = test_data(n, 1234);
  const auto y = round_trip(type, x);
  const int64_t bs = block_size(type) == 1 ? 32 : block_size(type);
  for (int64_t b = 0; b < n / bs; ++b) {
    const float bound = test::block_error_bound(type, x.data() + b * bs, bs);
    ASSERT_GE(bound, 0.0f);
    for (int64_t i = b * bs; i < (b + 1) * bs; ++i) {
      ASSERT_LE(std::fabs(x[size_t(i)] - y[size_t(i)]), bound)
          << ggml_type_name(uint32_t(type)) << " element " << i << " x=" << x[size_t(i)];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RoundTrip,
                         testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                         GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                         GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1,
                                         GgmlType::Q8_K),
                         [](const auto& info) { return ggml_type_name(uint32_t(info.param)); });

class KRoundTrip : public testing::TestWithParam<GgmlType> {};

TEST_P(KRoundTrip, NormalDataWithinRmsBound) {
  const GgmlType type = GetParam();
  const int64_t n = 256 * 64;
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 0.02f);  // the scale of typical LLM weights
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  const auto y = round_trip(type, x);
  double err2 = 0, sig2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err2 += double(x[i] - y[i]) * double(x[i] - y[i]);
    sig2 += double(x[i]) * double(x[i]);
  }
  const double rel = std::sqrt(err2 / sig2);
  EXPECT_LE(rel, test::k_type_relative_rms_bound(type)) << ggml_type_name(uint32_t(type));
  // Not absurdly good either: that would mean the check compares the wrong things.
  EXPECT_GE(rel, test::k_type_relative_rms_bound(type) / 10);
}

// Quantization step of element i (0..255) of super-block b, read from the encoded block.
float k_step(GgmlType type, const uint8_t* q, int64_t b, int64_t i) {
  if (type == GgmlType::Q6_K) {
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(q)[b];
    return std::fabs(fp16_to_fp32(blk.d) * float(blk.scales[i / 16]));
  }
  uint8_t sc, mn;
  if (type == GgmlType::Q4_K) {
    const auto& blk = reinterpret_cast<const BlockQ4_K*>(q)[b];
    k_scale_min(int(i / 32), blk.scales, &sc, &mn);
    return fp16_to_fp32(blk.d) * float(sc);
  }
  const auto& blk = reinterpret_cast<const BlockQ5_K*>(q)[b];
  k_scale_min(int(i / 32), blk.scales, &sc, &mn);
  return fp16_to_fp32(blk.d) * float(sc);
}

// The offset quantum dmin of a Q4_K/Q5_K super-block (0 for Q6_K, which has no offsets).
float k_dmin(GgmlType type, const uint8_t* q, int64_t b) {
  if (type == GgmlType::Q4_K) return fp16_to_fp32(reinterpret_cast<const BlockQ4_K*>(q)[b].dmin);
  if (type == GgmlType::Q5_K) return fp16_to_fp32(reinterpret_cast<const BlockQ5_K*>(q)[b].dmin);
  return 0.0f;
}

// Per-element bounds, with steps read from the encoded blocks.
// * Super-blocks whose sub-blocks have similar ranges (real weights): half a step from rounding
//   to the nearest level, plus up to one step where an extreme value falls outside the grid and
//   clamps to the end level (the scale search may trim the range, and rounding the sub-block
//   scale to 6 bits shrinks the grid by up to half a super-scale unit per level), plus up to
//   dmin from rounding the sub-block's offset to its 6-bit multiple of dmin (Q4_K/Q5_K).
// * Sub-blocks 100x smaller than their neighbours (the test data's mixed blocks): their scale
//   and offset are quantized relative to the super-block's largest, so the format only
//   guarantees precision relative to that: the same bound with the coarsest step.
TEST_P(KRoundTrip, EachElementWithinStepBound) {
  const GgmlType type = GetParam();
  const int64_t n = 256 * 32;
  for (const bool mixed : {false, true}) {
    std::vector<float> x;
    if (mixed) {
      x = test_data(n, 77);
    } else {
      std::mt19937 rng(5);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      x.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = normal(rng) * (1.0f + float(i / 256 % 4));
      for (int64_t i = 33; i < n; i += 401) x[size_t(i)] *= 6.0f;  // outliers
    }
    std::vector<uint8_t> q(bytes_for(type, n));
    quantize_row(type, x.data(), q.data(), n);
    std::vector<float> y(x.size());
    dequantize_row(type, q.data(), y.data(), n);
    float worst_ratio = 0;  // largest error / step seen, for the failure message
    for (int64_t b = 0; b < n / 256; ++b) {
      const float dmin = k_dmin(type, q.data(), b);
      float max_step = 0, amax = 0;
      for (int64_t i = 0; i < 256; ++i) {
        max_step = std::max(max_step, k_step(type, q.data(), b, i));
        amax = std::max(amax, std::fabs(x[size_t(b * 256 + i)]));
      }
      for (int64_t i = 0; i < 256; ++i) {
        const size_t k = size_t(b * 256 + i);
        const float step = mixed ? max_step : k_step(type, q.data(), b, i);
        const float bound = 1.5f * step + dmin + 1e-6f * amax;
        if (step > 0) worst_ratio = std::max(worst_ratio, std::fabs(x[k] - y[k]) / step);
        ASSERT_LE(std::fabs(x[k] - y[k]), bound) << ggml_type_name(uint32_t(type)) << " mixed "
                                                 << mixed << " block " << b << " element " << i;
      }
    }
    std::printf("%s mixed=%d: worst error %.3f steps\n", ggml_type_name(uint32_t(type)).c_str(),
                int(mixed), worst_ratio);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KRoundTrip,
                         testing::Values(GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const auto& info) { return ggml_type_name(uint32_t(info.param)); });

TEST(HalfConversion, EveryFp16RoundTripsThroughFp32) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    if (std::isnan(f)) continue;
    uint16_t back;
    quantize_row_f16(&f, &back, 1);
    ASSERT_EQ(back, h) << std::hex << h;
  }
}

TEST(HalfConversion, EveryBf16RoundTripsThroughFp32) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_fp32(uint16_t(b));
    if (std::isnan(f)) continue;
    uint16_t back;
    quantize_row_bf16(&f, &back, 1);
    ASSERT_EQ(back, b) << std::hex << b;
  }
}

TEST(HalfConversion, RoundsToNearestEven) {
  // 1 + 2^-11 is exactly between fp16 1.0 and 1 + 2^-10: ties go to the even significand (1.0);
  // 1 + 3 * 2^-11 lies between 1 + 2^-10 and 1 + 2^-9 and goes up to the even 1 + 2^-9.
  const float in[4] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f};
  uint16_t h[4];
  quantize_row_f16(in, h, 4);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0x3C02);
  EXPECT_EQ(h[2], 0x7BFF);  // largest finite half
  EXPECT_EQ(h[3], 0x7C00);  // rounds to infinity
  // bf16: 1 + 2^-8 is a tie between 1.0 and 1 + 2^-7: even wins.
  const float bin[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  uint16_t b[2];
  quantize_row_bf16(bin, b, 2);
  EXPECT_EQ(b[0], 0x3F80);
  EXPECT_EQ(b[1], 0x3F82);
}

// Rules below are ggml's reference quantizers'; activations must quantize to the same bytes.
TEST(GgmlRules, Q8_0RoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1 exactly
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  BlockQ8_0 blk;
  quantize_row(GgmlType::Q8_0, x.data(), &blk, 32);
  EXPECT_EQ(blk.d, 0x3C00);
  EXPECT_EQ(blk.qs[0], 127);
  EXPECT_EQ(blk.qs[1], 3);
  EXPECT_EQ(blk.qs[2], -3);
  EXPECT_EQ(blk.qs[3], 4);
}

TEST(GgmlRules, Q8_1CarriesScaledSum) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -27.0f;
  x[2] = 10.0f;
  BlockQ8_1 blk;
  quantize_row(GgmlType::Q8_1, x.data(), &blk, 32);
  EXPECT_EQ(fp16_to_fp32(blk.d), 1.0f);
  EXPECT_EQ(fp16_to_fp32(blk.s), 110.0f);  // d * (127 - 27 + 10)
}

TEST(GgmlRules, Q4_0MapsLargestMagnitudeToMinus8) {
  std::vector<float> x(32, 0.0f);
  x[0] = 8.0f;   // largest magnitude, positive: d = 8 / -8 = -1, level 0
  x[1] = -8.0f;  // would need level 16: clamped to 15, decodes to -7
  x[2] = 2.5f;   // 2.5 * -1 + 8.5 = 6 -> level 6 -> (6 - 8) * -1 = 2
  x[3] = 1.5f;   // 1.5 * -1 + 8.5 = 7 -> level 7 -> 1: the tie between 1 and 2 goes to level 7
  BlockQ4_0 blk;
  quantize_row(GgmlType::Q4_0, x.data(), &blk, 32);
  EXPECT_EQ(blk.d, 0xBC00);  // -1
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q4_0, &blk, y.data(), 32);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], -7.0f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], 0.0f);
}

TEST(GgmlRules, Q8_KScaleAndBlockSums) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[size_t(i)] = float(i % 16) * 0.1f - 0.8f;
  x[200] = -2.54f;  // largest magnitude: inv_d = -127 / max maps it to -127
  BlockQ8_K blk;
  quantize_row(GgmlType::Q8_K, x.data(), &blk, 256);
  EXPECT_EQ(blk.d, 1.0f / (-127.0f / -2.54f));
  EXPECT_EQ(blk.qs[200], -127);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += blk.qs[16 * g + i];
    EXPECT_EQ(blk.bsums[g], sum) << g;
  }
  // Ties round to even: x = 0.5 / inv_d lands exactly on 0.5 when inv_d is a power of two.
  std::vector<float> t(256, 0.0f);
  t[0] = -127.0f;  // inv_d = 1
  t[1] = 0.5f;
  t[2] = 1.5f;
  t[3] = -2.5f;
  quantize_row(GgmlType::Q8_K, t.data(), &blk, 256);
  EXPECT_EQ(blk.d, 1.0f);
  EXPECT_EQ(blk.qs[0], -127);
  EXPECT_EQ(blk.qs[1], 0);   // 0.5 -> 0 (even)
  EXPECT_EQ(blk.qs[2], 2);   // 1.5 -> 2 (even)
  EXPECT_EQ(blk.qs[3], -2);  // -2.5 -> -2 (even)
}

TEST(GgmlRules, ZeroBlocksQuantizeToZero) {
  const std::vector<float> x(256, 0.0f);
  for (GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
        GgmlType::Q8_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    const auto y = round_trip(t, x);
    for (float v : y) ASSERT_EQ(v, 0.0f) << ggml_type_name(uint32_t(t));
  }
}

}  // namespace
}  // namespace vela

// Decoding of the 4-bit non-linear types (IQ4_NL, IQ4_XS, MXFP4) on hand-built blocks. The
// expected values are computed here from the formats' definitions, independently of the tables
// and helpers in quant/blocks_nonlinear4.h: IQ4's level grid written out again, e2m1 values
// from their sign / exponent / mantissa bits, e8m0 scales as 2^(e - 127) by std::ldexp, and the
// IQ4_XS scale packing done bit by bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks_nonlinear4.h"
#include "quant/dequantize.h"
#include "util/half.h"

namespace vela {
namespace {

// IQ4_NL / IQ4_XS level of each 4-bit code, as the format defines it.
constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};

// The e2m1 value of a 4-bit code: bit 3 sign, bits 1-2 exponent (bias 1), bit 0 mantissa;
// exponent 0 is subnormal (0 or 0.5).
double e2m1(int code) {
  const int sign = (code >> 3) & 1;
  const int exponent = (code >> 1) & 3;
  const int mantissa = code & 1;
  const double magnitude =
      exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
  return sign ? -magnitude : magnitude;
}

// Element i (0..31) of a 32-element group reads the low nibble of byte i for i < 16 and the high
// nibble of byte i - 16 otherwise.
int code_of(const uint8_t* qs, int i) {
  return i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4;
}

// 16 bytes holding every code twice: byte j = code j (low) | code 15 - j (high).
void fill_all_codes(uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(j | ((15 - j) << 4));
}

TEST(Nonlinear4Dequantize, IQ4_NLBlocks) {
  BlockIQ4_NL blocks[2];
  blocks[0].d = fp32_to_fp16(0.5f);
  fill_all_codes(blocks[0].qs);
  blocks[1].d = fp32_to_fp16(-0.03125f);
  for (int j = 0; j < 16; ++j) blocks[1].qs[j] = uint8_t(0x7A + 17 * j);  // arbitrary codes
  std::vector<float> y(64);
  dequantize_row(GgmlType::IQ4_NL, blocks, y.data(), 64);
  for (int b = 0; b < 2; ++b) {
    const double d = fp16_to_fp32(blocks[b].d);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(y[size_t(32 * b + i)], float(d * kLevels[code_of(blocks[b].qs, i)]))
          << "block " << b << " element " << i;
    }
  }
  // Spot values: code 0 is -127, code 15 is 113 (element 16 reads byte 0's high nibble, 15).
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
}

TEST(Nonlinear4Dequantize, IQ4_XSSuperBlock) {
  // Scales chosen to cover both ends of the 6-bit range and the zero point (32).
  const int scales[8] = {0, 1, 31, 32, 33, 47, 62, 63};
  BlockIQ4_XS blk;
  std::memset(&blk, 0, sizeof(blk));
  blk.d = fp32_to_fp16(0.25f);
  for (int j = 0; j < 8; ++j) {
    blk.scales_l[j / 2] = uint8_t(blk.scales_l[j / 2] | ((scales[j] & 0x0F) << (4 * (j % 2))));
    blk.scales_h = uint16_t(blk.scales_h | ((scales[j] >> 4) << (2 * j)));
  }
  std::mt19937 rng(7);
  for (uint8_t& q : blk.qs) q = uint8_t(rng());
  fill_all_codes(blk.qs + 16 * 5);  // one sub-block with every code
  std::vector<float> y(256);
  dequantize_row(GgmlType::IQ4_XS, &blk, y.data(), 256);
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) {
      const double expected = 0.25 * (scales[j] - 32) * kLevels[code_of(blk.qs + 16 * j, i)];
      EXPECT_EQ(y[size_t(32 * j + i)], float(expected)) << "sub-block " << j << " element " << i;
    }
  }
  // Sub-block 3 has scale 32: all zero.
  for (int i = 96; i < 128; ++i) EXPECT_EQ(y[size_t(i)], 0.0f);
}

TEST(Nonlinear4Dequantize, IQ4_XSScaleHelpersAgree) {
  // The packed form the SIMD kernels use must match the per-sub-block definition, for any bytes.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    BlockIQ4_XS blk;
    blk.scales_h = uint16_t(rng());
    for (uint8_t& s : blk.scales_l) s = uint8_t(rng());
    const uint64_t packed = iq4_xs_packed_scales(blk);
    for (int j = 0; j < 8; ++j) {
      const int six_bits =
          ((blk.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | (((blk.scales_h >> (2 * j)) & 3) << 4);
      ASSERT_EQ(iq4_xs_scale(blk, j), six_bits - 32) << trial << " " << j;
      ASSERT_EQ(int((packed >> (8 * j)) & 0xFF), six_bits) << trial << " " << j;
    }
  }
}

TEST(Nonlinear4Dequantize, MXFP4EveryCodeAndScaleByte) {
  // Every e8m0 byte, including 0 and 1 (subnormal results) and 0xFF (read as 2^128, so codes of
  // magnitude >= 1 overflow to +-Inf), with all 16 codes.
  for (int e = 0; e < 256; ++e) {
    BlockMXFP4 blk;
    blk.e = uint8_t(e);
    fill_all_codes(blk.qs);
    float y[32];
    dequantize_row(GgmlType::MXFP4, &blk, y, 32);
    for (int i = 0; i < 32; ++i) {
      const double expected = std::ldexp(e2m1(code_of(blk.qs, i)), e - 127);
      EXPECT_EQ(y[i], float(expected)) << "e " << e << " element " << i;
    }
  }
  // The kernels' lookup table holds the same scales as the decoder's formula: 2^(e - 128).
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(kE8M0HalfScales[size_t(e)], float(std::ldexp(1.0, e - 128))) << "e " << e;
    EXPECT_EQ(e8m0_half_scale(uint8_t(e)), kE8M0HalfScales[size_t(e)]) << "e " << e;
  }
  BlockMXFP4 blk;
  blk.e = 127;  // scale 1: the values themselves
  fill_all_codes(blk.qs);
  float y[32];
  dequantize_row(GgmlType::MXFP4, &blk, y, 32);
  EXPECT_EQ(y[7], 6.0f);
  EXPECT_EQ(y[15], -6.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[16 + 5], -1.0f);  // byte 5's high nibble: code 10
}

TEST(Nonlinear4Dequantize, ArbitraryBytesDecodeFinite) {
  // Any bytes with a finite fp16 scale decode to finite values (MXFP4: any scale byte < 0xFF
  // below the overflow range).
  std::mt19937 rng(11);
  std::vector<uint8_t> raw(64 * 18);  // 2048 elements of the largest of the three rows
  for (uint8_t& b : raw) b = uint8_t(rng());
  for (size_t at = 0; at < 8 * 136; at += 136) {
    const uint16_t d = fp32_to_fp16(0.01f);
    std::memcpy(raw.data() + at, &d, 2);
  }
  std::vector<float> y(2048);
  dequantize_row(GgmlType::IQ4_XS, raw.data(), y.data(), 2048);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  for (size_t at = 0; at < 64 * 18; at += 18) {
    const uint16_t d = fp32_to_fp16(-2.0f);
    std::memcpy(raw.data() + at, &d, 2);
  }
  dequantize_row(GgmlType::IQ4_NL, raw.data(), y.data(), 2048);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  for (size_t at = 0; at < 64 * 17; at += 17) raw[at] = uint8_t(100 + rng() % 100);
  dequantize_row(GgmlType::MXFP4, raw.data(), y.data(), 2048);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
}

TEST(Nonlinear4Dequantize, Supported) {
  for (GgmlType t : {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(uint32_t(t));
    EXPECT_TRUE(is_supported_weight_type(uint32_t(t))) << ggml_type_name(uint32_t(t));
  }
}

}  // namespace
}  // namespace vela

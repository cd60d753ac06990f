// IQ1_S / IQ1_M decoding: blocks are packed here from chosen fields (codebook indices, scales,
// delta signs, super-scale) following the format's bit layout, and every decoded element must
// equal d * (2 s + 1) * (g_j + delta) computed from those fields. The codebook itself is checked
// against entries copied from the format's published table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "quant/blocks_iq1.h"
#include "quant/dequantize.h"
#include "quant/dequantize_iq1.h"
#include "quant/iq1_grid.h"
#include "util/half.h"

namespace vela {
namespace {

// Element j of codebook entry `index`, read from the raw table (no decoding helper).
float grid_value(uint32_t index, int j) {
  uint8_t bytes[8];
  std::memcpy(bytes, &kIq1Grid[index], 8);
  return float(int8_t(bytes[j]));
}

// The fields of one super-block, whichever type.
struct Fields {
  uint16_t d_bits = 0x3C00;  // fp16 1.0
  uint32_t index[32] = {};   // codebook index per group of 8 (11 bits)
  bool negative[32] = {};    // delta sign per group (IQ1_S: the same for a sub-block's 4)
  uint32_t scale[16] = {};   // 3-bit s per 16 elements (IQ1_S: the same for a sub-block's 2)
};

Fields random_fields(std::mt19937& rng, bool per_sub_block) {
  Fields f;
  std::uniform_int_distribution<uint32_t> index(0, 2047), scale(0, 7), bit(0, 1);
  for (int g = 0; g < 32; ++g) {
    f.index[g] = index(rng);
    f.negative[g] = per_sub_block && g % 4 != 0 ? f.negative[g - 1] : bit(rng) == 1;
  }
  for (int k = 0; k < 16; ++k)
    f.scale[k] = per_sub_block && k % 2 == 1 ? f.scale[k - 1] : scale(rng);
  return f;
}

// Packs IQ1_S: qs[4b + l] = low index bits; qh[b] = high bits of group l at 3l, s at 12, sign 15.
BlockIQ1_S pack_iq1_s(const Fields& f) {
  BlockIQ1_S blk{};
  blk.d = f.d_bits;
  for (int b = 0; b < 8; ++b) {
    uint16_t qh = uint16_t(f.scale[2 * b] << 12 | (f.negative[4 * b] ? 0x8000 : 0));
    for (int l = 0; l < 4; ++l) {
      const uint32_t idx = f.index[4 * b + l];
      blk.qs[4 * b + l] = uint8_t(idx & 0xFF);
      qh = uint16_t(qh | (idx >> 8) << (3 * l));
    }
    blk.qh[b] = qh;
  }
  return blk;
}

// Packs IQ1_M: qh nibble g % 2 of byte g / 2 = high index bits | sign << 3; 16-bit scale word i
// holds s of scale groups 4i .. 4i+3 at bits 0, 3, 6, 9 and nibble i of d's bits at 12.
BlockIQ1_M pack_iq1_m(const Fields& f) {
  BlockIQ1_M blk{};
  for (int g = 0; g < 32; ++g) {
    blk.qs[g] = uint8_t(f.index[g] & 0xFF);
    const uint32_t nibble = (f.index[g] >> 8) | (f.negative[g] ? 8u : 0u);
    blk.qh[g / 2] = uint8_t(blk.qh[g / 2] | nibble << (4 * (g % 2)));
  }
  for (int i = 0; i < 4; ++i) {
    uint32_t word = uint32_t((f.d_bits >> (4 * i)) & 0xF) << 12;
    for (int m = 0; m < 4; ++m) word |= f.scale[4 * i + m] << (3 * m);
    blk.scales[2 * i] = uint8_t(word & 0xFF);
    blk.scales[2 * i + 1] = uint8_t(word >> 8);
  }
  return blk;
}

// [256] f32: the values the fields define.
std::vector<float> expected_values(const Fields& f) {
  std::vector<float> out(256);
  const float d = fp16_to_fp32(f.d_bits);
  for (int i = 0; i < 256; ++i) {
    const int g = i / 8;
    const float ls = float(2 * f.scale[i / 16] + 1);
    const float delta = f.negative[g] ? -0.125f : 0.125f;
    out[size_t(i)] = d * ls * (grid_value(f.index[g], i % 8) + delta);
  }
  return out;
}

TEST(Iq1Grid, MatchesPublishedEntries) {
  // Entries copied from the format's table (ggml-common.h, iq1s_grid).
  const std::pair<int, uint64_t> known[] = {
      {0, 0xffffffffffffffffull},    {1, 0xffffffffffffff01ull},    {2, 0xffffffffffff0000ull},
      {255, 0xff00ff0100000101ull},  {256, 0xff00ff01000100ffull},  {777, 0x00ff000100000000ull},
      {1024, 0x0000000000ff0100ull}, {1500, 0x01ff00ff00ffff00ull}, {2046, 0x01010101010101ffull},
      {2047, 0x0101010101010101ull}};
  for (const auto& [i, v] : known) EXPECT_EQ(kIq1Grid[i], v) << "entry " << i;
  std::set<uint64_t> distinct;
  for (int i = 0; i < kIq1GridSize; ++i) {
    distinct.insert(kIq1Grid[i]);
    for (int j = 0; j < 8; ++j) {
      const float v = grid_value(uint32_t(i), j);
      EXPECT_TRUE(v == -1.0f || v == 0.0f || v == 1.0f) << "entry " << i << " byte " << j;
      EXPECT_EQ(iq1_grid_value(uint32_t(i), j), int(v));
    }
  }
  EXPECT_EQ(distinct.size(), size_t(kIq1GridSize));
}

TEST(Iq1Dequantize, IQ1_SHandBuiltBlock) {
  // Sub-block 0: entries 0 (all -1), 1, 2, 2047 (all +1) with s = 0 and a positive delta; the
  // other sub-blocks exercise every high-bit position, each scale and both signs.
  Fields f;
  f.d_bits = fp32_to_fp16(0.5f);
  const uint32_t first[4] = {0, 1, 2, 2047};
  for (int g = 0; g < 32; ++g) f.index[g] = g < 4 ? first[g] : uint32_t((g * 389 + 7) % 2048);
  for (int b = 0; b < 8; ++b) {
    for (int l = 0; l < 4; ++l) f.negative[4 * b + l] = b % 2 == 1;
    f.scale[2 * b] = f.scale[2 * b + 1] = uint32_t(b);
  }
  const BlockIQ1_S blk = pack_iq1_s(f);
  std::vector<float> y(256);
  dequantize_row_iq1_s(&blk, y.data(), 256);
  // Spot values worked by hand: d ls (g + delta) = 0.5 * 1 * (-1 + 1/8), 0.5 * (1 + 1/8).
  EXPECT_EQ(y[0], -0.4375f);
  EXPECT_EQ(y[8], 0.5625f);   // entry 1, element 0 = +1
  EXPECT_EQ(y[9], -0.4375f);  // entry 1, element 1 = -1
  EXPECT_EQ(y[16], 0.0625f);  // entry 2, element 0 = 0
  EXPECT_EQ(y[31], 0.5625f);  // entry 2047
  const auto want = expected_values(f);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[size_t(i)], want[size_t(i)]) << "element " << i;
}

TEST(Iq1Dequantize, IQ1_MHandBuiltBlock) {
  // d = 0.25 = fp16 0x3400: its nibbles (0, 0, 4, 3) land in the top nibbles of scale words 0-3.
  Fields f;
  f.d_bits = 0x3400;
  for (int g = 0; g < 32; ++g) {
    f.index[g] = uint32_t((g * 613 + 5) % 2048);
    f.negative[g] = (g % 3) == 1;  // delta signs change every group of 8
  }
  for (int k = 0; k < 16; ++k) f.scale[k] = uint32_t((k * 5) % 8);
  f.index[0] = 2047;
  f.scale[0] = 7;
  const BlockIQ1_M blk = pack_iq1_m(f);
  EXPECT_EQ(blk.scales[1] >> 4, 0);  // word 0's top nibble = bits 0-3 of d
  EXPECT_EQ(blk.scales[5] >> 4, 4);  // word 2's top nibble = bits 8-11 of d
  EXPECT_EQ(blk.scales[7] >> 4, 3);  // word 3's top nibble = bits 12-15 of d
  EXPECT_EQ(iq1m_scale_bits(blk), 0x3400);
  std::vector<float> y(256);
  dequantize_row_iq1_m(&blk, y.data(), 256);
  EXPECT_EQ(y[0], 0.25f * 15.0f * 1.125f);  // entry 2047, s = 7, positive delta
  const auto want = expected_values(f);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[size_t(i)], want[size_t(i)]) << "element " << i;
}

TEST(Iq1Dequantize, RandomFieldsDecodeAsDefined) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> exponent(-6, 6);
  for (int trial = 0; trial < 50; ++trial) {
    for (const bool is_s : {true, false}) {
      Fields f = random_fields(rng, is_s);
      f.d_bits = fp32_to_fp16(std::ldexp(trial % 2 ? -1.3f : 0.7f, exponent(rng)));
      std::vector<float> y(256);
      if (is_s) {
        const BlockIQ1_S blk = pack_iq1_s(f);
        dequantize_row(GgmlType::IQ1_S, &blk, y.data(), 256);
      } else {
        const BlockIQ1_M blk = pack_iq1_m(f);
        dequantize_row(GgmlType::IQ1_M, &blk, y.data(), 256);
      }
      const auto want = expected_values(f);
      for (int i = 0; i < 256; ++i) {
        ASSERT_EQ(y[size_t(i)], want[size_t(i)])
            << (is_s ? "IQ1_S" : "IQ1_M") << " trial " << trial << " element " << i;
      }
    }
  }
}

TEST(Iq1Dequantize, MultipleBlocksAdvance) {
  std::mt19937 rng(3);
  Fields f[3] = {random_fields(rng, true), random_fields(rng, true), random_fields(rng, true)};
  f[1].d_bits = 0x4000;  // 2.0
  BlockIQ1_S s_blocks[3];
  for (int b = 0; b < 3; ++b) s_blocks[b] = pack_iq1_s(f[b]);
  std::vector<float> y(768);
  dequantize_row_iq1_s(s_blocks, y.data(), 768);
  for (int b = 0; b < 3; ++b) {
    const auto want = expected_values(f[b]);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[size_t(256 * b + i)], want[size_t(i)]);
  }
  Fields m[2] = {random_fields(rng, false), random_fields(rng, false)};
  m[1].d_bits = 0xB800;  // -0.5
  BlockIQ1_M m_blocks[2] = {pack_iq1_m(m[0]), pack_iq1_m(m[1])};
  dequantize_row_iq1_m(m_blocks, y.data(), 512);
  for (int b = 0; b < 2; ++b) {
    const auto want = expected_values(m[b]);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[size_t(256 * b + i)], want[size_t(i)]);
  }
}

// Arbitrary bytes always decode: finite scales give finite values within d * 15 * 1.125; a NaN
// or Inf super-scale gives NaN / Inf outputs (all 0xFF bytes: d = 0xFFFF, a NaN).
TEST(Iq1Dequantize, ArbitraryBytesDecode) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<float> y(256);
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t raw[sizeof(BlockIQ1_M)];
    for (uint8_t& b : raw) b = uint8_t(byte(rng));
    BlockIQ1_S s;
    std::memcpy(&s, raw, sizeof(s));
    dequantize_row_iq1_s(&s, y.data(), 256);
    const float ds = fp16_to_fp32(s.d);
    for (float v : y) {
      if (std::isfinite(ds)) {
        ASSERT_LE(std::fabs(v), std::fabs(ds) * 15.0f * 1.125f);
      } else {
        ASSERT_FALSE(std::isfinite(v));
      }
    }
    BlockIQ1_M m;
    std::memcpy(&m, raw, sizeof(m));
    dequantize_row_iq1_m(&m, y.data(), 256);
    const float dm = fp16_to_fp32(iq1m_scale_bits(m));
    for (float v : y) {
      if (std::isfinite(dm)) {
        ASSERT_LE(std::fabs(v), std::fabs(dm) * 15.0f * 1.125f);
      } else {
        ASSERT_FALSE(std::isfinite(v));
      }
    }
  }
  BlockIQ1_M ones;
  std::memset(&ones, 0xFF, sizeof(ones));
  dequantize_row_iq1_m(&ones, y.data(), 256);
  for (float v : y) EXPECT_TRUE(std::isnan(v));
}

TEST(Iq1Dequantize, Dispatch) {
  EXPECT_TRUE(can_dequantize(GgmlType::IQ1_S));
  EXPECT_TRUE(can_dequantize(GgmlType::IQ1_M));
  EXPECT_TRUE(is_supported_weight_type(uint32_t(GgmlType::IQ1_S)));
  EXPECT_TRUE(is_supported_weight_type(uint32_t(GgmlType::IQ1_M)));
}

}  // namespace
}  // namespace vela

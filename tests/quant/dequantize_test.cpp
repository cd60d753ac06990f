// Hand-built blocks of every type decode to hand-computed values, and random blocks decode as an
// independent per-element reading of the format spec says they should.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;  // 0.25
constexpr uint16_t kHalfTwo = 0x4000;
constexpr uint16_t kHalfMinusOne = 0xBC00;

template <class Block>
std::vector<float> decode(GgmlType type, const Block& block, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.0f);
  dequantize_row(type, &block, out.data(), n);
  return out;
}

template <class Block>
void fill_random(Block* block, uint32_t seed) {
  std::mt19937 rng(seed);
  auto* bytes = reinterpret_cast<uint8_t*>(block);
  for (size_t i = 0; i < sizeof(Block); ++i) bytes[i] = uint8_t(rng());
}

TEST(Dequantize, F32F16BF16) {
  const float f[3] = {1.5f, -2.0f, 0.0f};
  std::vector<float> out(3);
  dequantize_row(GgmlType::F32, f, out.data(), 3);
  EXPECT_EQ(out, std::vector<float>({1.5f, -2.0f, 0.0f}));
  const uint16_t h[3] = {0x3E00, 0xC000, 0x0001};  // 1.5, -2, smallest subnormal 2^-24
  dequantize_row(GgmlType::F16, h, out.data(), 3);
  EXPECT_EQ(out, std::vector<float>({1.5f, -2.0f, 0x1p-24f}));
  const uint16_t b[3] = {0x3FC0, 0xC000, 0x4049};  // 1.5, -2, 3.140625
  dequantize_row(GgmlType::BF16, b, out.data(), 3);
  EXPECT_EQ(out, std::vector<float>({1.5f, -2.0f, 3.140625f}));
}

TEST(Dequantize, Q4_0HandBuilt) {
  BlockQ4_0 blk;
  blk.d = kHalfHalf;
  std::memset(blk.qs, 0x88, sizeof(blk.qs));  // every level 8 -> 0
  blk.qs[0] = 0x0F;  // element 0: level 15 -> (15-8)*0.5; element 16: level 0 -> -8*0.5
  blk.qs[1] = 0x38;  // element 1: level 8 -> 0; element 17: level 3 -> -2.5
  const auto y = decode(GgmlType::Q4_0, blk, 32);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -4.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[17], -2.5f);
  EXPECT_EQ(y[31], 0.0f);
}

TEST(Dequantize, Q4_1HandBuilt) {
  BlockQ4_1 blk;
  blk.d = kHalfHalf;
  blk.m = kHalfMinusOne;
  std::memset(blk.qs, 0, sizeof(blk.qs));
  blk.qs[0] = 0xF3;  // element 0: 3*0.5-1; element 16: 15*0.5-1
  const auto y = decode(GgmlType::Q4_1, blk, 32);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[16], 6.5f);
  EXPECT_EQ(y[5], -1.0f);
}

TEST(Dequantize, Q5_0HandBuilt) {
  BlockQ5_0 blk;
  blk.d = kHalfQuarter;
  std::memset(blk.qs, 0, sizeof(blk.qs));
  const uint32_t qh = (1u << 0) | (1u << 16) | (1u << 31);  // 5th bit of elements 0, 16, 31
  std::memcpy(blk.qh, &qh, 4);
  blk.qs[0] = 0x21;   // element 0: (1|16)-16 = 1; element 16: (2|16)-16 = 2
  blk.qs[15] = 0xF0;  // element 15: 0-16; element 31: (15|16)-16 = 15
  const auto y = decode(GgmlType::Q5_0, blk, 32);
  EXPECT_EQ(y[0], 0.25f);
  EXPECT_EQ(y[16], 0.5f);
  EXPECT_EQ(y[1], -4.0f);
  EXPECT_EQ(y[15], -4.0f);
  EXPECT_EQ(y[31], 3.75f);
}

TEST(Dequantize, Q5_1HandBuilt) {
  BlockQ5_1 blk;
  blk.d = kHalfHalf;
  blk.m = kHalfOne;
  std::memset(blk.qs, 0, sizeof(blk.qs));
  const uint32_t qh = 1u;  // 5th bit of element 0 only
  std::memcpy(blk.qh, &qh, 4);
  blk.qs[0] = 0x21;  // element 0: 17*0.5+1; element 16: 2*0.5+1
  const auto y = decode(GgmlType::Q5_1, blk, 32);
  EXPECT_EQ(y[0], 9.5f);
  EXPECT_EQ(y[16], 2.0f);
  EXPECT_EQ(y[3], 1.0f);
}

TEST(Dequantize, Q8_0AndQ8_1HandBuilt) {
  BlockQ8_0 b0;
  b0.d = kHalfHalf;
  std::memset(b0.qs, 0, sizeof(b0.qs));
  b0.qs[0] = -128;
  b0.qs[5] = 127;
  auto y = decode(GgmlType::Q8_0, b0, 32);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[5], 63.5f);
  EXPECT_EQ(y[6], 0.0f);

  BlockQ8_1 b1;
  b1.d = kHalfTwo;
  b1.s = 0;  // not part of the values
  std::memset(b1.qs, 0, sizeof(b1.qs));
  b1.qs[3] = -3;
  y = decode(GgmlType::Q8_1, b1, 32);
  EXPECT_EQ(y[3], -6.0f);
  EXPECT_EQ(y[4], 0.0f);
}

// Scales/mins bytes for Q4_K/Q5_K tests: sub-block 0 (scale 2, min 4) and sub-block 5 (scale 33,
// min 47), all others 0, packed by hand:
//   byte 0 = 2, byte 4 = 4 (sub-block 0's low 6 bits);
//   byte 9 = 0xF1 (sub-block 5's low nibbles: scale 33&15 = 1, min 47&15 = 15 in the high half);
//   byte 1 |= (33>>4)<<6 = 0x80 and byte 5 |= (47>>4)<<6 = 0x80 (their top 2 bits).
void hand_scales(uint8_t* s) {
  std::memset(s, 0, kKScaleBytes);
  s[0] = 2;
  s[4] = 4;
  s[9] = 0xF1;
  s[1] = 0x80;
  s[5] = 0x80;
}

TEST(Dequantize, KScaleMinPacking) {
  uint8_t s[kKScaleBytes];
  hand_scales(s);
  uint8_t sc, mn;
  k_scale_min(0, s, &sc, &mn);
  EXPECT_EQ(sc, 2);
  EXPECT_EQ(mn, 4);
  k_scale_min(5, s, &sc, &mn);
  EXPECT_EQ(sc, 33);
  EXPECT_EQ(mn, 47);
  k_scale_min(1, s, &sc, &mn);
  EXPECT_EQ(sc, 0);
  EXPECT_EQ(mn, 0);
  // Packing then unpacking every 6-bit value in every slot returns it.
  for (int v = 0; v < 64; ++v) {
    uint8_t scales[8], mins[8];
    for (int j = 0; j < 8; ++j) {
      scales[j] = uint8_t((v + 7 * j) & 63);
      mins[j] = uint8_t((v * 5 + j) & 63);
    }
    uint8_t packed[kKScaleBytes];
    k_pack_scale_min(scales, mins, packed);
    for (int j = 0; j < 8; ++j) {
      k_scale_min(j, packed, &sc, &mn);
      ASSERT_EQ(sc, scales[j]);
      ASSERT_EQ(mn, mins[j]);
    }
  }
}

TEST(Dequantize, Q4_KHandBuilt) {
  BlockQ4_K blk;
  blk.d = kHalfOne;
  blk.dmin = kHalfHalf;
  hand_scales(blk.scales);
  std::memset(blk.qs, 0, sizeof(blk.qs));
  blk.qs[0] = 0x37;   // element 0 (sub-block 0, low nibble) = 7; element 32 (sub-block 1) = 3
  blk.qs[64] = 0xA0;  // element 128 (sub-block 4, low) = 0; element 160 (sub-block 5, high) = 10
  const auto y = decode(GgmlType::Q4_K, blk, 256);
  EXPECT_EQ(y[0], 1.0f * 2 * 7 - 0.5f * 4);  // 12
  EXPECT_EQ(y[1], -2.0f);                    // level 0: just the min
  EXPECT_EQ(y[32], 0.0f);                    // sub-block 1 has scale 0, min 0
  EXPECT_EQ(y[128], 0.0f);
  EXPECT_EQ(y[160], 1.0f * 33 * 10 - 0.5f * 47);  // 306.5
  EXPECT_EQ(y[161], -23.5f);
}

TEST(Dequantize, Q5_KHandBuilt) {
  BlockQ5_K blk;
  blk.d = kHalfOne;
  blk.dmin = kHalfHalf;
  hand_scales(blk.scales);
  std::memset(blk.qs, 0, sizeof(blk.qs));
  std::memset(blk.qh, 0, sizeof(blk.qh));
  blk.qs[0] = 0x37;
  blk.qs[64] = 0xA0;
  blk.qh[0] = (1 << 0) | (1 << 5);  // 5th bit of element 0 (sub-block 0) and 160 (sub-block 5)
  const auto y = decode(GgmlType::Q5_K, blk, 256);
  EXPECT_EQ(y[0], 2.0f * 23 - 2.0f);      // level 7|16 = 23 -> 44
  EXPECT_EQ(y[160], 33.0f * 26 - 23.5f);  // level 10|16 = 26 -> 834.5
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[32], 0.0f);
}

TEST(Dequantize, Q6_KHandBuilt) {
  BlockQ6_K blk;
  std::memset(&blk, 0, sizeof(blk));
  blk.d = kHalfHalf;
  blk.scales[0] = 2;
  blk.scales[1] = -3;
  blk.scales[5] = 4;
  blk.scales[15] = -1;
  blk.ql[0] = 0x05;    // element 0: low 4 bits 5
  blk.qh[0] = 0x02;    // element 0: top bits 2 -> level 37 -> +5
  blk.ql[16] = 0xF0;   // element 16: low 0; element 80 (k=2, l=16): low 15
  blk.qh[16] = 0x30;   // element 16: top 0 -> level 0 -> -32; element 80: top 3 -> level 63 -> +31
  blk.ql[127] = 0x10;  // element 255 (h=1, k=3, l=31): low 1
  blk.qh[63] = 0x40;   // element 255: top 1 -> level 17 -> -15
  const auto y = decode(GgmlType::Q6_K, blk, 256);
  EXPECT_EQ(y[0], 0.5f * 2 * 5);       // 5
  EXPECT_EQ(y[16], 0.5f * -3 * -32);   // 48
  EXPECT_EQ(y[80], 0.5f * 4 * 31);     // 62
  EXPECT_EQ(y[255], 0.5f * -1 * -15);  // 7.5
  EXPECT_EQ(y[1], 0.5f * 2 * -32);     // all-zero bits: level -32
}

TEST(Dequantize, Q8_KHandBuilt) {
  BlockQ8_K blk;
  std::memset(&blk, 0, sizeof(blk));
  blk.d = 0.25f;
  blk.qs[7] = -100;
  blk.qs[255] = 127;
  const auto y = decode(GgmlType::Q8_K, blk, 256);
  EXPECT_EQ(y[7], -25.0f);
  EXPECT_EQ(y[255], 31.75f);
  EXPECT_EQ(y[0], 0.0f);
}

// Random bytes (with sane scales) decoded against a direct per-element reading of the layout.
TEST(Dequantize, KTypesMatchPerElementSpec) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    BlockQ4_K q4;
    fill_random(&q4, seed);
    q4.d = kHalfQuarter;
    q4.dmin = kHalfHalf;
    BlockQ5_K q5;
    fill_random(&q5, seed + 100);
    q5.d = kHalfQuarter;
    q5.dmin = kHalfHalf;
    BlockQ6_K q6;
    fill_random(&q6, seed + 200);
    q6.d = kHalfQuarter;
    const auto y4 = decode(GgmlType::Q4_K, q4, 256);
    const auto y5 = decode(GgmlType::Q5_K, q5, 256);
    const auto y6 = decode(GgmlType::Q6_K, q6, 256);
    for (int i = 0; i < 256; ++i) {
      const int sub = i / 32;
      uint8_t sc, mn;
      k_scale_min(sub, q4.scales, &sc, &mn);
      const int l4 = (q4.qs[32 * (sub / 2) + i % 32] >> (4 * (sub % 2))) & 15;
      ASSERT_EQ(y4[size_t(i)], 0.25f * float(sc) * float(l4) - 0.5f * float(mn)) << i;

      k_scale_min(sub, q5.scales, &sc, &mn);
      const int l5 = ((q5.qs[32 * (sub / 2) + i % 32] >> (4 * (sub % 2))) & 15) |
                     (((q5.qh[i % 32] >> sub) & 1) << 4);
      ASSERT_EQ(y5[size_t(i)], 0.25f * float(sc) * float(l5) - 0.5f * float(mn)) << i;

      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      const int low = (q6.ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 15;
      const int high = (q6.qh[32 * h + l] >> (2 * k)) & 3;
      const float expect = 0.25f * float(q6.scales[i / 16]) * float((low | (high << 4)) - 32);
      ASSERT_EQ(y6[size_t(i)], expect) << i;
    }
  }
}

TEST(Dequantize, LegacyTypesMatchPerElementSpec) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    BlockQ5_1 b;
    fill_random(&b, seed);
    b.d = kHalfHalf;
    b.m = kHalfMinusOne;
    const auto y = decode(GgmlType::Q5_1, b, 32);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int i = 0; i < 32; ++i) {
      const int low = (b.qs[i % 16] >> (4 * (i / 16))) & 15;
      const int level = low | int(((qh >> i) & 1) << 4);
      ASSERT_EQ(y[size_t(i)], 0.5f * float(level) - 1.0f) << i;
    }
  }
}

TEST(Dequantize, MultipleBlocksAdvance) {
  BlockQ8_0 blocks[2];
  std::memset(blocks, 0, sizeof(blocks));
  blocks[0].d = kHalfOne;
  blocks[1].d = kHalfTwo;
  blocks[0].qs[0] = 1;
  blocks[1].qs[0] = 1;
  std::vector<float> y(64);
  dequantize_row(GgmlType::Q8_0, blocks, y.data(), 64);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[32], 2.0f);
}

TEST(Dequantize, SupportedSet) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(uint32_t(t));
  }
  EXPECT_FALSE(can_dequantize(GgmlType::F64));
  EXPECT_FALSE(can_dequantize(GgmlType::I32));
}

}  // namespace
}  // namespace vela

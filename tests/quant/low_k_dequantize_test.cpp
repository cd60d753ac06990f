// Q2_K, Q3_K, TQ1_0 and TQ2_0 blocks built by hand decode to values this test computes from the
// format's definition on its own: the element -> bit position map is walked the other way round
// (from each byte and bit pair to its element), Q3_K's scales are packed bit by bit here, and
// TQ1_0's bytes are encoded from trits (base 3, scaled to 256, rounded up) and read back with a
// closed form instead of the decoder's multiply-by-3^n trick.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks_low_k.h"
#include "quant/dequantize.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;  // 0.25
constexpr uint16_t kHalfNaN = 0x7E00;

template <class Block>
std::vector<float> decode(GgmlType type, const Block* blocks, int n_blocks) {
  std::vector<float> out(size_t(n_blocks) * kQK_K, -12345.0f);
  dequantize_row(type, blocks, out.data(), int64_t(out.size()));
  return out;
}

template <class Block>
void fill_random(Block* block, uint32_t seed) {
  std::mt19937 rng(seed);
  auto* bytes = reinterpret_cast<uint8_t*>(block);
  for (size_t i = 0; i < sizeof(Block); ++i) bytes[i] = uint8_t(rng());
}

// The 2-bit fields of a 64-byte qs array by element: byte i, bit pair k holds element
// 128 (i / 32) + 32 k + i % 32.
std::vector<int> two_bit_fields(const uint8_t* qs) {
  std::vector<int> level(kQK_K, -1);
  for (int i = 0; i < 64; ++i) {
    for (int k = 0; k < 4; ++k)
      level[size_t(128 * (i / 32) + 32 * k + i % 32)] = (qs[i] >> (2 * k)) & 3;
  }
  return level;
}

TEST(DequantizeLowK, Q2_KHandBuilt) {
  BlockQ2_K blk;
  std::memset(&blk, 0, sizeof(blk));
  blk.d = kHalfHalf;
  blk.dmin = kHalfQuarter;
  for (int j = 0; j < 16; ++j)
    blk.scales[j] = uint8_t((j % 16) | ((15 - j) << 4));  // sc j, mn 15-j
  blk.qs[0] = 0b11100100;  // elements 0, 32, 64, 96: levels 0, 1, 2, 3
  blk.qs[47] = 0xC0;       // element 128 + 96 + 15 = 239: level 3
  const auto y = decode(GgmlType::Q2_K, &blk, 1);
  // Sub-block 0: sc 0, mn 15 -> every element -15 * 0.25.
  EXPECT_EQ(y[0], -3.75f);
  // Element 32 (sub-block 2: sc 2, mn 13): 0.5 * 2 * 1 - 0.25 * 13.
  EXPECT_EQ(y[32], 1.0f - 3.25f);
  EXPECT_EQ(y[64], 0.5f * 4 * 2 - 0.25f * 11);   // sub-block 4
  EXPECT_EQ(y[96], 0.5f * 6 * 3 - 0.25f * 9);    // sub-block 6
  EXPECT_EQ(y[97], -0.25f * 9);                  // level 0
  EXPECT_EQ(y[239], 0.5f * 14 * 3 - 0.25f * 1);  // sub-block 14
  EXPECT_EQ(y[255], 0.5f * 0 - 0.25f * 0);

  for (uint32_t seed = 1; seed <= 20; ++seed) {
    fill_random(&blk, seed);
    blk.d = fp32_to_fp16(0.01f * float(seed));
    blk.dmin = fp32_to_fp16(-0.003f * float(seed));
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    const auto level = two_bit_fields(blk.qs);
    const auto z = decode(GgmlType::Q2_K, &blk, 1);
    for (int e = 0; e < kQK_K; ++e) {
      const int sc = blk.scales[e / 16] % 16, mn = blk.scales[e / 16] / 16;
      ASSERT_EQ(z[size_t(e)], d * float(sc) * float(level[size_t(e)]) - dmin * float(mn))
          << "seed " << seed << " element " << e;
    }
  }
}

// Packs 16 six-bit values into Q3_K's 12 scale bytes, one bit at a time: bit b of value j goes to
// bit 4 (j / 8) + b of byte j % 8 for b < 4, to bit 2 (j / 4) + b - 4 of byte 8 + j % 4 otherwise.
void pack_q3_scales(const int* s, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 16; ++j) {
    for (int b = 0; b < 6; ++b) {
      if (((s[j] >> b) & 1) == 0) continue;
      if (b < 4) {
        out[j % 8] |= uint8_t(1 << (4 * (j / 8) + b));
      } else {
        out[8 + j % 4] |= uint8_t(1 << (2 * (j / 4) + b - 4));
      }
    }
  }
}

TEST(DequantizeLowK, Q3_KScalePacking) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    int s[16];
    for (int& v : s) v = int(rng() % 64);
    if (trial == 0) std::fill(s, s + 16, 63);
    if (trial == 1) std::fill(s, s + 16, 0);
    uint8_t packed[12];
    pack_q3_scales(s, packed);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(q3_k_scale(j, packed), s[j] - 32) << trial << " " << j;
  }
}

TEST(DequantizeLowK, Q3_KHandBuilt) {
  BlockQ3_K blk;
  std::memset(&blk, 0, sizeof(blk));
  blk.d = kHalfHalf;
  // All fields zero: level 0 - 4 = -4, scale 0 - 32 = -32, so every value is 0.5 * 128.
  auto y = decode(GgmlType::Q3_K, &blk, 1);
  for (int e = 0; e < kQK_K; ++e) ASSERT_EQ(y[size_t(e)], 64.0f) << e;

  int s[16];
  for (int j = 0; j < 16; ++j) s[j] = 32 + j;  // signed scales 0..15
  pack_q3_scales(s, blk.scales);
  blk.qs[1] = 0x03;     // element 1: low bits 3
  blk.hmask[1] = 0x01;  // element 1: third bit (bit 0 = 32 * 0 + ...) -> level 7 - 4 = 3
  blk.hmask[2] = 0x80;  // element 32 * 7 + 2 = 226: third bit -> level 4 - 4 = 0
  blk.qs[48] = 0x40;    // element 128 + 96 + 16 = 240: low bits 1 -> level 1 - 4 = -3
  y = decode(GgmlType::Q3_K, &blk, 1);
  EXPECT_EQ(y[0], 0.0f);             // sub-block 0: scale 0
  EXPECT_EQ(y[1], 0.0f);             // scale 0 too
  EXPECT_EQ(y[16], 0.5f * 1 * -4);   // sub-block 1
  EXPECT_EQ(y[226], 0.5f * 14 * 0);  // sub-block 14
  EXPECT_EQ(y[227], 0.5f * 14 * -4);
  EXPECT_EQ(y[240], 0.5f * 15 * -3);  // sub-block 15
  s[0] = 63;                          // scale 31 on sub-block 0
  pack_q3_scales(s, blk.scales);
  y = decode(GgmlType::Q3_K, &blk, 1);
  EXPECT_EQ(y[1], 0.5f * 31 * 3);
  EXPECT_EQ(y[0], 0.5f * 31 * -4);

  for (uint32_t seed = 1; seed <= 20; ++seed) {
    fill_random(&blk, seed);
    for (int& v : s) v = int(seed * 7 + uint32_t(&v - s) * 5) % 64;
    pack_q3_scales(s, blk.scales);
    blk.d = fp32_to_fp16(0.01f * float(seed) * (seed % 2 ? -1.0f : 1.0f));
    const float d = fp16_to_fp32(blk.d);
    auto level = two_bit_fields(blk.qs);
    for (int l = 0; l < 32; ++l) {
      for (int bit = 0; bit < 8; ++bit)
        level[size_t(32 * bit + l)] += 4 * ((blk.hmask[l] >> bit) & 1);
    }
    const auto z = decode(GgmlType::Q3_K, &blk, 1);
    for (int e = 0; e < kQK_K; ++e) {
      ASSERT_EQ(z[size_t(e)], d * float(s[e / 16] - 32) * float(level[size_t(e)] - 4))
          << "seed " << seed << " element " << e;
    }
  }
}

// A TQ1_0 byte from trits t[0..4] (t[0] most significant): the base-3 number times 256 / 243,
// rounded up. Four trits are stored as five with a trailing 0.
uint8_t encode_trits(const int* t, int count) {
  int v = 0;
  for (int i = 0; i < 5; ++i) v = 3 * v + (i < count ? t[i] : 0);
  return uint8_t((v * 256 + 242) / 243);
}

// Trit n of any byte b, in closed form: floor(b * 3^(n + 1) / 256) mod 3.
int closed_form_trit(int b, int n) {
  int p = 3;
  for (int i = 0; i < n; ++i) p *= 3;
  return (b * p / 256) % 3;
}

TEST(DequantizeLowK, TQ1_0TritsOfEveryByte) {
  // Every byte value, well-formed or not, reads as trits in {0, 1, 2} (here: the closed form).
  for (int b = 0; b < 256; ++b) {
    for (int n = 0; n < 5; ++n) {
      ASSERT_EQ(tq1_trit(uint8_t(b), n), closed_form_trit(b, n)) << b << " " << n;
    }
  }
  // Every 5-trit combination survives encode -> decode.
  for (int v = 0; v < 243; ++v) {
    int t[5];
    for (int i = 4, x = v; i >= 0; --i, x /= 3) t[i] = x % 3;
    const uint8_t b = encode_trits(t, 5);
    for (int n = 0; n < 5; ++n) ASSERT_EQ(closed_form_trit(b, n), t[n]) << v << " " << n;
  }
}

TEST(DequantizeLowK, TQ1_0HandBuilt) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    // The intended weights, in element order, then packed by the element map of the format.
    std::vector<int> t(kQK_K);
    for (int& v : t) v = int(rng() % 3);
    BlockTQ1_0 blk;
    for (int m = 0; m < 32; ++m) {
      const int trits[5] = {t[size_t(m)], t[size_t(32 + m)], t[size_t(64 + m)], t[size_t(96 + m)],
                            t[size_t(128 + m)]};
      blk.qs[m] = encode_trits(trits, 5);
    }
    for (int m = 0; m < 16; ++m) {
      int trits[5];
      for (int n = 0; n < 5; ++n) trits[n] = t[size_t(160 + 16 * n + m)];
      blk.qs[32 + m] = encode_trits(trits, 5);
    }
    for (int j = 0; j < 4; ++j) {
      int trits[4];
      for (int n = 0; n < 4; ++n) trits[n] = t[size_t(240 + 4 * n + j)];
      blk.qh[j] = encode_trits(trits, 4);
    }
    blk.d = trial % 2 ? kHalfHalf : fp32_to_fp16(-1.5f);
    const float d = fp16_to_fp32(blk.d);
    const auto y = decode(GgmlType::TQ1_0, &blk, 1);
    for (int e = 0; e < kQK_K; ++e) ASSERT_EQ(y[size_t(e)], d * float(t[size_t(e)] - 1)) << e;
  }
  // Arbitrary bytes: each element is the closed-form trit of its byte.
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    BlockTQ1_0 blk;
    fill_random(&blk, seed);
    blk.d = kHalfOne;
    const auto y = decode(GgmlType::TQ1_0, &blk, 1);
    for (int m = 0; m < 32; ++m) {
      for (int n = 0; n < 5; ++n) {
        ASSERT_EQ(y[size_t(32 * n + m)], float(closed_form_trit(blk.qs[m], n) - 1));
      }
    }
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 5; ++n) {
        ASSERT_EQ(y[size_t(160 + 16 * n + m)], float(closed_form_trit(blk.qs[32 + m], n) - 1));
      }
    }
    for (int j = 0; j < 4; ++j) {
      for (int n = 0; n < 4; ++n) {
        ASSERT_EQ(y[size_t(240 + 4 * n + j)], float(closed_form_trit(blk.qh[j], n) - 1));
      }
    }
  }
}

TEST(DequantizeLowK, TQ2_0HandBuilt) {
  BlockTQ2_0 blk;
  std::memset(blk.qs, 0x55, sizeof(blk.qs));  // every level 1 -> 0
  blk.d = kHalfHalf;
  blk.qs[0] = 0b11100001;  // elements 0, 32, 64, 96: levels 1, 0, 2, 3
  blk.qs[63] = 0x15;       // element 128 + 96 + 31 = 255: level 0
  const auto y = decode(GgmlType::TQ2_0, &blk, 1);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[32], -0.5f);
  EXPECT_EQ(y[64], 0.5f);
  EXPECT_EQ(y[96], 1.0f);  // level 3, outside the ternary set, still defined: 2 d
  EXPECT_EQ(y[255], -0.5f);
  EXPECT_EQ(y[254], 0.0f);
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    fill_random(&blk, seed);
    blk.d = fp32_to_fp16(0.125f * float(seed));
    const auto level = two_bit_fields(blk.qs);
    const auto z = decode(GgmlType::TQ2_0, &blk, 1);
    for (int e = 0; e < kQK_K; ++e) {
      ASSERT_EQ(z[size_t(e)], 0.125f * float(seed) * float(level[size_t(e)] - 1)) << e;
    }
  }
}

// Rows of several super-blocks decode block after block; a NaN scale gives NaN outputs only
// where it is used (and never a crash).
TEST(DequantizeLowK, MultipleBlocksAndNaNScales) {
  BlockTQ2_0 tq2[3];
  for (auto& b : tq2) std::memset(b.qs, 0xAA, sizeof(b.qs));  // level 2 -> +d
  tq2[0].d = kHalfOne;
  tq2[1].d = kHalfNaN;
  tq2[2].d = kHalfHalf;
  auto y = decode(GgmlType::TQ2_0, tq2, 3);
  EXPECT_EQ(y[255], 1.0f);
  EXPECT_TRUE(std::isnan(y[256]));
  EXPECT_TRUE(std::isnan(y[511]));
  EXPECT_EQ(y[512], 0.5f);

  BlockQ2_K q2[2];
  std::memset(q2, 0, sizeof(q2));
  q2[0].d = kHalfNaN;
  q2[1].d = kHalfOne;
  q2[1].scales[0] = 0x01;
  q2[1].qs[0] = 0x03;
  y = decode(GgmlType::Q2_K, q2, 2);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[256], 3.0f);

  BlockQ3_K q3[2];
  std::memset(q3, 0, sizeof(q3));
  q3[0].d = kHalfOne;
  q3[1].d = 0x7C00;  // +inf
  y = decode(GgmlType::Q3_K, q3, 2);
  EXPECT_EQ(y[0], 128.0f);
  EXPECT_EQ(y[256], INFINITY);

  BlockTQ1_0 tq1[2];
  std::memset(tq1, 0, sizeof(tq1));  // byte 0: every trit 0 -> -d
  tq1[0].d = kHalfOne;
  tq1[1].d = kHalfQuarter;
  y = decode(GgmlType::TQ1_0, tq1, 2);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[255], -1.0f);
  EXPECT_EQ(y[256], -0.25f);
}

TEST(DequantizeLowK, Supported) {
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(uint32_t(t));
    EXPECT_TRUE(is_supported_weight_type(uint32_t(t))) << ggml_type_name(uint32_t(t));
  }
}

}  // namespace
}  // namespace vela

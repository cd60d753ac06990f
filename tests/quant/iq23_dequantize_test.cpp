// The E8-lattice codebook types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): hand-built blocks
// decode to values worked out by hand from the format's definition (grid entries quoted from the
// format's codebooks), the tables hold the format's values at spot-checked places, and random
// blocks decode as an element-by-element reading of the layout says.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks_iq23.h"
#include "quant/dequantize.h"
#include "quant/iq23_grids.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;
constexpr uint16_t kHalfHalf = 0x3800;  // 0.5

template <class Block>
std::vector<float> decode(GgmlType type, const Block* blocks, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.0f);
  dequantize_row(type, blocks, out.data(), n);
  return out;
}

template <class Block>
Block zeroed() {
  Block b;
  std::memset(&b, 0, sizeof(b));
  return b;
}

void put_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}

TEST(Iq23Tables, SignTableAddsEvenParityBit) {
  for (uint32_t s = 0; s < 128; ++s) {
    const uint32_t parity = uint32_t(std::popcount(s)) & 1;
    EXPECT_EQ(kIqSigns[s], s | (parity << 7)) << s;
    EXPECT_EQ(std::popcount(unsigned(kIqSigns[s])) % 2, 0) << s;
  }
  EXPECT_EQ(iq_sign_byte(0x80 | 1), kIqSigns[1]);  // bits above the 7 are ignored
}

TEST(Iq23Tables, SpotCheckedEntries) {
  // First, second, 100th and last entries, and all bytes within each codebook's level set.
  EXPECT_EQ(kIq2XxsGrid[0], 0x0808080808080808u);
  EXPECT_EQ(kIq2XxsGrid[1], 0x080808080808082bu);
  EXPECT_EQ(kIq2XxsGrid[100], 0x08192b0808081908u);
  EXPECT_EQ(kIq2XxsGrid[255], 0x2b2b2b1908081908u);
  EXPECT_EQ(kIq2XsGrid[300], 0x1908190808191908u);
  EXPECT_EQ(kIq2XsGrid[511], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIq2SGrid[256], 0x0819081919191919u);
  EXPECT_EQ(kIq2SGrid[1023], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIq3XxsGrid[1], 0x04040414u);
  EXPECT_EQ(kIq3XxsGrid[128], 0x141c3e04u);
  EXPECT_EQ(kIq3XxsGrid[255], 0x3e341c04u);
  EXPECT_EQ(kIq3SGrid[256], 0x05090507u);
  EXPECT_EQ(kIq3SGrid[511], 0x0f0f0101u);
  auto bytes_in = [](uint64_t entry, int n, std::vector<int> levels) {
    for (int j = 0; j < n; ++j) {
      const int b = int((entry >> (8 * j)) & 0xFF);
      if (std::find(levels.begin(), levels.end(), b) == levels.end()) return false;
    }
    return true;
  };
  for (uint64_t e : kIq2XxsGrid) EXPECT_TRUE(bytes_in(e, 8, {8, 25, 43}));
  for (uint64_t e : kIq2XsGrid) EXPECT_TRUE(bytes_in(e, 8, {8, 25, 43}));
  for (uint64_t e : kIq2SGrid) EXPECT_TRUE(bytes_in(e, 8, {8, 25, 43}));
  for (uint32_t e : kIq3XxsGrid) EXPECT_TRUE(bytes_in(e, 4, {4, 12, 20, 28, 36, 44, 52, 62}));
  for (uint32_t e : kIq3SGrid) EXPECT_TRUE(bytes_in(e, 4, {1, 3, 5, 7, 9, 11, 13, 15}));
}

TEST(Iq23Dequantize, Iq2XxsHandBuilt) {
  auto blk = zeroed<BlockIQ2_XXS>();
  blk.d = kHalfOne;
  // Sub-block 0: groups use entries 1, 0, 2, 255. Signs: group 0 field 1 (element 0, and by
  // parity element 7, negative); group 2 field 3 (elements 0 and 1). Scale s = 3: ls = 7,
  // so each magnitude is multiplied by 7/8.
  blk.qs[0] = 1;
  blk.qs[1] = 0;
  blk.qs[2] = 2;
  blk.qs[3] = 255;
  put_u32(blk.qs + 4, (1u << 0) | (3u << 14) | (3u << 28));
  // Sub-block 7: entry 0 with s = 15: ls = 31, 8 * 31/8 = 31.
  put_u32(blk.qs + 8 * 7 + 4, 15u << 28);
  const auto y = decode(GgmlType::IQ2_XXS, &blk, 256);
  // Group 0, entry 1 = bytes {43, 8, 8, 8, 8, 8, 8, 8}.
  EXPECT_EQ(y[0], -43.0f * 7 / 8);
  for (int j = 1; j < 7; ++j) EXPECT_EQ(y[size_t(j)], 7.0f) << j;
  EXPECT_EQ(y[7], -7.0f);
  for (int j = 8; j < 16; ++j) EXPECT_EQ(y[size_t(j)], 7.0f) << j;
  // Group 2, entry 2 = {25, 25, 8, 8, 8, 8, 8, 8}, elements 0 and 1 negative.
  EXPECT_EQ(y[16], -25.0f * 7 / 8);
  EXPECT_EQ(y[17], -25.0f * 7 / 8);
  EXPECT_EQ(y[18], 7.0f);
  // Group 3, entry 255 = {8, 25, 8, 8, 25, 43, 43, 43}.
  const float g3[8] = {8, 25, 8, 8, 25, 43, 43, 43};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(24 + j)], g3[j] * 7 / 8) << j;
  // Untouched sub-blocks: entry 0, no signs, ls = 1: 8/8.
  for (int i = 32; i < 224; ++i) EXPECT_EQ(y[size_t(i)], 1.0f) << i;
  for (int i = 224; i < 256; ++i) EXPECT_EQ(y[size_t(i)], 31.0f) << i;
}

TEST(Iq23Dequantize, Iq2XsHandBuilt) {
  auto blk = zeroed<BlockIQ2_XS>();
  blk.d = kHalfHalf;
  blk.qs[0] = uint16_t(1 | (1 << 9));      // entry 1, field 1: elements 0 and 7 negative
  blk.qs[2] = uint16_t(511 | (127 << 9));  // entry 511 (all 43), field 127: all 8 negative
  blk.qs[3] = 300;                         // entry 300 = {8, 25, 25, 8, 8, 25, 8, 25}
  blk.scales[0] = 0x52;                    // groups 0-1: s = 2 (ls 5); groups 2-3: s = 5 (ls 11)
  const auto y = decode(GgmlType::IQ2_XS, &blk, 256);
  const float lo = 0.5f * 5 / 8, hi = 0.5f * 11 / 8;
  EXPECT_EQ(y[0], -43 * lo);
  EXPECT_EQ(y[1], 8 * lo);
  EXPECT_EQ(y[7], -8 * lo);
  EXPECT_EQ(y[8], 8 * lo);  // group 1: entry 0
  EXPECT_EQ(y[15], 8 * lo);
  for (int j = 16; j < 24; ++j) EXPECT_EQ(y[size_t(j)], -43 * hi) << j;
  const float g3[8] = {8, 25, 25, 8, 8, 25, 8, 25};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(24 + j)], g3[j] * hi) << j;
  for (int i = 32; i < 256; ++i) EXPECT_EQ(y[size_t(i)], 0.5f * 8 / 8) << i;
}

TEST(Iq23Dequantize, Iq2SHandBuilt) {
  auto blk = zeroed<BlockIQ2_S>();
  blk.d = kHalfOne;
  blk.qs[0] = 0xFF;
  blk.qh[0] = 0x3 | (0x1 << 6);  // group 0: index 0x3FF (all 43); group 3: index 256 + qs[3]
  blk.signs[0] = 0x01;           // only element 0 negative: IQ2_S stores all 8 bits, no parity
  blk.qs[2] = 2;                 // entry 2 = {25, 25, 8, ...}
  blk.signs[3] = 0xFF;
  blk.scales[0] = 0x10;   // groups 0-1: ls 1; groups 2-3: ls 3
  blk.qs[4 * 5 + 1] = 1;  // sub-block 5 group 1: entry 1 = {43, 8, ...}
  blk.qh[5] = 0;
  blk.scales[5] = 0x0F;  // sub-block 5 groups 0-1: ls 31
  const auto y = decode(GgmlType::IQ2_S, &blk, 256);
  EXPECT_EQ(y[0], -43.0f / 8);
  for (int j = 1; j < 8; ++j) EXPECT_EQ(y[size_t(j)], 43.0f / 8) << j;
  EXPECT_EQ(y[8], 1.0f);  // entry 0, ls 1
  EXPECT_EQ(y[16], 25.0f * 3 / 8);
  EXPECT_EQ(y[17], 25.0f * 3 / 8);
  EXPECT_EQ(y[18], 3.0f);
  // Group 3: entry 256 = {25, 25, 25, 25, 25, 8, 25, 8}, all negative.
  const float g3[8] = {25, 25, 25, 25, 25, 8, 25, 8};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(24 + j)], -g3[j] * 3 / 8) << j;
  EXPECT_EQ(y[160], 31.0f);  // sub-block 5 group 0: entry 0, ls 31
  EXPECT_EQ(y[168], 43.0f * 31 / 8);
  EXPECT_EQ(y[169], 31.0f);
  EXPECT_EQ(y[176], 1.0f);  // sub-block 5 groups 2-3: ls 1
}

TEST(Iq23Dequantize, Iq3XxsHandBuilt) {
  auto blk = zeroed<BlockIQ3_XXS>();
  blk.d = kHalfOne;
  blk.qs[0] = 1;    // elements 0-3: entry 1 = {20, 4, 4, 4}
  blk.qs[1] = 255;  // elements 4-7: entry 255 = {4, 28, 52, 62}
  blk.qs[2] = 128;  // elements 8-11: entry 128 = {4, 62, 28, 20}
  // Group 0 field 0b1000000: element 6 negative, and element 7 by parity. s = 1: ls 3, times
  // 1/4 = 3/4. Sub-block 2: s = 6, ls 13.
  put_u32(blk.scales_signs, (0x40u << 0) | (1u << 28));
  put_u32(blk.scales_signs + 8, 6u << 28);
  const auto y = decode(GgmlType::IQ3_XXS, &blk, 256);
  const float expect0[12] = {20, 4, 4, 4, 4, 28, -52, -62, 4, 62, 28, 20};
  for (int j = 0; j < 12; ++j) EXPECT_EQ(y[size_t(j)], expect0[j] * 3 / 4) << j;
  EXPECT_EQ(y[12], 3.0f);  // entry 0 = {4, 4, 4, 4}
  EXPECT_EQ(y[32], 1.0f);  // sub-block 1: ls 1, 4/4
  EXPECT_EQ(y[64], 13.0f);
}

TEST(Iq23Dequantize, Iq3SHandBuilt) {
  auto blk = zeroed<BlockIQ3_S>();
  blk.d = kHalfHalf;
  blk.qs[0] = 0xFF;
  blk.qh[0] = 0x01;      // elements 0-3: index 511 = {1, 1, 15, 15}
  blk.qs[1] = 1;         // elements 4-7: index 1 = {3, 1, 1, 1} (qh bit 1 clear)
  blk.signs[0] = 0x0C;   // elements 2 and 3 negative (8 stored bits, no parity)
  blk.qh[1] = 0x80;      // sub-block 1, group 3, second half: index 256 = {7, 5, 9, 5}
  blk.signs[7] = 0x80;   // sub-block 1, group 3: element 7 negative
  blk.scales[0] = 0x21;  // sub-block 0: ls 3, sub-block 1: ls 5
  blk.scales[3] = 0xF0;  // sub-block 6: ls 1, sub-block 7: ls 31
  const auto y = decode(GgmlType::IQ3_S, &blk, 256);
  const float expect0[8] = {1, 1, -15, -15, 3, 1, 1, 1};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(j)], expect0[j] * 1.5f) << j;
  EXPECT_EQ(y[8], 1.5f);
  EXPECT_EQ(y[32], 2.5f);
  const float expect1[8] = {1, 1, 1, 1, 7, 5, 9, -5};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(56 + j)], expect1[j] * 2.5f) << j;
  EXPECT_EQ(y[192], 0.5f);
  EXPECT_EQ(y[224], 15.5f);
}

// ---------------------------------------------------------------------------------------------
// Random blocks: element i of super-block b read straight off the layout.

uint64_t entry_byte(uint64_t entry, int j) {
  return (entry >> (8 * j)) & 0xFF;
}

float odd(int s) {
  return float(2 * s + 1);
}

float iq2_xxs_element(const BlockIQ2_XXS& w, int i) {
  const int sb = i / 32, l = i % 32 / 8, j = i % 8;
  uint32_t aux;
  std::memcpy(&aux, w.qs + 8 * sb + 4, 4);
  const uint32_t field = (aux >> (7 * l)) & 127;
  const bool neg = j < 7 ? (field >> j) & 1 : std::popcount(field) & 1;
  const float mag = float(entry_byte(kIq2XxsGrid[w.qs[8 * sb + l]], j));
  return fp16_to_fp32(w.d) * odd(int(aux >> 28)) / 8 * (neg ? -mag : mag);
}

float iq2_xs_element(const BlockIQ2_XS& w, int i) {
  const int sb = i / 32, l = i % 32 / 8, j = i % 8;
  const uint16_t q = w.qs[4 * sb + l];
  const uint32_t field = q >> 9;
  const bool neg = j < 7 ? (field >> j) & 1 : std::popcount(field) & 1;
  const float mag = float(entry_byte(kIq2XsGrid[q % 512], j));
  const int s = l < 2 ? w.scales[sb] % 16 : w.scales[sb] / 16;
  return fp16_to_fp32(w.d) * odd(s) / 8 * (neg ? -mag : mag);
}

float iq2_s_element(const BlockIQ2_S& w, int i) {
  const int sb = i / 32, l = i % 32 / 8, j = i % 8, g = i / 8;
  const int index = w.qs[g] + 256 * ((w.qh[sb] >> (2 * l)) % 4);
  const bool neg = (w.signs[g] >> j) & 1;
  const float mag = float(entry_byte(kIq2SGrid[index], j));
  const int s = l < 2 ? w.scales[sb] % 16 : w.scales[sb] / 16;
  return fp16_to_fp32(w.d) * odd(s) / 8 * (neg ? -mag : mag);
}

float iq3_xxs_element(const BlockIQ3_XXS& w, int i) {
  const int sb = i / 32, l = i % 32 / 8, j = i % 8;
  uint32_t aux;
  std::memcpy(&aux, w.scales_signs + 4 * sb, 4);
  const uint32_t field = (aux >> (7 * l)) & 127;
  const bool neg = j < 7 ? (field >> j) & 1 : std::popcount(field) & 1;
  const uint8_t index = w.qs[i / 4];  // one index per 4 consecutive elements
  const float mag = float(entry_byte(kIq3XxsGrid[index], j % 4));
  return fp16_to_fp32(w.d) * odd(int(aux >> 28)) / 4 * (neg ? -mag : mag);
}

float iq3_s_element(const BlockIQ3_S& w, int i) {
  const int sb = i / 32, k = i % 32 / 4, j = i % 8;  // k: half-group within the sub-block
  const int index = w.qs[i / 4] + 256 * ((w.qh[sb] >> k) & 1);
  const bool neg = (w.signs[i / 8] >> j) & 1;
  const float mag = float(entry_byte(kIq3SGrid[index], i % 4));
  const int s = sb % 2 == 0 ? w.scales[sb / 2] % 16 : w.scales[sb / 2] / 16;
  return fp16_to_fp32(w.d) * odd(s) * (neg ? -mag : mag);
}

template <class Block, class Element>
void check_random_blocks(GgmlType type, Element element) {
  constexpr int kBlocks = 6;
  std::vector<Block> blocks(kBlocks);
  std::mt19937 rng{static_cast<uint32_t>(type)};
  auto* bytes = reinterpret_cast<uint8_t*>(blocks.data());
  for (size_t i = 0; i < sizeof(Block) * kBlocks; ++i) bytes[i] = uint8_t(rng());
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (int b = 0; b < kBlocks - 1; ++b) blocks[size_t(b)].d = fp32_to_fp16(scale(rng));
  blocks[kBlocks - 1].d = 0x7C00;  // +inf: every output inf (no element decodes to magnitude 0)
  const auto y = decode(type, blocks.data(), 256 * kBlocks);
  for (int b = 0; b < kBlocks; ++b) {
    for (int i = 0; i < 256; ++i) {
      const float expect = element(blocks[size_t(b)], i);
      ASSERT_EQ(y[size_t(256 * b + i)], expect) << "block " << b << " element " << i;
    }
  }
  EXPECT_TRUE(std::isinf(y[256 * (kBlocks - 1)]));
}

TEST(Iq23Dequantize, RandomBlocksMatchElementwiseReading) {
  check_random_blocks<BlockIQ2_XXS>(GgmlType::IQ2_XXS, iq2_xxs_element);
  check_random_blocks<BlockIQ2_XS>(GgmlType::IQ2_XS, iq2_xs_element);
  check_random_blocks<BlockIQ2_S>(GgmlType::IQ2_S, iq2_s_element);
  check_random_blocks<BlockIQ3_XXS>(GgmlType::IQ3_XXS, iq3_xxs_element);
  check_random_blocks<BlockIQ3_S>(GgmlType::IQ3_S, iq3_s_element);
}

TEST(Iq23Dequantize, Supported) {
  for (GgmlType t :
       {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S}) {
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(uint32_t(t));
    EXPECT_TRUE(is_supported_weight_type(uint32_t(t))) << ggml_type_name(uint32_t(t));
  }
}

}  // namespace
}  // namespace vela

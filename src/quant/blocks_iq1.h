#pragma once
// On-disk block layouts of the 1-bit codebook types IQ1_S and IQ1_M, bit for bit (conventions as
// in blocks.h: no padding, raw fp16 bits, little-endian).
// Both are 256-element super-blocks of 8 sub-blocks of 32, each sub-block 4 groups of 8
// consecutive elements. A group's 8 values g_j in {-1, 0, +1} are one entry of the 2048-entry
// codebook kIq1Grid (iq1_grid.h), picked by an 11-bit index; a delta of +-kIq1Delta shifts the
// whole group off the lattice. Element value:
//   x = d * ls * (g_j + delta),  ls = 2 s + 1 (s a 3-bit scale, so ls is odd, 1..15).
// Every bit pattern decodes to a value (an 11-bit index cannot leave the codebook); a NaN or Inf
// d gives NaN / Inf outputs.
#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace vela {

// The magnitude of the per-group shift, the same for both types (ggml's IQ1S_DELTA and
// IQ1M_DELTA): 1/8, exact in binary, so kernels can count in eighths.
inline constexpr float kIq1Delta = 0.125f;

// IQ1_S, 1.5625 bits per weight. Group l (0..3) of sub-block b has the codebook index
// qs[4b + l] | ((qh[b] >> 3l) & 7) << 8; qh[b] bits 12-14 are the sub-block's scale s and bit 15
// its delta sign (set = -kIq1Delta), shared by all 4 groups.
struct BlockIQ1_S {
  uint16_t d;               // fp16 super-scale
  uint8_t qs[kQK_K / 8];    // low 8 bits of each group's index
  uint16_t qh[kQK_K / 32];  // per sub-block: 4 x 3 high index bits, scale, delta sign
};

// IQ1_M, 1.75 bits per weight. Group g (0..31, sub-block g / 4) has the codebook index
// qs[g] | (h & 7) << 8 and delta sign h & 8 (set = -kIq1Delta), h being nibble g % 2 of qh[g / 2]
// (low nibble first). The scales, read as 4 little-endian uint16 words w[0..3]: bits 3k..3k+2 of
// w[i] (k < 4) are the 3-bit scale s of the 16 elements 64 i + 16 k .. +15 (two per sub-block),
// and the top nibbles of w[0], w[1], w[2], w[3] are bits 0-3, 4-7, 8-11, 12-15 of the fp16
// super-scale d (iq1m_scale_bits). There is no separate d field.
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];       // low 8 bits of each group's index
  uint8_t qh[kQK_K / 16];      // per group of 8: 3 high index bits and the delta sign, a nibble
  uint8_t scales[kQK_K / 32];  // 16 x 3-bit scales and the 4 nibbles of d, as above
};

static_assert(sizeof(BlockIQ1_S) == 50, "IQ1_S block layout");
static_assert(sizeof(BlockIQ1_M) == 56, "IQ1_M block layout");
static_assert(offsetof(BlockIQ1_S, qh) == 34, "IQ1_S high bits follow the index bytes");
static_assert(offsetof(BlockIQ1_M, scales) == 48, "IQ1_M scales close the block");

// IQ1_S: the codebook index of group l (0..3) of sub-block b (0..7).
inline uint32_t iq1_s_index(const BlockIQ1_S& blk, int b, int l) {
  return uint32_t(blk.qs[4 * b + l]) | (uint32_t(blk.qh[b] >> (3 * l)) & 7) << 8;
}

// IQ1_M: the 4-bit field (3 high index bits, delta sign at bit 3) of group g (0..31).
inline uint32_t iq1_m_nibble(const BlockIQ1_M& blk, int g) {
  return uint32_t(blk.qh[g / 2] >> (4 * (g % 2))) & 0x0F;
}

// IQ1_M: the 4 scale words w[0..3] (little-endian uint16).
inline uint64_t iq1_m_scale_words(const BlockIQ1_M& blk) {
  uint64_t words = 0;
  for (int i = 7; i >= 0; --i) words = words << 8 | blk.scales[i];
  return words;
}

// IQ1_M: the fp16 bits of the super-scale d, gathered from the top nibble of each scale word.
inline uint16_t iq1m_scale_bits(const BlockIQ1_M& blk) {
  const uint64_t w = iq1_m_scale_words(blk);
  return uint16_t(((w >> 12) & 0x000F) | ((w >> 24) & 0x00F0) | ((w >> 36) & 0x0F00) |
                  ((w >> 48) & 0xF000));
}

// IQ1_M: the 3-bit scale s (ls = 2 s + 1) of the 16 elements 16 k .. 16 k + 15 (k in 0..15).
inline uint32_t iq1_m_scale(const BlockIQ1_M& blk, int k) {
  return uint32_t(iq1_m_scale_words(blk) >> (16 * (k / 4) + 3 * (k % 4))) & 7;
}

}  // namespace vela

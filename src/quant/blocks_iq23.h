#pragma once
// On-disk block layouts of the E8-lattice codebook types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and
// IQ3_S, bit for bit (conventions as in blocks.h: no padding, raw fp16 bits, little-endian).
// All five are 256-element super-blocks of 8 sub-blocks of 32, each sub-block 4 groups of 8
// consecutive elements. A group's 8 magnitudes come from a codebook entry (iq23_grids.h: one
// 8-byte entry for IQ2, two 4-byte entries for IQ3, first 4 elements then last 4) and its signs
// from 8 sign bits (bit j set = element j negative). Element value:
//   x = d * ls * grid_byte * sign * f,  ls = 2 s + 1 (s a 4-bit scale, so ls is odd, 1..31),
// with f = 1/8 (IQ2 types), 1/4 (IQ3_XXS) or 1 (IQ3_S). Every bit pattern decodes to a value
// (grid indices cannot leave their codebooks); a NaN or Inf d gives NaN / Inf outputs.
#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace vela {

// IQ2_XXS, 2.06 bits per weight. Sub-block b uses qs[8b .. 8b+7]: bytes 0-3 are the grid indices
// (kIq2XxsGrid) of groups 0-3; bytes 4-7 form a little-endian uint32 whose bits 7l..7l+6 are
// group l's 7 stored sign bits (kIqSigns gives the 8th) and bits 28-31 the scale s. f = 1/8.
struct BlockIQ2_XXS {
  uint16_t d;             // fp16 super-scale
  uint8_t qs[kQK_K / 4];  // 8 bytes per sub-block, as above
};

// IQ2_XS, 2.31 bits per weight. qs[4b + l] is group l of sub-block b: bits 0-8 the grid index
// (kIq2XsGrid), bits 9-15 the 7 stored sign bits. scales[b]: low nibble s for groups 0-1
// (elements 0-15 of the sub-block), high nibble for groups 2-3. f = 1/8.
struct BlockIQ2_XS {
  uint16_t d;                  // fp16 super-scale
  uint16_t qs[kQK_K / 8];      // one per group of 8
  uint8_t scales[kQK_K / 32];  // two 4-bit scales per sub-block
};

// IQ2_S, 2.56 bits per weight. Group l of sub-block b: grid index (kIq2SGrid, 10 bits) =
// qs[4b + l] | ((qh[b] >> 2l) & 3) << 8; all 8 sign bits in signs[4b + l]. scales as IQ2_XS.
// f = 1/8.
struct BlockIQ2_S {
  uint16_t d;                  // fp16 super-scale
  uint8_t qs[kQK_K / 8];       // low 8 bits of the grid index of each group
  uint8_t signs[kQK_K / 8];    // sign bits of each group
  uint8_t qh[kQK_K / 32];      // per sub-block: 2 high index bits for each of its 4 groups
  uint8_t scales[kQK_K / 32];  // two 4-bit scales per sub-block
};

// IQ3_XXS, 3.06 bits per weight. Group l of sub-block b takes elements 0-3 from
// kIq3XxsGrid[qs[8b + 2l]] and 4-7 from kIq3XxsGrid[qs[8b + 2l + 1]]; scales_signs[4b .. 4b+3]
// is a little-endian uint32 holding the 7 stored sign bits of group l at bits 7l..7l+6 and the
// scale s at bits 28-31 (as IQ2_XXS's second word). f = 1/4.
struct BlockIQ3_XXS {
  uint16_t d;                       // fp16 super-scale
  uint8_t qs[kQK_K / 4];            // grid index of each half-group of 4
  uint8_t scales_signs[kQK_K / 8];  // one uint32 per sub-block, as above
};

// IQ3_S, 3.44 bits per weight. Half-group h (0, 1) of group l of sub-block b: grid index
// (kIq3SGrid, 9 bits) = qs[8b + 2l + h] | ((qh[b] >> (2l + h)) & 1) << 8; the group's 8 sign bits
// are signs[4b + l]. scales[b / 2]: low nibble s for even sub-blocks, high nibble for odd. f = 1.
struct BlockIQ3_S {
  uint16_t d;                  // fp16 super-scale
  uint8_t qs[kQK_K / 4];       // low 8 bits of the grid index of each half-group
  uint8_t qh[kQK_K / 32];      // per sub-block: the 9th index bit of its 8 half-groups
  uint8_t signs[kQK_K / 8];    // sign bits of each group
  uint8_t scales[kQK_K / 64];  // two 4-bit scales per byte
};

static_assert(sizeof(BlockIQ2_XXS) == 66, "IQ2_XXS block layout");
static_assert(sizeof(BlockIQ2_XS) == 74, "IQ2_XS block layout");
static_assert(sizeof(BlockIQ2_S) == 82, "IQ2_S block layout");
static_assert(sizeof(BlockIQ3_XXS) == 98, "IQ3_XXS block layout");
static_assert(sizeof(BlockIQ3_S) == 110, "IQ3_S block layout");
static_assert(offsetof(BlockIQ2_S, signs) == 34, "IQ2_S signs follow the index bytes");
static_assert(offsetof(BlockIQ3_XXS, scales_signs) == 66, "IQ3_XXS scales follow the indices");
static_assert(offsetof(BlockIQ3_S, signs) == 74, "IQ3_S signs follow qh");
static_assert(offsetof(BlockIQ3_S, scales) == 106, "IQ3_S scales come last");

}  // namespace vela

#pragma once
// On-disk block layouts of the 4-bit non-linear GGUF types, bit for bit: IQ4_NL, IQ4_XS and
// MXFP4. Each stores 4-bit indices into a fixed 16-entry table of int8 levels; a block (or, for
// IQ4_XS, each 32-element sub-block) scales the levels by one factor. Conventions as in
// quant/blocks.h: no padding (static_asserted), natural alignment, fp16 fields as raw bits,
// little-endian. Element order within every 32 elements is Q4_0's: byte j of the 16 nibble
// bytes holds element j in its low nibble and element j + 16 in its high nibble.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vela {

inline constexpr int64_t kQK4_NL = 32;     // elements per IQ4_NL block
inline constexpr int64_t kQKMXFP4 = 32;    // elements per MXFP4 block
inline constexpr int64_t kQK4_XS = 256;    // elements per IQ4_XS super-block
inline constexpr int kIQ4XSSubBlocks = 8;  // 32-element sub-blocks per IQ4_XS super-block

// The IQ4_NL / IQ4_XS levels, indexed by the 4-bit code: a non-uniform grid, denser near zero,
// fitted to roughly normal weights.
inline constexpr int8_t kIQ4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4's e2m1 values (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// their negatives; code 8 is -0) times 2, so that they are integers; the block scale is halved
// to match (e8m0_half_scale()).
inline constexpr int8_t kMXFP4Levels[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// x = d * kIQ4Levels[q].
struct BlockIQ4_NL {
  uint16_t d;               // fp16 scale
  uint8_t qs[kQK4_NL / 2];  // 4-bit codes, Q4_0's nibble order
};

// 256-element super-block of 8 sub-blocks of 32, each with a 6-bit scale sc in [0, 63]:
// x = d * (sc - 32) * kIQ4Levels[q].
struct BlockIQ4_XS {
  uint16_t d;                             // fp16 super-scale
  uint16_t scales_h;                      // bits 2j..2j+1: top 2 bits of sub-block j's scale
  uint8_t scales_l[kIQ4XSSubBlocks / 2];  // byte j / 2, nibble j % 2: low 4 bits of scale j
  uint8_t qs[kQK4_XS / 2];  // 16 bytes per sub-block (sub-block j at 16 j), Q4_0's nibble order
};

// OCP microscaling FP4: x = 2^(e - 127) * e2m1[q] = e8m0_half_scale(e) * kMXFP4Levels[q].
struct BlockMXFP4 {
  uint8_t e;                 // e8m0 scale: a biased power-of-two exponent, no sign or mantissa
  uint8_t qs[kQKMXFP4 / 2];  // 4-bit e2m1 codes, Q4_0's nibble order
};

static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block layout");
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block layout");
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block layout");
static_assert(offsetof(BlockIQ4_XS, qs) == 8, "IQ4_XS codes follow the scales");

// Half the value of an e8m0 scale byte, 2^(e - 128), the factor of the doubled kMXFP4Levels.
// Every byte decodes to a finite power of two: 0 and 1 to the subnormals 2^-128 and 2^-127, and
// 0xFF (NaN in the OCP spec) to 2^127, as ggml's CPU backend reads it (so its elements are
// +-Inf for codes of magnitude >= 1).
constexpr float e8m0_half_scale(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t(0x00200000) << e : uint32_t(e - 1) << 23);
}

// e8m0_half_scale() of every byte, for kernels that look the scale up rather than build it.
inline constexpr std::array<float, 256> kE8M0HalfScales = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[size_t(e)] = e8m0_half_scale(uint8_t(e));
  return t;
}();

// Sub-block j's (0..7) scale of an IQ4_XS super-block, minus 32: in [-32, 31].
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// All 8 six-bit scales of an IQ4_XS super-block at once (before the -32): byte j of the result
// is sub-block j's scale, in [0, 63]. Each step halves the width of the fields and moves the
// upper half of each up by the distance to its byte, so the SIMD kernels get the scales with a
// few integer operations instead of eight extractions.
inline uint64_t iq4_xs_packed_scales(const BlockIQ4_XS& b) {
  uint32_t l32;
  std::memcpy(&l32, b.scales_l, sizeof(l32));
  uint64_t low = l32;  // nibble j -> low 4 bits of byte j
  low = (low | (low << 16)) & 0x0000FFFF0000FFFFull;
  low = (low | (low << 8)) & 0x00FF00FF00FF00FFull;
  low = (low | (low << 4)) & 0x0F0F0F0F0F0F0F0Full;
  uint64_t high = b.scales_h;  // 2-bit field j -> bits 0-1 of byte j
  high = (high | (high << 24)) & 0x000000FF000000FFull;
  high = (high | (high << 12)) & 0x000F000F000F000Full;
  high = (high | (high << 6)) & 0x0303030303030303ull;
  return low | (high << 4);
}

}  // namespace vela

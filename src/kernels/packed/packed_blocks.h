#pragma once
// Weight layouts repacked at load for the int8 matrix kernels: 16 weight rows interleaved per
// 32-element block, so that one block of 16 rows is one AMX B tile (K/4 rows of 16 columns x 4
// bytes, the "VNNI" layout) and, for AVX-512 VNNI, eight 64-byte vectors whose dword lane n
// holds 4 consecutive weights of row n. Quants are stored unsigned (level + bias) because both
// vpdpbusd and tdpbsud take the unsigned operand second; the kernels subtract bias * sum(a).
// Same bytes per weight as the GGUF block they come from, so repacking keeps memory at file size.
#include <cstddef>
#include <cstdint>

namespace vela {

inline constexpr int kPackedRows = 16;    // weight rows per interleaved group
inline constexpr int kPackedBlockK = 32;  // elements per block (Q8_0 and Q4_0)

// 16 rows x one Q8_0 block: qs[j][n][i] = q(row n, element 4j + i) + 128.
struct BlockQ8_0x16 {
  uint16_t d[kPackedRows];             // fp16 scale of each row's block
  uint8_t qs[8][kPackedRows][4];       // biased levels, 0..255
};
static_assert(sizeof(BlockQ8_0x16) == 16 * 34, "16 Q8_0 blocks");

// 16 rows x one Q4_0 block (levels q = nibble, 0..15, value d * (q - 8)): byte qs[j][n][i] holds
// q(row n, element 4j + i) in its low nibble and q(row n, element 16 + 4j + i) in its high
// nibble, so masking gives the VNNI groups j and shifting the groups j + 4.
struct BlockQ4_0x16 {
  uint16_t d[kPackedRows];
  uint8_t qs[4][kPackedRows][4];
};
static_assert(sizeof(BlockQ4_0x16) == 16 * 18, "16 Q4_0 blocks");

inline constexpr int kQ8_0PackedBias = 128;
inline constexpr int kQ4_0PackedBias = 8;

}  // namespace vela

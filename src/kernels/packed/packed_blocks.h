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

inline constexpr int kPackedRows = 16;     // weight rows per interleaved group
inline constexpr int kPackedBlockK = 32;   // elements per block (Q8_0 and Q4_0)
inline constexpr int kPackedSuperK = 256;  // elements per K-quant super-block

// 16 rows x one Q8_0 block: qs[j][n][i] = q(row n, element 4j + i) + 128.
struct BlockQ8_0x16 {
  uint16_t d[kPackedRows];        // fp16 scale of each row's block
  uint8_t qs[8][kPackedRows][4];  // biased levels, 0..255
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

// The 5th bits of a Q5_0 / Q5_1 packed block, one byte plane for all 8 VNNI vectors: bit v of
// byte qh[n][i] is the 5th bit of row n's element 4v + i, the weight in byte (n, i) of vector v
// (v < 4: the low nibbles of qs[v], v >= 4: the high nibbles of qs[v - 4]). One shift and one
// mask move vector v's bits to the levels' bit 4. As GGUF, 4 bytes per row.
using PackedHighBits = uint8_t[kPackedRows][4];

// 16 rows x one Q5_0 block (value d * (q - 16), q = 0..31): Q4_0's nibble layout plus the 5th
// bits.
struct BlockQ5_0x16 {
  uint16_t d[kPackedRows];
  uint8_t qs[4][kPackedRows][4];
  PackedHighBits qh;
};
static_assert(sizeof(BlockQ5_0x16) == 16 * 22, "16 Q5_0 blocks");

// 16 rows x one Q4_1 block (value d * q + m, q = 0..15): Q4_0's nibble layout, the offsets
// beside the scales.
struct BlockQ4_1x16 {
  uint16_t d[kPackedRows];
  uint16_t m[kPackedRows];
  uint8_t qs[4][kPackedRows][4];
};
static_assert(sizeof(BlockQ4_1x16) == 16 * 20, "16 Q4_1 blocks");

// 16 rows x one Q5_1 block (value d * q + m, q = 0..31).
struct BlockQ5_1x16 {
  uint16_t d[kPackedRows];
  uint16_t m[kPackedRows];
  uint8_t qs[4][kPackedRows][4];
  PackedHighBits qh;
};
static_assert(sizeof(BlockQ5_1x16) == 16 * 24, "16 Q5_1 blocks");

// 16 rows x one IQ4_NL block (value d * kIQ4Levels[q], quant/blocks_nonlinear4.h): Q4_0's nibble
// layout, each nibble the index of a level in a 16-entry table, which the kernels look up with one
// byte shuffle per vector (the "codebook" formats, nibble_format.h).
struct BlockIQ4_NLx16 {
  uint16_t d[kPackedRows];
  uint8_t qs[4][kPackedRows][4];
};
static_assert(sizeof(BlockIQ4_NLx16) == 16 * 18, "16 IQ4_NL blocks");

// 16 rows x one MXFP4 block (value 2^(e - 128) * kMXFP4Levels[q], e8m0_half_scale): the nibbles
// as IQ4_NL's, the scales as the file's e8m0 bytes, which the kernels turn into f32 (exact:
// powers of two). f16 cannot hold them (2^-128 .. 2^127 against f16's 2^-24 .. 2^15), and f32
// would add 3 bytes per 17.
struct BlockMXFP4x16 {
  uint8_t e[kPackedRows];
  uint8_t qs[4][kPackedRows][4];
};
static_assert(sizeof(BlockMXFP4x16) == 16 * 17, "16 MXFP4 blocks");

// 16 rows x one Q4_K super-block (256 elements, 8 sub-blocks of 32; value of element l of
// sub-block j = d * scale_j * q - dmin * min_j, q = 0..15). The 6-bit scales and mins are stored
// decoded; the quant bytes keep their nibble pairing (sub-blocks 2p and 2p + 1 share bytes) in
// the VNNI layout: qs[p][g][n][i] = row n's qs[32p + 4g + i], so masking gives sub-block 2p's
// group g for all 16 rows and shifting gives sub-block 2p + 1's. The mins are stored in pairs
// (sub-blocks 2k, 2k + 1) so that, widened to int16, they meet the activations' block sums in one
// vpdpwssd. 64 bytes per 16 rows larger than the GGUF blocks (+2.8%): the decoded scales.
struct BlockQ4_Kx16 {
  uint16_t d[kPackedRows];               // fp16 super-scale of the scales
  uint16_t dmin[kPackedRows];            // fp16 super-scale of the mins
  uint8_t scale[8][kPackedRows];         // sub-block scales, 0..63
  uint8_t min_pairs[4][kPackedRows][2];  // [k][n] = {min of sub-block 2k, of 2k + 1}, 0..63
  uint8_t qs[4][8][kPackedRows][4];
};
static_assert(sizeof(BlockQ4_Kx16) == 16 * 144 + 64, "16 Q4_K super-blocks + decoded scales");

// 16 rows x one Q5_K super-block: Q4_K's layout for the low 4 bits, scales and mins, plus the
// 5th bits of each sub-block 2p + h as one byte plane for its 8 VNNI vectors, as Q5_0's: bit g of
// byte qh[p][h][n][i] is the 5th bit of the weight in byte (n, i) of vector qs[p][g]. A shift and
// a mask move vector g's bits to bit 4 (AVX2), or one vptestmb makes them a byte mask for a masked
// add of 16 (AVX-512). Value = d * scale_j * q - dmin * min_j, q = 0..31. Same 64 extra bytes as
// Q4_K (+2.3%).
struct BlockQ5_Kx16 {
  BlockQ4_Kx16 low;
  PackedHighBits qh[4][2];
};
static_assert(sizeof(BlockQ5_Kx16) == 16 * 176 + 64, "16 Q5_K super-blocks + decoded scales");

// The scales, mins and low 4 bits of a Q4_K or Q5_K packed block.
inline const BlockQ4_Kx16& k_scales(const BlockQ4_Kx16& b) {
  return b;
}
inline const BlockQ4_Kx16& k_scales(const BlockQ5_Kx16& b) {
  return b.low;
}

// 16 rows x one Q6_K super-block (16 sub-blocks of 16 elements; value = d * scale_s * (q - 32),
// q = 0..63 split into 4 low and 2 high bits). For sub-block s and its groups g = 0..3 of 4
// elements: ql[s][h] byte (n, i) holds the low bits of row n's element 16s + 4(2h) + i in its low
// nibble and of element 16s + 4(2h + 1) + i in its high nibble; qh[s] byte (n, i) holds the high
// bits of element 16s + 4g + i in bits 2g, 2g + 1. Same size as the GGUF blocks.
struct BlockQ6_Kx16 {
  uint16_t d[kPackedRows];
  int8_t scale[16][kPackedRows];  // [s][n]
  uint8_t ql[16][2][kPackedRows][4];
  uint8_t qh[16][kPackedRows][4];
};
static_assert(sizeof(BlockQ6_Kx16) == 16 * 210, "16 Q6_K super-blocks");

inline constexpr int kQ6_KOffset = 32;  // q - 32

// 16 rows x one IQ4_XS super-block (256 elements, 8 sub-blocks of 32; value of element l of
// sub-block j = d * (ls_j - 32) * kIQ4Levels[q], quant/blocks_nonlinear4.h). The 6-bit scales are
// stored decoded, minus 32 (-32..31), for one sign-extending load per sub-block; the nibbles of
// sub-block j in IQ4_NL's layout: qs[j][v][n][i] = row n's byte 16j + 4v + i (low nibble: element
// 32j + 4v + i, high: 32j + 16 + 4v + i), so masking gives VNNI vectors 0-3 and shifting 4-7.
// 32 bytes per 16 rows larger than the GGUF blocks (+1.5%): the decoded scales.
struct BlockIQ4_XSx16 {
  uint16_t d[kPackedRows];       // fp16 super-scale
  int8_t scale[8][kPackedRows];  // [j][n] = ls_j - 32
  uint8_t qs[8][4][kPackedRows][4];
};
static_assert(sizeof(BlockIQ4_XSx16) == 16 * 136 + 32, "16 IQ4_XS super-blocks + decoded scales");

// 16 rows x one Q3_K super-block (256 elements, 16 sub-blocks of 16; value of element k = d *
// (s_j - 32) * (q - 4), j = k / 16, q = 0..7: its 2 low bits plus 4 times its high bit). The
// 6-bit scales are stored decoded, minus 32 (-32..31), as IQ4_XS's. The quants keep the file's
// two bit planes, interleaved for the VNNI vectors: bits 2v, 2v + 1 of byte (n, i) of ql[j] are
// the low bits of row n's element 16j + 4v + i (vector v of sub-block j: a shift and a mask), and
// bit v of byte (n, i) of qh[p] is the high bit of element 32p + 4v + i (vector v of sub-block
// pair p, 2p's for v < 4, 2p + 1's for v >= 4: Q5_K's plane, one test or shift per vector). The
// kernels take q unsigned and the -4 through the activations' sub-block sums. 64 bytes per 16
// rows larger than the GGUF blocks (+3.6%): the decoded scales.
struct BlockQ3_Kx16 {
  uint16_t d[kPackedRows];         // [16 rows] fp16 super-scale
  int8_t scale[16][kPackedRows];   // [16 sub-blocks][16 rows] s_j - 32
  uint8_t ql[16][kPackedRows][4];  // [16 sub-blocks][16 rows][4 bytes] low 2-bit fields
  PackedHighBits qh[8];            // [8 sub-block pairs][16 rows][4 bytes] high bits
};
static_assert(sizeof(BlockQ3_Kx16) == 16 * 110 + 64, "16 Q3_K super-blocks + decoded scales");

inline constexpr int kQ3_KOffset = 4;  // q - 4

// 16 rows x one Q2_K super-block (256 elements, 16 sub-blocks of 16; value of element k = d *
// sc_j * q - dmin * m_j, j = k / 16, q = 0..3). The quants as Q3_K's low plane: bits 2v, 2v + 1
// of byte (n, i) of qs[j] are row n's element 16j + 4v + i (vector v of sub-block j: a shift and
// a mask). The scale and min nibbles stay the file's byte per sub-block (scale low, min high), the
// two sub-blocks of a pair side by side per row, so that one load widened to 16 bits puts row n's
// pair in dword n: the mins by one shift, the vpdpwssd / vpmaddwd operand that meets the
// activations' sub-block sum pairs (the -dmin * m_j * sum of sub-block j, as Q4_K's mins), the
// scales by a mask. Same size as the GGUF blocks: decoding the nibbles to bytes would add 19%
// (9.5% for the scales alone).
struct BlockQ2_Kx16 {
  uint16_t d[kPackedRows];               // [16 rows] fp16 super-scale of the scales
  uint16_t dmin[kPackedRows];            // [16 rows] fp16 super-scale of the mins
  uint8_t scale_min[8][kPackedRows][2];  // [8 sub-block pairs][16 rows][2] file's scales[j]
  uint8_t qs[16][kPackedRows][4];        // [16 sub-blocks][16 rows][4 bytes] 2-bit fields
};
static_assert(sizeof(BlockQ2_Kx16) == 16 * 84, "16 Q2_K super-blocks");

// 16 rows x one TQ2_0 super-block (256 elements, value of element k = d * (q - 1), q = 0..3).
// The quants as Q2_K's plane: bits 2v, 2v + 1 of byte (n, i) of qs[j] are row n's element
// 16j + 4v + i. The kernels take q unsigned and the -1 through the activations' block sum. The
// GGUF blocks' bytes exactly.
struct BlockTQ2_0x16 {
  uint16_t d[kPackedRows];         // [16 rows] fp16 scale
  uint8_t qs[16][kPackedRows][4];  // [16 sub-blocks of 16][16 rows][4 bytes] 2-bit fields
};
static_assert(sizeof(BlockTQ2_0x16) == 16 * 66, "16 TQ2_0 super-blocks");

// F32, F16 and BF16 weights in 16-row groups of the whole row length: group g holds rows 16 g ..
// 16 g + 15 with element k of row n at slot (k / P) * 16 P + n P + k % P, so one vector load at a
// column (F32, F16: P = 1; 16 rows) or a column pair (BF16: P = 2, the pairs vdpbf16ps multiplies)
// holds that column of all 16 rows. Same bytes as the GGUF rows.
inline constexpr int kBf16PackedPair = 2;

inline constexpr int kQ8_0PackedBias = 128;
inline constexpr int kQ4_0PackedBias = 8;
inline constexpr int kQ5_0PackedBias = 16;
// The codebook formats' levels as the unsigned bytes the VNNI kernels' table lookup gives
// (IQ4_NL: 1..241, MXFP4: 116..140).
inline constexpr int kCodebookPackedBias = 128;

}  // namespace vela

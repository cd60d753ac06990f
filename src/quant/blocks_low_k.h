#pragma once
// On-disk block layouts of the 2- and 3-bit K types (Q2_K, Q3_K) and the ternary types (TQ1_0,
// TQ2_0), bit for bit, in the conventions of quant/blocks.h (no padding, natural alignment,
// fp16 fields as raw bits, little-endian). All four are 256-element super-blocks dotted with
// Q8_K activations.
//
// Element order shared by Q2_K, Q3_K and TQ2_0: the 64 bytes of 2-bit fields form two halves of
// 32 bytes; element e = 128 h + 32 k + l (h < 2, k < 4, l < 32) sits in bits 2k..2k+1 of byte
// 32 h + l. Q2_K and Q3_K group elements into 16 sub-blocks of 16 (sub-block e / 16).
#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace vela {

// Sub-blocks of 16 elements per K super-block (Q2_K, Q3_K).
inline constexpr int kLowKSubBlocks = 16;
// Bytes of TQ1_0's 5-trit field and 4-trit field.
inline constexpr int kTq1TritBytes = 48;  // 240 elements, 5 per byte
inline constexpr int kTq1TailBytes = 4;   // the last 16 elements, 4 per byte

// 2-bit K super-block: x = d * sc * q - dmin * mn, q in [0, 3], with a 4-bit scale sc and a
// 4-bit min mn per sub-block of 16.
struct BlockQ2_K {
  uint8_t scales[kLowKSubBlocks];  // byte j: sub-block j's sc (low nibble), mn (high nibble)
  uint8_t qs[kQK_K / 4];           // 2-bit levels (order: see the top of this file)
  uint16_t d;                      // fp16 super-scale of the sub-block scales
  uint16_t dmin;                   // fp16 super-scale of the sub-block mins
};

// 3-bit K super-block: x = d * (s - 32) * (q - 4), q in [0, 7], with a 6-bit s per sub-block of
// 16. q's low 2 bits are in qs, its third bit in hmask.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];      // byte l, bit 4h + k: third bit of element 128 h + 32 k + l
  uint8_t qs[kQK_K / 4];         // low 2 bits (order: see the top of this file)
  uint8_t scales[kKScaleBytes];  // 16 six-bit scales (see q3_k_scale())
  uint16_t d;                    // fp16 super-scale
};

// Ternary super-block packed in base 3: x = d * (t - 1), t in {0, 1, 2}.
// A byte holding trits t_0..t_{m-1} (m = 5 in qs, 4 in qh) stores the fraction
// 0.t_0 t_1 ... in base 3 scaled to 256 (rounded up), so trit n is read by multiplying the byte
// by 3^n modulo 256 (dropping the trits before it) and taking the top "digit" of 3 * that / 256:
// see tq1_trit(). Every byte value decodes to trits in {0, 1, 2}.
// Elements: qs[0..31] trit n -> element 32 n + m (byte m), 160 elements; qs[32..47] trit n ->
// element 160 + 16 n + m (byte 32 + m), 80 elements; qh[j] trit n -> element 240 + 4 n + j.
struct BlockTQ1_0 {
  uint8_t qs[kTq1TritBytes];  // 5 trits per byte
  uint8_t qh[kTq1TailBytes];  // 4 trits per byte
  uint16_t d;                 // fp16 scale
};

// Ternary super-block with 2 bits per element: x = d * (q - 1), q in [0, 3] (a well-formed file
// uses 0..2; 3 decodes to 2 d). Order: see the top of this file.
struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;  // fp16 scale
};

static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block layout");
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block layout");
static_assert(sizeof(BlockTQ1_0) == 54, "TQ1_0 block layout");
static_assert(sizeof(BlockTQ2_0) == 66, "TQ2_0 block layout");
static_assert(offsetof(BlockQ2_K, d) == 80, "Q2_K scales follow the quants");
static_assert(offsetof(BlockQ3_K, d) == 108, "Q3_K scale sits at the end");
static_assert(offsetof(BlockTQ1_0, d) == 52, "TQ1_0 scale sits at the end");
static_assert(offsetof(BlockTQ2_0, d) == 64, "TQ2_0 scale sits at the end");

// Q3_K sub-block j's (0..15) signed scale s - 32, in [-32, 31]. The low 4 bits of s are the low
// (j < 8) or high (j >= 8) nibble of scales[j % 8]; its top 2 bits are bits 2 (j / 4) .. +1 of
// scales[8 + j % 4].
inline int q3_k_scale(int j, const uint8_t* scales) {
  const int low = (scales[j % 8] >> (4 * (j / 8))) & 0x0F;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Trit n (0..4) of a TQ1_0 byte: (byte * 3^n mod 256) * 3 / 256, rounded down.
inline int tq1_trit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t shifted = uint8_t(byte * kPow3[n]);  // modulo 256: drops trits 0..n-1
  return (int(shifted) * 3) >> 8;
}

}  // namespace vela

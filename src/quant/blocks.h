#pragma once
// On-disk block layouts of the GGUF/ggml quantized tensor types, bit for bit.
// Each struct has no padding (static_asserted) and natural alignment, which is what ggml uses:
// GGUF aligns tensor data to >= 32 bytes and rows are whole blocks, so every block in a tensor
// sits at a properly aligned address. Half-precision fields are raw IEEE fp16 bits (uint16_t);
// convert them with util/half.h. All multi-byte fields are little-endian (the engine targets
// little-endian hosts only).
#include <cstddef>
#include <cstdint>

namespace vela {

// Elements per block.
inline constexpr int64_t kQK4_0 = 32;
inline constexpr int64_t kQK4_1 = 32;
inline constexpr int64_t kQK5_0 = 32;
inline constexpr int64_t kQK5_1 = 32;
inline constexpr int64_t kQK8_0 = 32;
inline constexpr int64_t kQK8_1 = 32;
inline constexpr int64_t kQK_K = 256;  // super-block size of the K types
// Bytes holding the packed 6-bit scales and mins of Q4_K / Q5_K.
inline constexpr int64_t kKScaleBytes = 12;

// 4-bit symmetric: x = d * (q - 8), q in [0, 15].
struct BlockQ4_0 {
  uint16_t d;              // fp16 scale
  uint8_t qs[kQK4_0 / 2];  // byte j: low nibble = element j, high nibble = element j + 16
};

// 4-bit affine: x = d * q + m, q in [0, 15].
struct BlockQ4_1 {
  uint16_t d;              // fp16 scale
  uint16_t m;              // fp16 offset (the block minimum)
  uint8_t qs[kQK4_1 / 2];  // same nibble order as Q4_0
};

// 5-bit symmetric: x = d * (q - 16), q in [0, 31].
struct BlockQ5_0 {
  uint16_t d;              // fp16 scale
  uint8_t qh[4];           // little-endian uint32: bit j is the 5th bit of element j
  uint8_t qs[kQK5_0 / 2];  // low 4 bits, same nibble order as Q4_0
};

// 5-bit affine: x = d * q + m, q in [0, 31].
struct BlockQ5_1 {
  uint16_t d;              // fp16 scale
  uint16_t m;              // fp16 offset
  uint8_t qh[4];           // as in Q5_0
  uint8_t qs[kQK5_1 / 2];  // as in Q5_0
};

// 8-bit symmetric: x = d * q.
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK8_0];
};

// 8-bit symmetric activation block that also carries s = d * sum(qs), which lets the dot
// product with an affine (_1) weight block add the weight offset term without a second pass.
struct BlockQ8_1 {
  uint16_t d;  // fp16 scale
  uint16_t s;  // fp16 d * sum(qs)
  int8_t qs[kQK8_1];
};

// 4-bit K super-block: 8 sub-blocks of 32, each with a 6-bit scale sc and 6-bit min mn:
// x = d * sc * q - dmin * mn, q in [0, 15].
struct BlockQ4_K {
  uint16_t d;                    // fp16 super-scale of the sub-block scales
  uint16_t dmin;                 // fp16 super-scale of the sub-block mins
  uint8_t scales[kKScaleBytes];  // 8 scales + 8 mins, 6 bits each (see k_scale_min())
  uint8_t qs[kQK_K / 2];         // 4 groups of 32 bytes; group g holds sub-blocks 2g (low
                                 // nibbles) and 2g+1 (high nibbles)
};

// 5-bit K super-block: as Q4_K plus a 5th bit, q in [0, 31].
struct BlockQ5_K {
  uint16_t d;                    // fp16 super-scale of the sub-block scales
  uint16_t dmin;                 // fp16 super-scale of the sub-block mins
  uint8_t scales[kKScaleBytes];  // as in Q4_K
  uint8_t qh[kQK_K / 8];         // byte l, bit s: 5th bit of element l + 32 * s
  uint8_t qs[kQK_K / 2];         // low 4 bits, laid out as Q4_K's qs
};

// 6-bit K super-block: 16 sub-blocks of 16 with signed 8-bit scales:
// x = d * scales[i / 16] * (q - 32), q in [0, 63].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits (layout: see dequantize_row_q6_k)
  uint8_t qh[kQK_K / 4];      // high 2 bits, four elements per byte
  int8_t scales[kQK_K / 16];  // per-sub-block scales
  uint16_t d;                 // fp16 super-scale
};

// 8-bit K activation block: x = d * q, with bsums[i] = sum of qs[16 i .. 16 i + 15], used by
// the dot products to apply the weight mins without touching every element again.
struct BlockQ8_K {
  float d;  // fp32 scale
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block layout");
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block layout");
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block layout");
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block layout");
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block layout");
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block layout");
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block layout");
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block layout");
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block layout");
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block layout");
static_assert(offsetof(BlockQ6_K, d) == 208, "Q6_K scale sits after the quants");
static_assert(offsetof(BlockQ8_K, bsums) == 260, "Q8_K bsums follow the quants");

// Unpacks sub-block j's (0..7) 6-bit scale and min from a Q4_K/Q5_K `scales` array.
// Sub-blocks 0-3 use the low 6 bits of bytes j (scale) and j+4 (min); sub-blocks 4-7 keep their
// low 4 bits in byte j+4 (scale low nibble, min high nibble) and their top 2 bits in the spare
// top bits of bytes j-4 (scale) and j (min).
inline void k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = uint8_t((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
    *min = uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Inverse of k_scale_min: packs 8 six-bit scales and mins (each < 64) into 12 bytes.
inline void k_pack_scale_min(const uint8_t* scale, const uint8_t* min, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = uint8_t((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    scales[j + 4] = uint8_t((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    scales[j + 8] = uint8_t((scale[j + 4] & 0x0F) | ((min[j + 4] & 0x0F) << 4));
  }
}

}  // namespace vela

#include "quant/dequantize_iq23.h"

#include <cassert>
#include <cstring>

#include "quant/blocks_iq23.h"
#include "quant/iq23_grids.h"
#include "util/half.h"

namespace vela {

namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Writes the 8 elements of one group: scale * magnitude_j, negated where sign bit j is set.
// `scale` already holds d * ls * f. mag: [8] magnitudes; dst: [8] f32.
void write_group(const uint8_t* mag, uint8_t signs, float scale, float* dst) {
  for (int j = 0; j < 8; ++j) {
    const float v = scale * float(mag[j]);
    dst[j] = (signs >> j) & 1 ? -v : v;
  }
}

// The 8 magnitudes of a codebook entry of 8 bytes, or of two of 4 bytes (first, second).
void grid8(uint64_t entry, uint8_t* mag) {
  std::memcpy(mag, &entry, 8);
}
void grid4x2(uint32_t first, uint32_t second, uint8_t* mag) {
  std::memcpy(mag, &first, 4);
  std::memcpy(mag + 4, &second, 4);
}

// ls = 2 s + 1 for a 4-bit scale s.
float odd_scale(uint32_t s) {
  return float(2 * (s & 15) + 1);
}

}  // namespace

void dequantize_row_iq2_xxs(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ2_XXS*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ2_XXS& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int sb = 0; sb < 8; ++sb, dst += 32) {
      const uint8_t* q = blk.qs + 8 * sb;
      const uint32_t aux = load_u32(q + 4);  // 4 x 7 sign bits, then the scale in bits 28-31
      const float scale = d * odd_scale(aux >> 28) * 0.125f;
      for (int l = 0; l < 4; ++l) {
        uint8_t mag[8];
        grid8(kIq2XxsGrid[q[l]], mag);
        write_group(mag, iq_sign_byte(aux >> (7 * l)), scale, dst + 8 * l);
      }
    }
  }
}

void dequantize_row_iq2_xs(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ2_XS*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ2_XS& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int sb = 0; sb < 8; ++sb, dst += 32) {
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = blk.qs[4 * sb + l];
        const float scale = d * odd_scale(blk.scales[sb] >> (4 * (l / 2))) * 0.125f;
        uint8_t mag[8];
        grid8(kIq2XsGrid[q & 511], mag);
        write_group(mag, iq_sign_byte(q >> 9), scale, dst + 8 * l);
      }
    }
  }
}

void dequantize_row_iq2_s(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ2_S*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ2_S& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int sb = 0; sb < 8; ++sb, dst += 32) {
      for (int l = 0; l < 4; ++l) {
        const int g = 4 * sb + l;
        const int index = blk.qs[g] | (((blk.qh[sb] >> (2 * l)) & 3) << 8);
        const float scale = d * odd_scale(blk.scales[sb] >> (4 * (l / 2))) * 0.125f;
        uint8_t mag[8];
        grid8(kIq2SGrid[index], mag);
        write_group(mag, blk.signs[g], scale, dst + 8 * l);
      }
    }
  }
}

void dequantize_row_iq3_xxs(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ3_XXS*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ3_XXS& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int sb = 0; sb < 8; ++sb, dst += 32) {
      const uint8_t* q = blk.qs + 8 * sb;
      const uint32_t aux = load_u32(blk.scales_signs + 4 * sb);
      const float scale = d * odd_scale(aux >> 28) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        uint8_t mag[8];
        grid4x2(kIq3XxsGrid[q[2 * l]], kIq3XxsGrid[q[2 * l + 1]], mag);
        write_group(mag, iq_sign_byte(aux >> (7 * l)), scale, dst + 8 * l);
      }
    }
  }
}

void dequantize_row_iq3_s(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ3_S*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockIQ3_S& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int sb = 0; sb < 8; ++sb, dst += 32) {
      const uint8_t* q = blk.qs + 8 * sb;
      const float scale = d * odd_scale(blk.scales[sb / 2] >> (4 * (sb % 2)));
      for (int l = 0; l < 4; ++l) {
        const int lo = q[2 * l] | (((blk.qh[sb] >> (2 * l)) & 1) << 8);
        const int hi = q[2 * l + 1] | (((blk.qh[sb] >> (2 * l + 1)) & 1) << 8);
        uint8_t mag[8];
        grid4x2(kIq3SGrid[lo], kIq3SGrid[hi], mag);
        write_group(mag, blk.signs[4 * sb + l], scale, dst + 8 * l);
      }
    }
  }
}

}  // namespace vela

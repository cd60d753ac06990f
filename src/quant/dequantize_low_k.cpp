#include "quant/dequantize_low_k.h"

#include <cassert>

#include "quant/blocks_low_k.h"
#include "util/half.h"

namespace vela {

namespace {

// The 2-bit field of element e = 128 h + 32 k + l of a Q2_K / Q3_K / TQ2_0 super-block.
// qs: [64] bytes.
inline int two_bit_level(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
}

}  // namespace

void dequantize_row_q2_k(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ2_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ2_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    const float dmin = fp16_to_fp32(blk.dmin);
    for (int j = 0; j < kLowKSubBlocks; ++j) {
      const float scale = d * float(blk.scales[j] & 0x0F);
      const float offset = dmin * float(blk.scales[j] >> 4);
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        dst[e] = scale * float(two_bit_level(blk.qs, e)) - offset;
      }
    }
  }
}

void dequantize_row_q3_k(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ3_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ3_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int j = 0; j < kLowKSubBlocks; ++j) {
      const float scale = d * float(q3_k_scale(j, blk.scales));
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int third_bit = (blk.hmask[e % 32] >> (e / 32)) & 1;
        const int q = two_bit_level(blk.qs, e) | (third_bit << 2);
        dst[e] = scale * float(q - 4);
      }
    }
  }
}

void dequantize_row_tq1_0(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockTQ1_0*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockTQ1_0& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int t = 0; t < 5; ++t) {
      for (int m = 0; m < 32; ++m) dst[32 * t + m] = float(tq1_trit(blk.qs[m], t) - 1) * d;
      for (int m = 0; m < 16; ++m) {
        dst[160 + 16 * t + m] = float(tq1_trit(blk.qs[32 + m], t) - 1) * d;
      }
    }
    for (int t = 0; t < 4; ++t) {
      for (int j = 0; j < kTq1TailBytes; ++j) {
        dst[240 + 4 * t + j] = float(tq1_trit(blk.qh[j], t) - 1) * d;
      }
    }
  }
}

void dequantize_row_tq2_0(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockTQ2_0*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int e = 0; e < kQK_K; ++e) dst[e] = float(two_bit_level(blocks[b].qs, e) - 1) * d;
  }
}

}  // namespace vela

#include "quant/dequantize_iq1.h"

#include <cassert>

#include "quant/blocks_iq1.h"
#include "quant/iq1_grid.h"
#include "util/half.h"

namespace vela {

namespace {

// Writes the 8 elements of codebook entry `index` as scale * (g_j + delta): dst [8] f32.
void decode_group(uint32_t index, float scale, float delta, float* dst) {
  for (int j = 0; j < 8; ++j) dst[j] = scale * (float(iq1_grid_value(index, j)) + delta);
}

}  // namespace

void dequantize_row_iq1_s(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ1_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ1_S& blk = blocks[i];
    const float d = fp16_to_fp32(blk.d);
    for (int b = 0; b < 8; ++b) {
      const float scale = d * float(2 * ((blk.qh[b] >> 12) & 7) + 1);
      const float delta = (blk.qh[b] & 0x8000) ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, dst += 8) decode_group(iq1_s_index(blk, b, l), scale, delta, dst);
    }
  }
}

void dequantize_row_iq1_m(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockIQ1_M*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ1_M& blk = blocks[i];
    const float d = fp16_to_fp32(iq1m_scale_bits(blk));
    for (int g = 0; g < 32; ++g, dst += 8) {
      const float scale = d * float(2 * iq1_m_scale(blk, g / 2) + 1);  // 16 elements per scale
      const uint32_t nibble = iq1_m_nibble(blk, g);
      const float delta = (nibble & 8) ? -kIq1Delta : kIq1Delta;
      decode_group(uint32_t(blk.qs[g]) | (nibble & 7) << 8, scale, delta, dst);
    }
  }
}

}  // namespace vela

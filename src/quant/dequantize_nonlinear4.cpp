#include "quant/dequantize_nonlinear4.h"

#include <cassert>

#include "quant/blocks_nonlinear4.h"
#include "util/half.h"

namespace vela {

namespace {

// 16 nibble bytes -> 32 elements scale * levels[code], Q4_0's element order.
// qs: [16] packed codes; dst: [32] f32.
void decode_32(const uint8_t* qs, const int8_t* levels, float scale, float* dst) {
  for (int j = 0; j < 16; ++j) {
    dst[j] = scale * float(levels[qs[j] & 0x0F]);
    dst[j + 16] = scale * float(levels[qs[j] >> 4]);
  }
}

}  // namespace

void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n) {
  assert(n % kQK4_NL == 0);
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t b = 0; b < n / kQK4_NL; ++b, dst += kQK4_NL) {
    decode_32(blocks[b].qs, kIQ4Levels, fp16_to_fp32(blocks[b].d), dst);
  }
}

void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n) {
  assert(n % kQK4_XS == 0);
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t b = 0; b < n / kQK4_XS; ++b) {
    const BlockIQ4_XS& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int j = 0; j < kIQ4XSSubBlocks; ++j, dst += 32) {
      decode_32(blk.qs + 16 * j, kIQ4Levels, d * float(iq4_xs_scale(blk, j)), dst);
    }
  }
}

void dequantize_row_mxfp4(const void* src, float* dst, int64_t n) {
  assert(n % kQKMXFP4 == 0);
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t b = 0; b < n / kQKMXFP4; ++b, dst += kQKMXFP4) {
    decode_32(blocks[b].qs, kMXFP4Levels, e8m0_half_scale(blocks[b].e), dst);
  }
}

}  // namespace vela

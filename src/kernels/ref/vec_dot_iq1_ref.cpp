#include "kernels/ref/vec_dot_iq1_ref.h"

#include <cassert>

#include "quant/blocks.h"
#include "quant/blocks_iq1.h"
#include "quant/iq1_grid.h"
#include "util/half.h"

namespace vela::kernels::ref {

namespace {

// g . p over one group of 8: codebook entry `index` against act [8] int8.
int group_dot(uint32_t index, const int8_t* act) {
  int sum = 0;
  for (int j = 0; j < 8; ++j) sum += iq1_grid_value(index, j) * act[j];
  return sum;
}

}  // namespace

float vec_dot_iq1_s_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockIQ1_S*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ1_S& blk = wb[i];
    const int8_t* act = ab[i].qs;
    int eighths = 0;  // S: the super-block's sum in units of d_w * d_a / 8
    for (int b = 0; b < 8; ++b) {
      const int ls = 2 * ((blk.qh[b] >> 12) & 7) + 1;
      int dot = 0;
      for (int l = 0; l < 4; ++l) dot += group_dot(iq1_s_index(blk, b, l), act + 32 * b + 8 * l);
      const int act_sum = ab[i].bsums[2 * b] + ab[i].bsums[2 * b + 1];
      eighths += ls * (8 * dot + ((blk.qh[b] & 0x8000) ? -act_sum : act_sum));
    }
    // |S| <= 15 * 9 * 256 * 127 < 2^23: exact in float, and so is S / 8.
    sum += (fp16_to_fp32(blk.d) * ab[i].d) * (float(eighths) * kIq1Delta);
  }
  return sum;
}

float vec_dot_iq1_m_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockIQ1_M*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ1_M& blk = wb[i];
    const int8_t* act = ab[i].qs;
    int eighths = 0;                // S, as for IQ1_S
    for (int k = 0; k < 16; ++k) {  // 16 elements (two groups) per scale
      const int ls = 2 * int(iq1_m_scale(blk, k)) + 1;
      int part = 0;
      for (int g = 2 * k; g < 2 * k + 2; ++g) {
        const uint32_t nibble = iq1_m_nibble(blk, g);
        const int8_t* p = act + 8 * g;
        int act_sum = 0;
        for (int j = 0; j < 8; ++j) act_sum += p[j];
        part += 8 * group_dot(uint32_t(blk.qs[g]) | (nibble & 7) << 8, p) +
                ((nibble & 8) ? -act_sum : act_sum);
      }
      eighths += ls * part;
    }
    sum += (fp16_to_fp32(iq1m_scale_bits(blk)) * ab[i].d) * (float(eighths) * kIq1Delta);
  }
  return sum;
}

}  // namespace vela::kernels::ref

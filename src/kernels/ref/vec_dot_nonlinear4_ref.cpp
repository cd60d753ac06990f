#include "kernels/ref/vec_dot_nonlinear4_ref.h"

#include <cassert>

#include "quant/blocks.h"
#include "quant/blocks_nonlinear4.h"
#include "util/half.h"

namespace vela::kernels::ref {

namespace {

// sum_l levels[code_l] * act_l over 32 elements: qs [16] packed codes (Q4_0's nibble order),
// act [32] int8. At most 32 * 127 * 127 in magnitude.
int codes_dot_32(const uint8_t* qs, const int8_t* levels, const int8_t* act) {
  int sum = 0;
  for (int j = 0; j < 16; ++j) {
    sum += levels[qs[j] & 0x0F] * act[j];
    sum += levels[qs[j] >> 4] * act[j + 16];
  }
  return sum;
}

}  // namespace

float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a) {
  assert(n % kQK4_NL == 0);
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK4_NL; ++b) {
    const int isum = codes_dot_32(wb[b].qs, kIQ4Levels, ab[b].qs);
    sum += float(isum) * (fp16_to_fp32(wb[b].d) * fp16_to_fp32(ab[b].d));
  }
  return sum;
}

float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a) {
  assert(n % kQKMXFP4 == 0);
  const auto* wb = static_cast<const BlockMXFP4*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQKMXFP4; ++b) {
    const int isum = codes_dot_32(wb[b].qs, kMXFP4Levels, ab[b].qs);
    sum += float(isum) * (e8m0_half_scale(wb[b].e) * fp16_to_fp32(ab[b].d));
  }
  return sum;
}

float vec_dot_iq4_xs_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK4_XS == 0);
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK4_XS; ++b) {
    // |scale| <= 32 and |sub-block sum| <= 32 * 127 * 127, so 8 of them stay below 2^28.
    int isum = 0;
    for (int j = 0; j < kIQ4XSSubBlocks; ++j) {
      isum +=
          iq4_xs_scale(wb[b], j) * codes_dot_32(wb[b].qs + 16 * j, kIQ4Levels, ab[b].qs + 32 * j);
    }
    sum += float(isum) * (fp16_to_fp32(wb[b].d) * ab[b].d);
  }
  return sum;
}

}  // namespace vela::kernels::ref

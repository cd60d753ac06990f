#include "kernels/ref/vec_dot_low_k_ref.h"

#include <cassert>

#include "quant/blocks_low_k.h"
#include "util/half.h"

namespace vela::kernels::ref {

namespace {

// Sum of the 2-bit levels of elements 16 j .. 16 j + 15 (order: quant/blocks_low_k.h) times the
// activation quants act[0..15]. qs: [64] bytes.
int subblock_dot_2bit(const uint8_t* qs, int j, const int8_t* act) {
  const uint8_t* q = qs + 32 * (j / 8) + 16 * (j % 2);  // bytes of the sub-block's 16 elements
  const int shift = 2 * (j / 2 % 4);
  int sum = 0;
  for (int l = 0; l < 16; ++l) sum += ((q[l] >> shift) & 3) * act[l];
  return sum;
}

// Sum of all 256 activation quants of a Q8_K block (the ternary types' -1 offset).
int activation_sum(const BlockQ8_K& a) {
  int sum = 0;
  for (int i = 0; i < kQK_K / 16; ++i) sum += a.bsums[i];
  return sum;
}

}  // namespace

float vec_dot_q2_k_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int scaled_dot = 0;  // sum_j sc_j (q . p)_j
    int scaled_min = 0;  // sum_j mn_j bsum_j
    for (int j = 0; j < kLowKSubBlocks; ++j) {
      const int sc = wb[b].scales[j] & 0x0F;
      const int mn = wb[b].scales[j] >> 4;
      scaled_dot += sc * subblock_dot_2bit(wb[b].qs, j, ab[b].qs + 16 * j);
      scaled_min += mn * ab[b].bsums[j];
    }
    const float d = fp16_to_fp32(wb[b].d) * ab[b].d;
    const float dmin = fp16_to_fp32(wb[b].dmin) * ab[b].d;
    sum += d * float(scaled_dot) - dmin * float(scaled_min);
  }
  return sum;
}

float vec_dot_q3_k_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ3_K& blk = wb[b];
    int isum = 0;  // sum_j (s_j - 32) sum_e (q_e - 4) p_e
    for (int j = 0; j < kLowKSubBlocks; ++j) {
      int dot = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int low = (blk.qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
        const int third_bit = (blk.hmask[e % 32] >> (e / 32)) & 1;
        dot += ((low | (third_bit << 2)) - 4) * ab[b].qs[e];
      }
      isum += q3_k_scale(j, blk.scales) * dot;
    }
    sum += (fp16_to_fp32(blk.d) * ab[b].d) * float(isum);
  }
  return sum;
}

float vec_dot_tq1_0_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockTQ1_0*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockTQ1_0& blk = wb[b];
    const int8_t* p = ab[b].qs;
    int tsum = 0;  // sum_e t_e p_e; the weight is t - 1
    for (int t = 0; t < 5; ++t) {
      for (int m = 0; m < 32; ++m) tsum += tq1_trit(blk.qs[m], t) * p[32 * t + m];
      for (int m = 0; m < 16; ++m) tsum += tq1_trit(blk.qs[32 + m], t) * p[160 + 16 * t + m];
    }
    for (int t = 0; t < 4; ++t) {
      for (int j = 0; j < kTq1TailBytes; ++j) tsum += tq1_trit(blk.qh[j], t) * p[240 + 4 * t + j];
    }
    const int isum = tsum - activation_sum(ab[b]);
    sum += (fp16_to_fp32(blk.d) * ab[b].d) * float(isum);
  }
  return sum;
}

float vec_dot_tq2_0_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockTQ2_0*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int qsum = 0;  // sum_e q_e p_e; the weight is q - 1
    for (int j = 0; j < kLowKSubBlocks; ++j) {
      qsum += subblock_dot_2bit(wb[b].qs, j, ab[b].qs + 16 * j);
    }
    const int isum = qsum - activation_sum(ab[b]);
    sum += (fp16_to_fp32(wb[b].d) * ab[b].d) * float(isum);
  }
  return sum;
}

}  // namespace vela::kernels::ref

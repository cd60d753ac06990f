#include "kernels/ref/vec_dot_ref.h"

#include <cassert>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "util/half.h"

namespace vela::kernels::ref {

namespace {

uint32_t load_qh(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return bits;
}

// Sum over one sub-block of 32 K-type weights: levels (4 bits, plus a 5th bit when qh is given)
// times the activation quants. The affine offset is handled separately through bsums.
int subblock_dot_k(const uint8_t* qs, int shift, const uint8_t* qh, int qh_bit, const int8_t* act) {
  int sum = 0;
  for (int l = 0; l < 32; ++l) {
    int level = (qs[l] >> shift) & 0x0F;
    if (qh != nullptr) level |= ((qh[l] >> qh_bit) & 1) << 4;
    sum += level * act[l];
  }
  return sum;
}

// Shared by Q4_K and Q5_K (qh == nullptr for Q4_K): per super-block, the integer sum of
// scale_j * (levels . act) and the integer sum of min_j * (activation sum of sub-block j).
template <class Block>
float vec_dot_affine_k(int64_t n, const Block* w, const BlockQ8_K* a) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const Block& wb = w[b];
    const BlockQ8_K& ab = a[b];
    int scaled_dot = 0;
    int scaled_min = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      k_scale_min(j, wb.scales, &sc, &mn);
      const uint8_t* qh = nullptr;
      if constexpr (std::is_same_v<Block, BlockQ5_K>) qh = wb.qh;
      const int dot = subblock_dot_k(wb.qs + 32 * (j / 2), 4 * (j % 2), qh, j, ab.qs + 32 * j);
      scaled_dot += int(sc) * dot;
      scaled_min += int(mn) * (ab.bsums[2 * j] + ab.bsums[2 * j + 1]);
    }
    const float d = fp16_to_fp32(wb.d) * ab.d;
    const float dmin = fp16_to_fp32(wb.dmin) * ab.d;
    sum += d * float(scaled_dot) - dmin * float(scaled_min);
  }
  return sum;
}

}  // namespace

float vec_dot_f32_f32(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;  // double, as ggml's scalar path: keeps long rows accurate
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * y[i]);
  return float(sum);
}

float vec_dot_f16_f16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  return float(sum);
}

float vec_dot_f16_f32(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(fp16_to_fp32(x[i]) * y[i]);
  return float(sum);
}

float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  return float(sum);
}

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a) {
  assert(n % kQK8_0 == 0);
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((wb[b].qs[j] & 0x0F) - 8) * ab[b].qs[j];
      isum += ((wb[b].qs[j] >> 4) - 8) * ab[b].qs[j + 16];
    }
    sum += float(isum) * (fp16_to_fp32(wb[b].d) * fp16_to_fp32(ab[b].d));
  }
  return sum;
}

float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a) {
  assert(n % kQK8_1 == 0);
  const auto* wb = static_cast<const BlockQ4_1*>(w);
  const auto* ab = static_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_1; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (wb[b].qs[j] & 0x0F) * ab[b].qs[j];
      isum += (wb[b].qs[j] >> 4) * ab[b].qs[j + 16];
    }
    // sum_i (d_w q_i + m_w) d_a p_i = d_w d_a sum q_i p_i + m_w (d_a sum p_i), the last factor
    // being the activation block's s.
    sum += (fp16_to_fp32(wb[b].d) * fp16_to_fp32(ab[b].d)) * float(isum) +
           fp16_to_fp32(wb[b].m) * fp16_to_fp32(ab[b].s);
  }
  return sum;
}

float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a) {
  assert(n % kQK8_0 == 0);
  const auto* wb = static_cast<const BlockQ5_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const uint32_t qh = load_qh(wb[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = int((wb[b].qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16;
      const int hi = int((wb[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      isum += lo * ab[b].qs[j] + hi * ab[b].qs[j + 16];
    }
    sum += float(isum) * (fp16_to_fp32(wb[b].d) * fp16_to_fp32(ab[b].d));
  }
  return sum;
}

float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a) {
  assert(n % kQK8_1 == 0);
  const auto* wb = static_cast<const BlockQ5_1*>(w);
  const auto* ab = static_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_1; ++b) {
    const uint32_t qh = load_qh(wb[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = int((wb[b].qs[j] & 0x0F) | (((qh >> j) & 1) << 4));
      const int hi = int((wb[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      isum += lo * ab[b].qs[j] + hi * ab[b].qs[j + 16];
    }
    sum += (fp16_to_fp32(wb[b].d) * fp16_to_fp32(ab[b].d)) * float(isum) +
           fp16_to_fp32(wb[b].m) * fp16_to_fp32(ab[b].s);
  }
  return sum;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a) {
  assert(n % kQK8_0 == 0);
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += wb[b].qs[j] * ab[b].qs[j];
    sum += float(isum) * (fp16_to_fp32(wb[b].d) * fp16_to_fp32(ab[b].d));
  }
  return sum;
}

float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  return vec_dot_affine_k(n, static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a));
}

float vec_dot_q5_k_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  return vec_dot_affine_k(n, static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a));
}

float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* a) {
  assert(n % kQK_K == 0);
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K& blk = wb[b];
    const int8_t* act = ab[b].qs;
    int isum = 0;
    // Same element order as dequantize_row_q6_k: half h, quarter k, position l.
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const uint8_t* low = ql + 32 * (k & 1);
        const int shift = (k >> 1) * 4;
        for (int sub = 0; sub < 2; ++sub) {  // two 16-element sub-blocks, each with its scale
          int dot = 0;
          for (int l = 16 * sub; l < 16 * sub + 16; ++l) {
            const int q = ((low[l] >> shift) & 0x0F) | (((qh[l] >> (2 * k)) & 3) << 4);
            dot += (q - 32) * act[128 * h + 32 * k + l];
          }
          isum += int(blk.scales[8 * h + 2 * k + sub]) * dot;
        }
      }
    }
    sum += (fp16_to_fp32(blk.d) * ab[b].d) * float(isum);
  }
  return sum;
}

}  // namespace vela::kernels::ref

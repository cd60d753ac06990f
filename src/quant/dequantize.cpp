#include "quant/dequantize.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "quant/blocks.h"
#include "quant/dequantize_iq1.h"
#include "quant/dequantize_iq23.h"
#include "quant/dequantize_low_k.h"
#include "quant/dequantize_nonlinear4.h"
#include "util/half.h"

namespace vela {

namespace {

// The 32 fifth bits of a Q5_0/Q5_1 block, bit j belonging to element j.
uint32_t load_qh(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return bits;
}

}  // namespace

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(b[i]);
}

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  assert(n % kQK4_0 == 0);
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK4_0; ++b, dst += kQK4_0) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const uint8_t byte = blocks[b].qs[j];
      dst[j] = float((byte & 0x0F) - 8) * d;
      dst[j + kQK4_0 / 2] = float((byte >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const void* src, float* dst, int64_t n) {
  assert(n % kQK4_1 == 0);
  const auto* blocks = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n / kQK4_1; ++b, dst += kQK4_1) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float m = fp16_to_fp32(blocks[b].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const uint8_t byte = blocks[b].qs[j];
      dst[j] = float(byte & 0x0F) * d + m;
      dst[j + kQK4_1 / 2] = float(byte >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const void* src, float* dst, int64_t n) {
  assert(n % kQK5_0 == 0);
  const auto* blocks = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n / kQK5_0; ++b, dst += kQK5_0) {
    const float d = fp16_to_fp32(blocks[b].d);
    const uint32_t qh = load_qh(blocks[b].qh);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const uint8_t byte = blocks[b].qs[j];
      const int lo = int((byte & 0x0F) | (((qh >> j) & 1) << 4));
      const int hi = int((byte >> 4) | (((qh >> (j + 16)) & 1) << 4));
      dst[j] = float(lo - 16) * d;
      dst[j + kQK5_0 / 2] = float(hi - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const void* src, float* dst, int64_t n) {
  assert(n % kQK5_1 == 0);
  const auto* blocks = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n / kQK5_1; ++b, dst += kQK5_1) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float m = fp16_to_fp32(blocks[b].m);
    const uint32_t qh = load_qh(blocks[b].qh);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const uint8_t byte = blocks[b].qs[j];
      const int lo = int((byte & 0x0F) | (((qh >> j) & 1) << 4));
      const int hi = int((byte >> 4) | (((qh >> (j + 16)) & 1) << 4));
      dst[j] = float(lo) * d + m;
      dst[j + kQK5_1 / 2] = float(hi) * d + m;
    }
  }
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  assert(n % kQK8_0 == 0);
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK8_0; ++b, dst += kQK8_0) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK8_0; ++j) dst[j] = float(blocks[b].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const void* src, float* dst, int64_t n) {
  assert(n % kQK8_1 == 0);
  const auto* blocks = static_cast<const BlockQ8_1*>(src);
  for (int64_t b = 0; b < n / kQK8_1; ++b, dst += kQK8_1) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK8_1; ++j) dst[j] = float(blocks[b].qs[j]) * d;
  }
}

void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ4_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ4_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    const float dmin = fp16_to_fp32(blk.dmin);
    // Each 32-byte group of qs holds two sub-blocks: low nibbles, then high nibbles.
    for (int group = 0; group < 4; ++group) {
      const uint8_t* q = blk.qs + 32 * group;
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, mn;
        k_scale_min(2 * group + half, blk.scales, &sc, &mn);
        const float scale = d * float(sc);
        const float offset = dmin * float(mn);
        const int shift = 4 * half;
        for (int l = 0; l < 32; ++l) *dst++ = scale * float((q[l] >> shift) & 0x0F) - offset;
      }
    }
  }
}

void dequantize_row_q5_k(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ5_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ5_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    const float dmin = fp16_to_fp32(blk.dmin);
    for (int group = 0; group < 4; ++group) {
      const uint8_t* q = blk.qs + 32 * group;
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * group + half;  // sub-block index; its 5th bits are qh bit `sub`
        uint8_t sc, mn;
        k_scale_min(sub, blk.scales, &sc, &mn);
        const float scale = d * float(sc);
        const float offset = dmin * float(mn);
        const int shift = 4 * half;
        for (int l = 0; l < 32; ++l) {
          const int v = ((q[l] >> shift) & 0x0F) | (((blk.qh[l] >> sub) & 1) << 4);
          *dst++ = scale * float(v) - offset;
        }
      }
    }
  }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const BlockQ6_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    // Two halves of 128 elements. In half h, with l < 32, element 128h + 32k + l takes its low
    // 4 bits from ql[64h + l + 32 (k & 1)] (low nibble for k < 2, high for k >= 2) and its top
    // 2 bits from bits 2k..2k+1 of qh[32h + l].
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      const int8_t* sc = blk.scales + 8 * h;
      for (int k = 0; k < 4; ++k) {
        const uint8_t* low = ql + 32 * (k & 1);
        const int shift = (k >> 1) * 4;
        for (int l = 0; l < 32; ++l) {
          const int q = ((low[l] >> shift) & 0x0F) | (((qh[l] >> (2 * k)) & 3) << 4);
          dst[32 * k + l] = d * float(sc[2 * k + l / 16]) * float(q - 32);
        }
      }
      dst += 128;
    }
  }
}

void dequantize_row_q8_k(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) dst[j] = blocks[b].d * float(blocks[b].qs[j]);
  }
}

namespace {

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);

// The row decoder of `type`, or nullptr where there is none.
DequantizeFn dequantizer(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return dequantize_row_f32;
    case GgmlType::F16:
      return dequantize_row_f16;
    case GgmlType::BF16:
      return dequantize_row_bf16;
    case GgmlType::Q4_0:
      return dequantize_row_q4_0;
    case GgmlType::Q4_1:
      return dequantize_row_q4_1;
    case GgmlType::Q5_0:
      return dequantize_row_q5_0;
    case GgmlType::Q5_1:
      return dequantize_row_q5_1;
    case GgmlType::Q8_0:
      return dequantize_row_q8_0;
    case GgmlType::Q8_1:
      return dequantize_row_q8_1;
    case GgmlType::Q4_K:
      return dequantize_row_q4_k;
    case GgmlType::Q5_K:
      return dequantize_row_q5_k;
    case GgmlType::Q6_K:
      return dequantize_row_q6_k;
    case GgmlType::Q8_K:
      return dequantize_row_q8_k;
    case GgmlType::IQ2_XXS:
      return dequantize_row_iq2_xxs;
    case GgmlType::IQ2_XS:
      return dequantize_row_iq2_xs;
    case GgmlType::IQ2_S:
      return dequantize_row_iq2_s;
    case GgmlType::IQ3_XXS:
      return dequantize_row_iq3_xxs;
    case GgmlType::IQ3_S:
      return dequantize_row_iq3_s;
    case GgmlType::Q2_K:
      return dequantize_row_q2_k;
    case GgmlType::Q3_K:
      return dequantize_row_q3_k;
    case GgmlType::TQ1_0:
      return dequantize_row_tq1_0;
    case GgmlType::TQ2_0:
      return dequantize_row_tq2_0;
    case GgmlType::IQ4_NL:
      return dequantize_row_iq4_nl;
    case GgmlType::IQ4_XS:
      return dequantize_row_iq4_xs;
    case GgmlType::MXFP4:
      return dequantize_row_mxfp4;
    case GgmlType::IQ1_S:
      return dequantize_row_iq1_s;
    case GgmlType::IQ1_M:
      return dequantize_row_iq1_m;
    default:
      return nullptr;
  }
}

}  // namespace

bool can_dequantize(GgmlType type) {
  return dequantizer(type) != nullptr;
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  if (const DequantizeFn fn = dequantizer(type)) return fn(src, dst, n);
  std::fprintf(stderr, "dequantize_row: unsupported type %s\n",
               ggml_type_name(uint32_t(type)).c_str());
  std::abort();
}

}  // namespace vela

// Reference quantizers for the float types and the 32-element block types. The K types live in
// quantize_k.cpp.
#include "quant/quantize.h"
#include "quant/rounding.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quantize_iq1.h"
#include "quant/quantize_iq23.h"
#include "quant/quantize_low_k.h"
#include "quant/quantize_nonlinear4.h"
#include "util/half.h"

namespace vela {

namespace {

// The element of largest magnitude, sign kept (the first one on ties). The symmetric 4/5-bit
// formats map it to the most negative level so that the asymmetric range [-8, 7] loses nothing
// at the end that matters most.
float signed_absmax(const float* x, int64_t n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

float absmax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

void min_max(const float* x, int64_t n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int64_t j = 0; j < n; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

// Truncation toward zero of a value known to be >= 0 (ggml adds 0.5 and truncates, which is
// round-half-up for non-negative values), clamped to `max_level`.
int truncate_level(float v, int max_level) {
  return std::min(max_level, int(v));
}

// Packs 32 levels (each < 16 after masking) as ggml's 32-element formats do: byte j holds
// element j in its low nibble and element j + 16 in its high nibble. Returns the 5th bits as the
// little-endian qh word (bit j = element j).
uint32_t pack_nibbles(const uint8_t* levels, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((levels[j] & 0x0F) | ((levels[j + 16] & 0x0F) << 4));
    qh |= uint32_t((levels[j] >> 4) & 1) << j;
    qh |= uint32_t((levels[j + 16] >> 4) & 1) << (j + 16);
  }
  return qh;
}

}  // namespace

void quantize_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void quantize_row_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) b[i] = fp32_to_bf16(src[i]);
}

void quantize_row_q4_0(const float* src, void* dst, int64_t n) {
  assert(n % kQK4_0 == 0);
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n / kQK4_0; ++b, src += kQK4_0) {
    const float d = signed_absmax(src, kQK4_0) / -8.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    uint8_t levels[kQK4_0];
    for (int j = 0; j < kQK4_0; ++j) levels[j] = uint8_t(truncate_level(src[j] * inv_d + 8.5f, 15));
    pack_nibbles(levels, blocks[b].qs);
  }
}

void quantize_row_q4_1(const float* src, void* dst, int64_t n) {
  assert(n % kQK4_1 == 0);
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / kQK4_1; ++b, src += kQK4_1) {
    float min, max;
    min_max(src, kQK4_1, &min, &max);
    const float d = (max - min) / 15.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    blocks[b].m = fp32_to_fp16(min);
    uint8_t levels[kQK4_1];
    for (int j = 0; j < kQK4_1; ++j) {
      levels[j] = uint8_t(truncate_level((src[j] - min) * inv_d + 0.5f, 15));
    }
    pack_nibbles(levels, blocks[b].qs);
  }
}

void quantize_row_q5_0(const float* src, void* dst, int64_t n) {
  assert(n % kQK5_0 == 0);
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n / kQK5_0; ++b, src += kQK5_0) {
    const float d = signed_absmax(src, kQK5_0) / -16.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    uint8_t levels[kQK5_0];
    for (int j = 0; j < kQK5_0; ++j) {
      levels[j] = uint8_t(truncate_level(src[j] * inv_d + 16.5f, 31));
    }
    const uint32_t qh = pack_nibbles(levels, blocks[b].qs);
    std::memcpy(blocks[b].qh, &qh, sizeof(qh));
  }
}

void quantize_row_q5_1(const float* src, void* dst, int64_t n) {
  assert(n % kQK5_1 == 0);
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n / kQK5_1; ++b, src += kQK5_1) {
    float min, max;
    min_max(src, kQK5_1, &min, &max);
    const float d = (max - min) / 31.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    blocks[b].m = fp32_to_fp16(min);
    uint8_t levels[kQK5_1];
    for (int j = 0; j < kQK5_1; ++j) {
      levels[j] = uint8_t(truncate_level((src[j] - min) * inv_d + 0.5f, 31));
    }
    const uint32_t qh = pack_nibbles(levels, blocks[b].qs);
    std::memcpy(blocks[b].qh, &qh, sizeof(qh));
  }
}

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
  assert(n % kQK8_0 == 0);
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, src += kQK8_0) {
    const float d = absmax(src, kQK8_0) / 127.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    // roundf: ties away from zero, as ggml's reference quantizer.
    for (int j = 0; j < kQK8_0; ++j) blocks[b].qs[j] = int8_t(std::round(src[j] * inv_d));
  }
}

void quantize_row_q8_1(const float* src, void* dst, int64_t n) {
  assert(n % kQK8_1 == 0);
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQK8_1; ++b, src += kQK8_1) {
    const float d = absmax(src, kQK8_1) / 127.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      blocks[b].qs[j] = int8_t(std::round(src[j] * inv_d));
      sum += blocks[b].qs[j];
    }
    // s uses the unrounded d, as ggml does.
    blocks[b].s = fp32_to_fp16(float(sum) * d);
  }
}

void quantize_row_q8_0_activations(const float* src, void* dst, int64_t n) {
  assert(n % kQK8_0 == 0);
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, src += kQK8_0) {
    const float amax = absmax(src, kQK8_0);
    const float inv_d = amax != 0.0f ? 127.0f / amax : 0.0f;
    blocks[b].d = fp32_to_fp16(amax / 127.0f);
    for (int j = 0; j < kQK8_0; ++j)
      blocks[b].qs[j] = int8_t(quant_detail::round_nearest_even(src[j] * inv_d));
  }
}

void quantize_row_q8_1_activations(const float* src, void* dst, int64_t n) {
  assert(n % kQK8_1 == 0);
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQK8_1; ++b, src += kQK8_1) {
    const float amax = absmax(src, kQK8_1);
    const float d = amax / 127.0f;
    const float inv_d = amax != 0.0f ? 127.0f / amax : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      blocks[b].qs[j] = int8_t(quant_detail::round_nearest_even(src[j] * inv_d));
      sum += blocks[b].qs[j];
    }
    blocks[b].s = fp32_to_fp16(float(sum) * d);
  }
}

namespace {

using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);

// The row quantizer of `type`, or nullptr where there is none.
QuantizeFn quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return quantize_row_f32;
    case GgmlType::F16:
      return quantize_row_f16;
    case GgmlType::BF16:
      return quantize_row_bf16;
    case GgmlType::Q4_0:
      return quantize_row_q4_0;
    case GgmlType::Q4_1:
      return quantize_row_q4_1;
    case GgmlType::Q5_0:
      return quantize_row_q5_0;
    case GgmlType::Q5_1:
      return quantize_row_q5_1;
    case GgmlType::Q8_0:
      return quantize_row_q8_0;
    case GgmlType::Q8_1:
      return quantize_row_q8_1;
    case GgmlType::Q4_K:
      return quantize_row_q4_k;
    case GgmlType::Q5_K:
      return quantize_row_q5_k;
    case GgmlType::Q6_K:
      return quantize_row_q6_k;
    case GgmlType::Q8_K:
      return quantize_row_q8_k;
    case GgmlType::Q2_K:
      return quantize_row_q2_k;
    case GgmlType::Q3_K:
      return quantize_row_q3_k;
    case GgmlType::TQ1_0:
      return quantize_row_tq1_0;
    case GgmlType::TQ2_0:
      return quantize_row_tq2_0;
    case GgmlType::IQ1_S:
      return quantize_row_iq1_s;
    case GgmlType::IQ1_M:
      return quantize_row_iq1_m;
    case GgmlType::IQ2_XXS:
      return quantize_row_iq2_xxs;
    case GgmlType::IQ2_XS:
      return quantize_row_iq2_xs;
    case GgmlType::IQ2_S:
      return quantize_row_iq2_s;
    case GgmlType::IQ3_XXS:
      return quantize_row_iq3_xxs;
    case GgmlType::IQ3_S:
      return quantize_row_iq3_s;
    case GgmlType::IQ4_NL:
      return quantize_row_iq4_nl;
    case GgmlType::IQ4_XS:
      return quantize_row_iq4_xs;
    case GgmlType::MXFP4:
      return quantize_row_mxfp4;
    default:
      return nullptr;
  }
}

}  // namespace

bool can_quantize(GgmlType type) {
  return quantizer(type) != nullptr;
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  if (const QuantizeFn fn = quantizer(type)) return fn(src, dst, n);
  std::fprintf(stderr, "quantize_row: unsupported type %s\n",
               ggml_type_name(uint32_t(type)).c_str());
  std::abort();
}

}  // namespace vela

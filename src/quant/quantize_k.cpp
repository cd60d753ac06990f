// Reference quantizers for the 256-element K types.
// Q8_K follows ggml's reference rule for rule (it quantizes activations; matching ggml there keeps
// logits comparable with a ggml-based engine). Q4_K, Q5_K and Q6_K use a scale search of the same
// family as ggml's (try a few candidate scales, least-squares refit, keep the lowest weighted
// error); their bytes may differ from ggml's but decode with the format's usual error.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quantize.h"
#include "quant/rounding.h"
#include "util/half.h"

namespace vela {

namespace {

using quant_detail::round_nearest_even;

// Result of fitting one sub-block as x ~= scale * level - offset, level in [0, max_level].
struct AffineFit {
  float scale = 0.0f;
  float offset = 0.0f;  // >= 0: the value subtracted, i.e. minus the sub-block's lowest level
};

// Weighted squared error of x against scale * levels - offset.
float affine_error(const float* x, const float* weight, const uint8_t* levels, int n, float scale,
                   float offset) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * float(levels[i]) - offset - x[i];
    err += weight[i] * diff * diff;
  }
  return err;
}

// Assigns each x its nearest level on the grid base + scale * level, clamped to [0, max_level].
void assign_affine_levels(const float* x, int n, float inv_scale, float base, int max_level,
                          uint8_t* levels) {
  for (int i = 0; i < n; ++i) {
    const int l = round_nearest_even(inv_scale * (x[i] - base));
    levels[i] = uint8_t(std::clamp(l, 0, max_level));
  }
}

// Weighted least-squares (scale, base) for fixed levels, with base forced <= 0 (the format can
// only subtract a non-negative offset). Returns false when the levels do not determine a fit.
bool refit_affine(const float* x, const float* weight, const uint8_t* levels, int n, float* scale,
                  float* base) {
  float sw = 0, sl = 0, sll = 0, sx = 0, sxl = 0;
  for (int i = 0; i < n; ++i) {
    const float w = weight[i], l = float(levels[i]);
    sw += w;
    sl += w * l;
    sll += w * l * l;
    sx += w * x[i];
    sxl += w * x[i] * l;
  }
  const float det = sw * sll - sl * sl;
  if (!(det > 0.0f)) return false;
  *scale = (sw * sxl - sx * sl) / det;
  *base = (sll * sx - sl * sxl) / det;
  if (*base > 0.0f) {  // a positive base is not representable: fit the scale alone
    *base = 0.0f;
    *scale = sxl / sll;
  }
  return true;
}

// Searches the sub-block's scale and offset. Candidate grids stretch the range [min(x, 0),
// max(x)] over max_level + delta steps for a spread of deltas (a slightly shorter or longer grid
// often fits the bulk of the values better than the plain min-max one); every candidate's levels
// get a least-squares refit, and the lowest weighted error wins.
AffineFit fit_affine_subblock(const float* x, const float* weight, int n, int max_level,
                              float delta_lo, float delta_step, int n_steps) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  AffineFit best;
  if (hi == lo) {  // constant non-positive block: all levels 0, offset carries the value
    best.offset = -lo;
    return best;
  }
  uint8_t levels[32];
  assert(n <= 32);
  float best_scale = (hi - lo) / float(max_level);
  float best_base = lo;
  assign_affine_levels(x, n, 1.0f / best_scale, lo, max_level, levels);
  float best_err = affine_error(x, weight, levels, n, best_scale, -best_base);
  for (int step = 0; step <= n_steps; ++step) {
    const float inv_scale = (float(max_level) + delta_lo + delta_step * float(step)) / (hi - lo);
    assign_affine_levels(x, n, inv_scale, lo, max_level, levels);
    float scale, base;
    if (!refit_affine(x, weight, levels, n, &scale, &base)) continue;
    const float err = affine_error(x, weight, levels, n, scale, -base);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      best_base = base;
    }
  }
  best.scale = best_scale;
  best.offset = -best_base;
  return best;
}

// Importance of each element for the K-type fits: large magnitudes matter more for a dot
// product, but small values must not be ignored entirely, hence rms + |x|.
void magnitude_weights(const float* x, int n, float* weight) {
  float sum_sq = 0.0f;
  for (int i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float rms = std::sqrt(sum_sq / float(n));
  for (int i = 0; i < n; ++i) weight[i] = rms + std::fabs(x[i]);
}

// Shared body of Q4_K and Q5_K: fits 8 sub-blocks of 32, quantizes their scales and offsets to
// 6 bits under fp16 super-scales, then re-derives every level from the stored (rounded) scales.
// levels: [256] output, each in [0, max_level].
void quantize_affine_superblock(const float* x, int max_level, float delta_lo, int n_steps,
                                uint16_t* d_out, uint16_t* dmin_out, uint8_t* packed_scales,
                                uint8_t* levels) {
  float weight[kQK_K];
  magnitude_weights(x, kQK_K, weight);
  AffineFit fits[8];
  float max_scale = 0.0f, max_offset = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fits[j] =
        fit_affine_subblock(x + 32 * j, weight + 32 * j, 32, max_level, delta_lo, 0.1f, n_steps);
    max_scale = std::max(max_scale, fits[j].scale);
    max_offset = std::max(max_offset, fits[j].offset);
  }
  const float inv_scale_step = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_offset_step = max_offset > 0.0f ? 63.0f / max_offset : 0.0f;
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = uint8_t(std::min(63, round_nearest_even(inv_scale_step * fits[j].scale)));
    mn[j] = uint8_t(std::min(63, round_nearest_even(inv_offset_step * fits[j].offset)));
  }
  k_pack_scale_min(sc, mn, packed_scales);
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_offset / 63.0f);
  const float d = fp16_to_fp32(*d_out);
  const float dmin = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float scale = d * float(sc[j]);
    uint8_t* sub_levels = levels + 32 * j;
    if (scale == 0.0f) {
      std::memset(sub_levels, 0, 32);
      continue;
    }
    const float offset = dmin * float(mn[j]);
    for (int i = 0; i < 32; ++i) {
      const int l = round_nearest_even((x[32 * j + i] + offset) / scale);
      sub_levels[i] = uint8_t(std::clamp(l, 0, max_level));
    }
  }
}

// Symmetric fit of one Q6_K sub-block: x ~= scale * level, level in [-32, 31]. Tries grids that
// map the largest-magnitude value to about -32 (the format's one extra negative level), each
// with a least-squares scale weighted by x^2, and keeps the best. Returns the scale (0 if the
// sub-block is all zero); levels: [n] in [-32, 31].
float fit_symmetric_subblock(const float* x, int n, int8_t* levels) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::memset(levels, 0, size_t(n));
    return 0.0f;
  }
  float best_scale = 0.0f;
  float best_merit = -1.0f;  // (sum w x l)^2 / sum w l^2: larger means smaller squared error
  int8_t trial[16];
  assert(n <= 16);
  for (int step = -9; step <= 9; ++step) {
    const float inv_scale = -(32.0f + 0.1f * float(step)) / max;
    float sxl = 0.0f, sll = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_nearest_even(inv_scale * x[i]), -32, 31);
      trial[i] = int8_t(l);
      const float w = x[i] * x[i];
      sxl += w * x[i] * float(l);
      sll += w * float(l) * float(l);
    }
    if (sll > 0.0f && sxl * sxl > best_merit * sll) {
      best_merit = sxl * sxl / sll;
      best_scale = sxl / sll;
      std::memcpy(levels, trial, size_t(n));
    }
  }
  return best_scale;
}

}  // namespace

void quantize_row_q4_k(const float* src, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ4_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ4_K& blk = blocks[b];
    uint8_t levels[kQK_K];
    quantize_affine_superblock(src, 15, -1.0f, 20, &blk.d, &blk.dmin, blk.scales, levels);
    for (int group = 0; group < 4; ++group) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * group + l] =
            uint8_t(levels[64 * group + l] | (levels[64 * group + 32 + l] << 4));
      }
    }
  }
}

void quantize_row_q5_k(const float* src, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ5_K& blk = blocks[b];
    uint8_t levels[kQK_K];
    quantize_affine_superblock(src, 31, -0.5f, 15, &blk.d, &blk.dmin, blk.scales, levels);
    std::memset(blk.qh, 0, sizeof(blk.qh));
    for (int group = 0; group < 4; ++group) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = levels[64 * group + l];
        const uint8_t hi = levels[64 * group + 32 + l];
        blk.qs[32 * group + l] = uint8_t((lo & 0x0F) | ((hi & 0x0F) << 4));
        blk.qh[l] |= uint8_t(((lo >> 4) << (2 * group)) | ((hi >> 4) << (2 * group + 1)));
      }
    }
  }
}

void quantize_row_q6_k(const float* src, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ6_K& blk = blocks[b];
    int8_t signed_levels[kQK_K];
    float scales[16];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric_subblock(src + 16 * j, 16, signed_levels + 16 * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    uint8_t levels[kQK_K];  // unsigned, level + 32, in [0, 63]
    if (amax_scale == 0.0f) {
      blk.d = fp32_to_fp16(0.0f);
      std::memset(blk.scales, 0, sizeof(blk.scales));
      std::memset(levels, 32, sizeof(levels));
    } else {
      // The largest scale maps to -128, the most negative int8, so no scale overflows.
      const float inv_d = -128.0f / max_scale;
      blk.d = fp32_to_fp16(1.0f / inv_d);
      for (int j = 0; j < 16; ++j) {
        blk.scales[j] = int8_t(std::min(127, round_nearest_even(inv_d * scales[j])));
      }
      const float d = fp16_to_fp32(blk.d);
      for (int j = 0; j < 16; ++j) {
        const float scale = d * float(blk.scales[j]);
        for (int i = 0; i < 16; ++i) {
          const int l = scale == 0.0f ? 0 : round_nearest_even(src[16 * j + i] / scale);
          levels[16 * j + i] = uint8_t(std::clamp(l, -32, 31) + 32);
        }
      }
    }
    // Layout (see dequantize_row_q6_k): per half of 128, element 32k + l has its low nibble in
    // ql[l + 32 (k & 1)] (low half for k < 2, high for k >= 2) and top 2 bits at qh[l] bit 2k.
    for (int h = 0; h < 2; ++h) {
      const uint8_t* lv = levels + 128 * h;
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = uint8_t((lv[l] & 0x0F) | ((lv[l + 64] & 0x0F) << 4));
        ql[l + 32] = uint8_t((lv[l + 32] & 0x0F) | ((lv[l + 96] & 0x0F) << 4));
        qh[l] = uint8_t((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) | ((lv[l + 64] >> 4) << 4) |
                        ((lv[l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ8_K& blk = blocks[b];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    if (amax == 0.0f) {
      blk.d = 0.0f;
      std::memset(blk.qs, 0, sizeof(blk.qs));
      std::memset(blk.bsums, 0, sizeof(blk.bsums));
      continue;
    }
    // The largest-magnitude value maps to -127 (not -128), so the range stays symmetric.
    const float inv_d = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      blk.qs[j] = int8_t(std::min(127, round_nearest_even(inv_d * src[j])));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * g + i];
      blk.bsums[g] = int16_t(sum);
    }
    blk.d = 1.0f / inv_d;
  }
}

}  // namespace vela

// Scalar reference of the packed kernels (packed_gemm.h): the definition every SIMD and AMX kernel
// must reproduce bit for bit. Each int8 format gives the step acc -> acc' of one (packed) block
// for one weight row and one activation block, with shared loops around it; the float formats
// are one fma chain per output.
#include <cmath>
#include <type_traits>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/ref/bf16_pair_dot.h"
#include "quant/blocks.h"
#include "quant/blocks_nonlinear4.h"
#include "util/half.h"

namespace vela::kernels {

namespace {

// Unbiased level of weight row n, element k of a packed block.
inline int level(const BlockQ8_0x16& b, int n, int k) {
  return int(b.qs[k / 4][n][k % 4]) - kQ8_0PackedBias;
}
// The 4 low bits of element k in Q4_0's nibble layout (shared by Q4_1, Q5_0 and Q5_1).
template <class Packed>
inline int nibble(const Packed& b, int n, int k) {
  const uint8_t byte = b.qs[(k % 16) / 4][n][k % 4];
  return k < 16 ? byte & 0x0F : byte >> 4;
}
// The 5th bit of element k as a value (0 or 16).
template <class Packed>
inline int high_bit(const Packed& b, int n, int k) {
  return ((b.qh[n][k % 4] >> (k / 4)) & 1) << 4;
}
inline int level(const BlockQ4_0x16& b, int n, int k) {
  return nibble(b, n, k) - kQ4_0PackedBias;
}
inline int level(const BlockQ5_0x16& b, int n, int k) {
  return (nibble(b, n, k) | high_bit(b, n, k)) - kQ5_0PackedBias;
}
inline int level(const BlockQ4_1x16& b, int n, int k) {  // 0..15
  return nibble(b, n, k);
}
inline int level(const BlockQ5_1x16& b, int n, int k) {  // 0..31
  return nibble(b, n, k) | high_bit(b, n, k);
}
// The codebook formats: the level the nibble indexes.
inline int level(const BlockIQ4_NLx16& b, int n, int k) {  // -127..113
  return kIQ4Levels[nibble(b, n, k)];
}
inline int level(const BlockMXFP4x16& b, int n, int k) {  // twice the e2m1 value, -12..12
  return kMXFP4Levels[nibble(b, n, k)];
}
inline int level(const BlockQ4_Kx16& b, int n, int k) {  // 0..15
  const int j = k / 32, l = k % 32;
  const uint8_t byte = b.qs[j / 2][l / 4][n][l % 4];
  return j % 2 == 0 ? byte & 0x0F : byte >> 4;
}
inline int level(const BlockQ5_Kx16& b, int n, int k) {  // 0..31
  const int j = k / 32, l = k % 32;
  const int high = (b.qh[j / 2][j % 2][n][l % 4] >> (l / 4)) & 1;
  return level(b.low, n, k) | (high << 4);
}
inline int level(const BlockQ6_Kx16& b, int n, int k) {  // 0..63
  const int s = k / 16, g = k % 16 / 4, i = k % 4;
  const int low = (b.ql[s][g / 2][n][i] >> (4 * (g % 2))) & 0x0F;
  return low | (((b.qh[s][n][i] >> (2 * g)) & 3) << 4);
}

inline int level(const BlockIQ4_XSx16& b, int n, int k) {  // -127..113
  const int j = k / 32, l = k % 32;
  const uint8_t byte = b.qs[j][(l % 16) / 4][n][l % 4];
  return kIQ4Levels[l < 16 ? byte & 0x0F : byte >> 4];
}

inline int level(const BlockQ3_Kx16& b, int n, int k) {  // -4..3
  const int low = (b.ql[k / 16][n][k % 4] >> (2 * (k % 16 / 4))) & 3;
  const int high = (b.qh[k / 32][n][k % 4] >> (k % 32 / 4)) & 1;
  return low + 4 * high - kQ3_KOffset;
}

// Q2_K's and TQ2_0's 2-bit plane: q, 0..3.
template <class Packed>
requires(std::is_same_v<Packed, BlockQ2_Kx16> ||
         std::is_same_v<Packed, BlockTQ2_0x16>) inline int level(const Packed& b, int n, int k) {
  return (b.qs[k / 16][n][k % 4] >> (2 * (k % 16 / 4))) & 3;
}

// Row n's block scale d_w as f32: f16 d, or MXFP4's e8m0 byte, 2^(e - 128).
template <class Packed>
inline float weight_scale(const Packed& b, int n) {
  if constexpr (requires { b.e; })
    return e8m0_half_scale(b.e[n]);
  else
    return fp16_to_fp32(b.d[n]);
}

// Q8_0 / Q4_0 / Q5_0 / IQ4_NL / MXFP4: the block's exact integer dot (at most 32 * 127 * 128 in
// magnitude, exact in f32), then acc = fma(float(isum), d_w * d_a, acc). d_w * d_a is exact for
// two f16 scales (11-bit significands) and for MXFP4's power of two unless the product leaves
// f32's normal range, where every kernel rounds it by the same one multiplication.
template <class Packed>
float step_q32(const Packed& w, int n, const BlockQ8_0& a, float acc) {
  int isum = 0;
  for (int k = 0; k < kPackedBlockK; ++k) isum += level(w, n, k) * int(a.qs[k]);
  const float scale = weight_scale(w, n) * fp16_to_fp32(a.d);
  return std::fma(float(isum), scale, acc);
}

// Q4_1 / Q5_1 (value d_w q + m_w) against Q8_1 (d_a, s_a = d_a * sum of its quants): the exact
// integer dot of the levels, then acc = fma(m_w, s_a, fma(float(isum), d_w * d_a, acc)).
template <class Packed>
float step_affine32(const Packed& w, int n, const BlockQ8_1& a, float acc) {
  int isum = 0;
  for (int k = 0; k < kPackedBlockK; ++k) isum += level(w, n, k) * int(a.qs[k]);
  const float scale = fp16_to_fp32(w.d[n]) * fp16_to_fp32(a.d);  // exact
  acc = std::fma(float(isum), scale, acc);
  return std::fma(fp16_to_fp32(w.m[n]), fp16_to_fp32(a.s), acc);
}

// Q4_K / Q5_K: the exact integer sums of scale_j * dot_j and of min_j * (the activations' sum over
// sub-block j), then acc + (d * dots - dmin * mins) with d and dmin times the activation scale.
template <class Packed>
float step_q4_k(const Packed& w, int n, const BlockQ8_K& a, float acc) {
  const BlockQ4_Kx16& s = k_scales(w);
  int32_t dots = 0, mins = 0;
  for (int j = 0; j < 8; ++j) {
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) dot += level(w, n, 32 * j + l) * int32_t(a.qs[32 * j + l]);
    dots += int32_t(s.scale[j][n]) * dot;
    mins += int32_t(s.min_pairs[j / 2][n][j % 2]) *
            (int32_t(a.bsums[2 * j]) + int32_t(a.bsums[2 * j + 1]));
  }
  const float d = fp16_to_fp32(s.d[n]) * a.d;
  const float m = fp16_to_fp32(s.dmin[n]) * a.d * float(mins);
  return acc + std::fma(d, float(dots), -m);
}

// Q6_K: the exact integer sum of scale_s * sum_l (q - 32) a over the 16 sub-blocks (the -32
// through the activations' block sums), then acc = fma(d_w * d_a, sum, acc).
float step_q6_k(const BlockQ6_Kx16& w, int n, const BlockQ8_K& a, float acc) {
  int32_t sum = 0;
  for (int s = 0; s < 16; ++s) {
    int32_t dot = -kQ6_KOffset * int32_t(a.bsums[s]);
    for (int k = 0; k < 16; ++k) dot += level(w, n, 16 * s + k) * int32_t(a.qs[16 * s + k]);
    sum += int32_t(w.scale[s][n]) * dot;
  }
  return std::fma(fp16_to_fp32(w.d[n]) * a.d, float(sum), acc);
}

// IQ4_XS: the exact integer sum of (ls_j - 32) * dot_j over the 8 sub-blocks (at most
// 8 * 32 * 32 * 127 * 127 in magnitude), then acc = fma(d_w * d_a, sum, acc), as Q6_K.
float step_iq4_xs(const BlockIQ4_XSx16& w, int n, const BlockQ8_K& a, float acc) {
  int32_t sum = 0;
  for (int j = 0; j < 8; ++j) {
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) dot += level(w, n, 32 * j + l) * int32_t(a.qs[32 * j + l]);
    sum += int32_t(w.scale[j][n]) * dot;
  }
  return std::fma(fp16_to_fp32(w.d[n]) * a.d, float(sum), acc);
}

// Q3_K: the exact integer sum of (s_j - 32) * dot_j over the 16 sub-blocks (at most
// 16 * 32 * 16 * 4 * 127 in magnitude), then acc = fma(d_w * d_a, sum, acc), as Q6_K.
float step_q3_k(const BlockQ3_Kx16& w, int n, const BlockQ8_K& a, float acc) {
  int32_t sum = 0;
  for (int j = 0; j < 16; ++j) {
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) dot += level(w, n, 16 * j + l) * int32_t(a.qs[16 * j + l]);
    sum += int32_t(w.scale[j][n]) * dot;
  }
  return std::fma(fp16_to_fp32(w.d[n]) * a.d, float(sum), acc);
}

// Q2_K: as Q4_K with 16 sub-blocks of 16: the exact integer sums of sc_j * dot_j (at most
// 16 * 15 * 16 * 3 * 128 in magnitude) and of m_j * (the activations' sum over sub-block j), then
// acc + (d * dots - dmin * mins) with d and dmin times the activation scale.
float step_q2_k(const BlockQ2_Kx16& w, int n, const BlockQ8_K& a, float acc) {
  int32_t dots = 0, mins = 0;
  for (int j = 0; j < 16; ++j) {
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) dot += level(w, n, 16 * j + l) * int32_t(a.qs[16 * j + l]);
    const int sm = w.scale_min[j / 2][n][j % 2];
    dots += int32_t(sm & 0x0F) * dot;
    mins += int32_t(sm >> 4) * int32_t(a.bsums[j]);
  }
  const float d = fp16_to_fp32(w.d[n]) * a.d;
  const float m = fp16_to_fp32(w.dmin[n]) * a.d * float(mins);
  return acc + std::fma(d, float(dots), -m);
}

// TQ2_0: the exact integer sum of (q - 1) * a over the super-block, then the one fma of the
// row-wise kernels of the ternary types (x86/avx512/gemm_int8_levels_avx512.h's
// super_block_step), so the packed and the row-major layouts give the same floats.
float step_tq2_0(const BlockTQ2_0x16& w, int n, const BlockQ8_K& a, float acc) {
  int32_t sum = 0;
  for (int k = 0; k < kQK_K; ++k) sum += (level(w, n, k) - 1) * int32_t(a.qs[k]);
  return std::fma(float(sum), fp16_to_fp32(w.d[n]) * a.d, acc);
}

template <class Packed, class Act, int64_t kK,
          float (*kStep)(const Packed&, int, const Act&, float)>
void gemm_ref(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kK;
  const auto* w = static_cast<const Packed*>(p.w);
  for (int64_t t = 0; t < p.n_act; ++t) {
    const auto* a = reinterpret_cast<const Act*>(p.act + size_t(t) * p.act_stride);
    for (int64_t g = 0; g < p.n_groups; ++g)
      for (int n = 0; n < kPackedRows; ++n) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) acc = kStep(w[g * nb + b], n, a[b], acc);
        p.y[t * p.y_stride + g * kPackedRows + n] = acc;
      }
  }
}

// F32 / F16 weights against f32 activations: one chain per output over the columns in order,
// acc = fma(w_k, x_k, acc) from 0. Every packed float kernel reproduces it exactly (a vector lane
// per weight row, so no kernel reorders a row's sum), whatever its tile.
template <class WeightElem, float (*kWiden)(WeightElem)>
void gemm_float_ref(const PackedGemmArgs& p) {
  const auto* w = static_cast<const WeightElem*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  for (int64_t t = 0; t < p.n_act; ++t) {
    const auto* x = reinterpret_cast<const float*>(p.act + size_t(t) * p.act_stride);
    for (int64_t g = 0; g < p.n_groups; ++g)
      for (int n = 0; n < kPackedRows; ++n) {
        float acc = 0.0f;
        for (int64_t k = 0; k < p.n_cols; ++k)
          acc = std::fma(kWiden(w[g * group_elems + k * kPackedRows + n]), x[k], acc);
        p.y[t * p.y_stride + g * kPackedRows + n] = acc;
      }
  }
}

float f32_identity(float v) {
  return v;
}

// BF16 weights against BF16 activations, as vdpbf16ps adds each column pair (k, k + 1)
// (bf16_pair_dot.h); pairs in order from 0.
void gemm_bf16_ref(const PackedGemmArgs& p) {
  const auto* w = static_cast<const uint16_t*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  for (int64_t t = 0; t < p.n_act; ++t) {
    const auto* x = reinterpret_cast<const uint16_t*>(p.act + size_t(t) * p.act_stride);
    for (int64_t g = 0; g < p.n_groups; ++g)
      for (int n = 0; n < kPackedRows; ++n) {
        const uint16_t* wg = w + g * group_elems + n * kBf16PackedPair;
        float acc = 0.0f;
        for (int64_t k = 0; k < p.n_cols; k += kBf16PackedPair)
          acc = bf16_pair_dot(acc, wg + k * kPackedRows, x + k);
        p.y[t * p.y_stride + g * kPackedRows + n] = acc;
      }
  }
}

}  // namespace

PackedGemmFn packed_gemm_ref(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::F32:
      return gemm_float_ref<float, f32_identity>;
    case GgmlType::F16:
      return gemm_float_ref<uint16_t, fp16_to_fp32>;
    case GgmlType::BF16:
      return gemm_bf16_ref;
    case GgmlType::Q8_0:
      return gemm_ref<BlockQ8_0x16, BlockQ8_0, kPackedBlockK, step_q32<BlockQ8_0x16>>;
    case GgmlType::Q4_0:
      return gemm_ref<BlockQ4_0x16, BlockQ8_0, kPackedBlockK, step_q32<BlockQ4_0x16>>;
    case GgmlType::Q5_0:
      return gemm_ref<BlockQ5_0x16, BlockQ8_0, kPackedBlockK, step_q32<BlockQ5_0x16>>;
    case GgmlType::IQ4_NL:
      return gemm_ref<BlockIQ4_NLx16, BlockQ8_0, kPackedBlockK, step_q32<BlockIQ4_NLx16>>;
    case GgmlType::MXFP4:
      return gemm_ref<BlockMXFP4x16, BlockQ8_0, kPackedBlockK, step_q32<BlockMXFP4x16>>;
    case GgmlType::Q4_1:
      return gemm_ref<BlockQ4_1x16, BlockQ8_1, kPackedBlockK, step_affine32<BlockQ4_1x16>>;
    case GgmlType::Q5_1:
      return gemm_ref<BlockQ5_1x16, BlockQ8_1, kPackedBlockK, step_affine32<BlockQ5_1x16>>;
    case GgmlType::Q4_K:
      return gemm_ref<BlockQ4_Kx16, BlockQ8_K, kPackedSuperK, step_q4_k<BlockQ4_Kx16>>;
    case GgmlType::Q5_K:
      return gemm_ref<BlockQ5_Kx16, BlockQ8_K, kPackedSuperK, step_q4_k<BlockQ5_Kx16>>;
    case GgmlType::Q6_K:
      return gemm_ref<BlockQ6_Kx16, BlockQ8_K, kPackedSuperK, step_q6_k>;
    case GgmlType::IQ4_XS:
      return gemm_ref<BlockIQ4_XSx16, BlockQ8_K, kPackedSuperK, step_iq4_xs>;
    case GgmlType::Q3_K:
      return gemm_ref<BlockQ3_Kx16, BlockQ8_K, kPackedSuperK, step_q3_k>;
    case GgmlType::Q2_K:
      return gemm_ref<BlockQ2_Kx16, BlockQ8_K, kPackedSuperK, step_q2_k>;
    case GgmlType::TQ2_0:
      return gemm_ref<BlockTQ2_0x16, BlockQ8_K, kPackedSuperK, step_tq2_0>;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

#pragma once
// Internal to the AVX2 kernels of the codebook and ternary types (dot_iq23_avx2.cpp,
// dot_iq1_avx2.cpp, dot_low_k_avx2.cpp): one weight row's 256-element super-block as signed int8
// levels with an integer scale per 16 elements (Int8Levels), the float steps every kernel of these
// types shares, and the prompt-processing kernel (TypeTraits::gemm_tile) built on them, as the
// AVX-512 level's (x86/avx512/gemm_int8_levels_avx512.h) with 8 rows to a group: each group's rows
// decoded once per call into vectors whose 32-bit lane n holds 4 consecutive levels of row n, so
// that every token costs vpmaddubsw + vpmaddwd per 4 weights of 8 rows and no decode. Include only
// from files compiled with the AVX2 flags.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/thread_buffer.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "quant/blocks.h"

namespace vela::kernels::avx2 {

// A row's super-block such that its dot with a Q8_K block a is d * a.d * S, where S = sum over
// the 16 sub-blocks s of scale[s] * sum_{k in s} v[k] * a.qs[k], an exact integer.
struct Int8Levels {
  __m256i v[8];   // int8 levels of elements 32c .. 32c + 31 in register c, |v| <= 63
  __m256i scale;  // int16 scale of elements 16s .. 16s + 15 in lane s, 0..127
  float d;        // the row's float scale
};

// A super-block's share of a row's sum, the same float operations in every kernel of these types
// so that vec_dot, vec_dot_rows and gemm_tile agree bit for bit: acc = fma(float(S), d_w * d_a,
// acc) over the super-blocks in order, from 0; the row's sum is then the format's constant factor
// times acc. Per lane: the row-wise kernels broadcast one row's S and d_w, gemm_tile has 8 rows'.
inline __m256 super_block_step(__m256 acc, __m256i s, __m256 d_w, float d_a) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d_w, _mm256_set1_ps(d_a)), acc);
}

// The row-wise kernels' step: acc (all lanes equal) for one row whose super-block left its exact
// integer sum spread over the lanes of isum.
inline __m256 row_super_block_step(__m256 acc, __m256i isum, float d_w, float d_a) {
  return super_block_step(acc, _mm256_set1_epi32(hsum_i32(isum)), _mm256_set1_ps(d_w), d_a);
}

// The row's sum from the row-wise kernels' acc (all lanes equal).
inline float row_sum(__m256 acc) {
  return _mm256_cvtss_f32(acc);
}

// The levels' bias: v + 64 is unsigned and below 128, so vpmaddubsw's pair sums (<= 2 * 127 *
// 127) never saturate.
inline constexpr int kLevelBias = 64;

// One super-block of a group of 8 weight rows, decoded for vpmaddubsw.
struct DecodedGroupBlock {
  __m256i w[64];  // lane n of w[j]: row n's levels 4j .. 4j + 3, each + 64
  __m256i
      scale[16];     // lane n of scale[s]: row n's scale of elements 16s .. 16s + 15, twice (int16)
  __m256i bias[16];  // lane n of bias[s]: int16 -64 * that scale, then 0
  __m256 d;          // lane n: row n's d
};

// Rows [0, n_rows) of a group, n_rows <= 8, super-blocks [0, nb) decoded into out[nb]; the
// missing rows as zeros. F::levels(block, Int8Levels*) decodes one row's super-block.
template <class F>
void decode_group(const uint8_t* w, size_t w_stride, int n_rows, int64_t nb,
                  DecodedGroupBlock* out) {
  using Block = typename F::Block;
  const __m256i bias = _mm256_set1_epi8(kLevelBias);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i v[8][8], scale_lo[8], scale_hi[8];  // v[c][n]: row n's register c
    alignas(32) float d[8];
    for (int n = 0; n < 8; ++n) {
      if (n >= n_rows) {
        for (int c = 0; c < 8; ++c) v[c][n] = bias;
        scale_lo[n] = scale_hi[n] = _mm256_setzero_si256();
        d[n] = 0.0f;
        continue;
      }
      const auto* row = reinterpret_cast<const Block*>(w + size_t(n) * w_stride);
      _mm_prefetch(reinterpret_cast<const char*>(row + b + 4), _MM_HINT_T0);
      Int8Levels levels;
      F::levels(row[b], &levels);
      for (int c = 0; c < 8; ++c) v[c][n] = _mm256_add_epi8(levels.v[c], bias);
      // Each scale as the int16 pair (s, s) of a 32-bit lane: sub-blocks 0-7, then 8-15.
      const __m256i lo = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(levels.scale));
      const __m256i hi = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(levels.scale, 1));
      scale_lo[n] = _mm256_or_si256(lo, _mm256_slli_epi32(lo, 16));
      scale_hi[n] = _mm256_or_si256(hi, _mm256_slli_epi32(hi, 16));
      d[n] = levels.d;
    }
    DecodedGroupBlock& o = out[b];
    for (int c = 0; c < 8; ++c) {
      transpose8(v[c]);
      for (int e = 0; e < 8; ++e) _mm256_store_si256(&o.w[8 * c + e], v[c][e]);
    }
    transpose8(scale_lo);
    transpose8(scale_hi);
    const __m256i minus_bias = _mm256_set1_epi16(-kLevelBias);
    const __m256i low_half = _mm256_set1_epi32(0xFFFF);
    for (int s = 0; s < 8; ++s) {
      _mm256_store_si256(&o.scale[s], scale_lo[s]);
      _mm256_store_si256(&o.scale[8 + s], scale_hi[s]);
      _mm256_store_si256(&o.bias[s],
                         _mm256_and_si256(_mm256_mullo_epi16(scale_lo[s], minus_bias), low_half));
      _mm256_store_si256(&o.bias[8 + s],
                         _mm256_and_si256(_mm256_mullo_epi16(scale_hi[s], minus_bias), low_half));
    }
    o.d = _mm256_load_ps(d);
  }
}

// Tokens r < R against one decoded group: out[r * out_stride + n] for the n_rows rows. Per
// 16-element sub-block and token, each vector's pair sums weighted by the rows' scales with
// vpmaddwd, and the bias taken out by one more vpmaddwd of the sub-block's bsum against
// -64 * the scales: the integer sum S of every row stays exact.
template <class F, int R>
void decoded_group_tile(const DecodedGroupBlock* dec, int64_t nb, const uint8_t* act,
                        size_t act_stride, float* out, int64_t out_stride, int n_rows) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const DecodedGroupBlock& k = dec[b];
    const BlockQ8_K* a[R];
    __m256i sum[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      sum[r] = _mm256_setzero_si256();
    }
    _Pragma("GCC unroll 2") for (int s = 0; s < 16; ++s) {
      const __m256i w0 = _mm256_load_si256(&k.w[4 * s]), w1 = _mm256_load_si256(&k.w[4 * s + 1]);
      const __m256i w2 = _mm256_load_si256(&k.w[4 * s + 2]),
                    w3 = _mm256_load_si256(&k.w[4 * s + 3]);
      const __m256i sc = _mm256_load_si256(&k.scale[s]);
      const __m256i bias = _mm256_load_si256(&k.bias[s]);
      VELA_UNROLL
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 16 * s;
        __m256i dot =
            _mm256_madd_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(load_u32(qa))), sc);
        dot = _mm256_add_epi32(
            dot,
            _mm256_madd_epi16(_mm256_maddubs_epi16(w1, _mm256_set1_epi32(load_u32(qa + 4))), sc));
        dot = _mm256_add_epi32(
            dot,
            _mm256_madd_epi16(_mm256_maddubs_epi16(w2, _mm256_set1_epi32(load_u32(qa + 8))), sc));
        dot = _mm256_add_epi32(
            dot,
            _mm256_madd_epi16(_mm256_maddubs_epi16(w3, _mm256_set1_epi32(load_u32(qa + 12))), sc));
        const __m256i bsum = _mm256_set1_epi32(uint16_t(a[r]->bsums[s]));
        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(bsum, bias));
        sum[r] = _mm256_add_epi32(sum[r], dot);
      }
    }
    VELA_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = super_block_step(acc[r], sum[r], k.d, a[r]->d);
  }
  const __m256 factor = _mm256_set1_ps(F::kFactor);
  for (int r = 0; r < R; ++r) {
    const __m256 y = _mm256_mul_ps(factor, acc[r]);
    if (n_rows == 8) {
      _mm256_storeu_ps(out + r * out_stride, y);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, y);
      for (int n = 0; n < n_rows; ++n) out[r * out_stride + n] = lanes[n];
    }
  }
}

// TypeTraits::gemm_tile for a format F (Block, kFactor, levels()): per group of 8 weight rows, the
// rows decoded once (decode_group), then every tile of up to 4 tokens against them.
template <class F>
void int8_levels_gemm_tile(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                           const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                           int64_t out_stride) {
  const int64_t nb = n / kQK_K;
  DecodedGroupBlock* dec = thread_buffer<DecodedGroupBlock>(size_t(nb));
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t g = 0; g < n_w_rows; g += 8) {
    const int rows = int(n_w_rows - g < 8 ? n_w_rows - g : 8);
    decode_group<F>(wb + size_t(g) * w_stride, w_stride, rows, nb, dec);
    const auto tile = [&](auto r_count, int64_t t) {
      decoded_group_tile<F, decltype(r_count)::value>(dec, nb, act + size_t(t) * act_stride,
                                                      act_stride, out + t * out_stride + g,
                                                      out_stride, rows);
    };
    int64_t t = 0;
    for (; t + 4 <= n_act; t += 4) tile(std::integral_constant<int, 4>{}, t);
    switch (n_act - t) {
      case 3:
        tile(std::integral_constant<int, 3>{}, t);
        break;
      case 2:
        tile(std::integral_constant<int, 2>{}, t);
        break;
      case 1:
        tile(std::integral_constant<int, 1>{}, t);
        break;
      default:
        break;
    }
  }
}

}  // namespace vela::kernels::avx2

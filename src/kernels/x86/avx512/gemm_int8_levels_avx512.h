#pragma once
// Internal to the AVX-512 kernels of the codebook and ternary types (dot_iq23_avx512.cpp,
// dot_iq1_avx512.cpp, dot_low_k_avx512.cpp): one weight row's 256-element super-block as signed
// int8 levels with an integer scale per 16 elements (Int8Levels), the float steps every kernel of
// these types shares, and the prompt-processing kernel (TypeTraits::gemm_tile) built on them.
//
// The row-wise dot products decode a super-block once per tile of activation rows, so a prompt
// pays the codebook lookups once per 8 tokens. gemm_tile decodes a group of 16 weight rows once
// per call into the VNNI layout of the packed kernels (packed_blocks.h: lane n of a vector holds
// 4 consecutive levels of row n, biased by +128 for vpdpbusd), so that every token then costs one
// vpdpbusd per 4 weights of 16 rows, with no decode at all. Include only from files compiled with
// the AVX-512 flags.
#include <cstddef>
#include <cstdint>

#include "kernels/x86/avx512/avx512_util.h"
#include "quant/blocks.h"

namespace vela::kernels::avx512 {

// A row's super-block such that its dot with a Q8_K block a is d * a.d * S, where S = sum over
// the 16 sub-blocks s of scale[s] * sum_{k in s} v[k] * a.qs[k], an exact integer.
struct Int8Levels {
  __m512i v[4];   // int8 levels of elements 64c .. 64c + 63 in register c, |v| <= 127
  __m512i scale;  // int32 scale of elements 16s .. 16s + 15 in lane s, 0..127
  float d;        // the row's float scale
};

// A super-block's share of a row's sum, the same float operations in every kernel of these types
// so that vec_dot, vec_dot_rows and gemm_tile agree bit for bit: acc = fma(float(S), d_w * d_a,
// acc) over the super-blocks in order, from 0; the row's sum is then the format's constant factor
// times acc. Per lane: the row-wise kernels broadcast one row's S and d_w, gemm_tile has 16 rows'.
inline __m512 super_block_step(__m512 acc, __m512i s, __m512 d_w, float d_a) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d_w, _mm512_set1_ps(d_a)), acc);
}

// The exact sum of the 16 int32 lanes.
inline int32_t hsum_epi32(__m512i v) {
  const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

// The row-wise kernels' step: acc (all lanes equal) for one row whose super-block left its exact
// integer sum spread over the lanes of isum.
inline __m512 row_super_block_step(__m512 acc, __m512i isum, float d_w, float d_a) {
  return super_block_step(acc, _mm512_set1_epi32(hsum_epi32(isum)), _mm512_set1_ps(d_w), d_a);
}

// The row's sum from the row-wise kernels' acc (all lanes equal).
inline float row_sum(__m512 acc) {
  return _mm_cvtss_f32(_mm512_castps512_ps128(acc));
}

// One super-block of a group of 16 weight rows, decoded for vpdpbusd.
struct DecodedGroupBlock {
  __m512i w[64];      // lane n of w[j]: row n's levels 4j .. 4j + 3, each + 128
  __m512i scale[16];  // lane n of scale[s]: row n's scale of elements 16s .. 16s + 15
  __m512 d;           // lane n: row n's d
};

// Rows [0, n_rows) of a group, n_rows <= 16, super-blocks [0, nb) decoded into out[nb]; the
// missing rows as zeros. F::levels(block, Int8Levels*) decodes one row's super-block.
template <class F>
void decode_group(const uint8_t* w, size_t w_stride, int n_rows, int64_t nb,
                  DecodedGroupBlock* out) {
  using Block = typename F::Block;
  const __m512i bias = _mm512_set1_epi8(char(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    __m512i v[4][16], scale[16];
    alignas(64) float d[16];
    for (int n = 0; n < 16; ++n) {
      if (n >= n_rows) {
        for (int c = 0; c < 4; ++c) v[c][n] = bias;
        scale[n] = _mm512_setzero_si512();
        d[n] = 0.0f;
        continue;
      }
      const auto* row = reinterpret_cast<const Block*>(w + size_t(n) * w_stride);
      _mm_prefetch(reinterpret_cast<const char*>(row + b + 4), _MM_HINT_T0);
      Int8Levels levels;
      F::levels(row[b], &levels);
      for (int c = 0; c < 4; ++c) v[c][n] = _mm512_xor_si512(levels.v[c], bias);
      scale[n] = levels.scale;
      d[n] = levels.d;
    }
    DecodedGroupBlock& o = out[b];
    for (int c = 0; c < 4; ++c) {
      transpose16(v[c]);
      for (int j = 0; j < 16; ++j) _mm512_store_si512(&o.w[16 * c + j], v[c][j]);
    }
    transpose16(scale);
    for (int s = 0; s < 16; ++s) _mm512_store_si512(&o.scale[s], scale[s]);
    o.d = _mm512_load_ps(d);
  }
}

// Tokens r < R against one decoded group: out[r * out_stride + n] for the rows n set in `rows`.
// Per 32 elements (8 weight vectors, loaded once for the R tokens) and token, two chains of
// vpdpbusd, each starting from -128 * the activations' sum over its elements (the Q8_K bsums cancel
// the bias), times the rows' scales with vpmulld: one chain per 16-element scale (F::kScaleElems
// 16), or the two added for one scale (32); with one scale per super-block (256) no multiply.
template <class F, int R>
void decoded_group_tile(const DecodedGroupBlock* dec, int64_t nb, const uint8_t* act,
                        size_t act_stride, float* out, int64_t out_stride, __mmask16 rows) {
  static_assert(F::kScaleElems == 16 || F::kScaleElems == 32 || F::kScaleElems == kQK_K);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const DecodedGroupBlock& k = dec[b];
    const BlockQ8_K* a[R];
    __m512i sum[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      sum[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int span = 0; span < kQK_K / 32; ++span) {
      __m512i wv[8];
      for (int v = 0; v < 8; ++v) wv[v] = _mm512_load_si512(&k.w[8 * span + v]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 32 * span;
        const int16_t* bsums = a[r]->bsums + 2 * span;
        __m512i lo = _mm512_set1_epi32(-128 * bsums[0]);
        __m512i hi = _mm512_set1_epi32(-128 * bsums[1]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          lo = _mm512_dpbusd_epi32(lo, wv[v], _mm512_set1_epi32(load_i32(qa + 4 * v)));
          hi = _mm512_dpbusd_epi32(hi, wv[v + 4], _mm512_set1_epi32(load_i32(qa + 16 + 4 * v)));
        }
        if constexpr (F::kScaleElems == 16) {
          sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(lo, k.scale[2 * span]));
          sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(hi, k.scale[2 * span + 1]));
        } else if constexpr (F::kScaleElems == 32) {
          sum[r] = _mm512_add_epi32(
              sum[r], _mm512_mullo_epi32(_mm512_add_epi32(lo, hi), k.scale[2 * span]));
        } else {
          sum[r] = _mm512_add_epi32(sum[r], _mm512_add_epi32(lo, hi));
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = super_block_step(acc[r], sum[r], k.d, a[r]->d);
  }
  const __m512 factor = _mm512_set1_ps(F::kFactor);
  for (int r = 0; r < R; ++r)
    _mm512_mask_storeu_ps(out + r * out_stride, rows, _mm512_mul_ps(factor, acc[r]));
}

// TypeTraits::gemm_tile for a format F (Block, kFactor, kScaleElems, levels()): per group of 16
// weight rows, the rows decoded once (decode_group), then every tile of tokens against them.
template <class F>
void int8_levels_gemm_tile(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                           const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                           int64_t out_stride) {
  const int64_t nb = n / kQK_K;
  DecodedGroupBlock* dec = thread_buffer<DecodedGroupBlock>(size_t(nb));
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t g = 0; g < n_w_rows; g += 16) {
    const int rows = int(n_w_rows - g < 16 ? n_w_rows - g : 16);
    decode_group<F>(wb + size_t(g) * w_stride, w_stride, rows, nb, dec);
    const __mmask16 mask = __mmask16((1u << rows) - 1);
    for_row_tiles(n_act, [&](auto tile, int64_t t) {
      decoded_group_tile<F, decltype(tile)::value>(dec, nb, act + size_t(t) * act_stride,
                                                   act_stride, out + t * out_stride + g, out_stride,
                                                   mask);
    });
  }
}

}  // namespace vela::kernels::avx512

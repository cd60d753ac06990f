// AVX2 dot products of the K-quant super-blocks (Q4_K, Q5_K, Q6_K) with Q8_K activations.
// Per super-block of 256, the weights are decoded 64 (Q4_K/Q5_K) or 128 (Q6_K) at a time and
// dotted with every activation row of the tile. All integer work is exact: unsigned levels times
// activation bytes (maddubs), times the sub-block scales (madd) into 8 int32 lanes per row; the
// weights' offsets (mins of Q4_K/Q5_K, the -32 of Q6_K) come from Q8_K's 16-element sums. Each
// super-block then adds its lanes, scaled by d_w * d_a, to the row's float accumulator with FMA.
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks.h"

namespace vela::kernels::avx2 {

namespace {

// Shuffle masks that broadcast int16 lane j (0..7) of a 128-bit half to all 8 lanes of it.
inline __m256i broadcast_i16_mask(int j) {
  return _mm256_set1_epi16(int16_t(0x0100 + 0x0202 * j));
}

// A 128-bit half broadcast to both halves.
inline __m256i both_halves(__m128i v) {
  return _mm256_broadcastsi128_si256(v);
}

// Q4_K/Q5_K scales: the 8 six-bit scales as int16 in both 128-bit halves, and the 8 mins
// duplicated per pair ([m0 m0 m1 m1 ... m7 m7]) to pair with Q8_K's 16 bsums.
struct KScales {
  __m256i scales;
  __m256i mins;
};

// Unpacks the 12-byte scale array (layout as k_scale_min() in quant/blocks.h) four sub-blocks
// at a time: bytes 0-3 / 4-7 hold scales / mins 0-3 in their low 6 bits and the top 2 bits of
// scales / mins 4-7 in their top 2 bits; bytes 8-11 hold the low 4 bits of scales 4-7 (low
// nibble) and mins 4-7 (high nibble).
inline KScales unpack_k_scales(const uint8_t* packed) {
  const uint32_t u0 = load_u32(packed);
  const uint32_t u1 = load_u32(packed + 4);
  const uint32_t u2 = load_u32(packed + 8);
  const uint32_t sc_lo = u0 & 0x3f3f3f3f;
  const uint32_t mn_lo = u1 & 0x3f3f3f3f;
  const uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 2) & 0x30303030);
  const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 2) & 0x30303030);
  const __m128i sc = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(sc_hi), int(sc_lo)));
  const __m128i mn = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(mn_hi), int(mn_lo)));
  return {both_halves(sc),
          _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn))};
}

// Q4_K / Q5_K (kHighBit), per super-block:
//   d d_a sum_j sc_j (q . p)_j  -  dmin d_a sum_j mn_j (bsum_2j + bsum_2j+1).
// Ranges: maddubs pairs <= 2 * 31 * 127, times a scale <= 63 and summed over the 8 sub-blocks'
// shares of a lane: well inside int16 and int32.
template <class Block, bool kHighBit>
struct AffineKDot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const Block*>(w_row);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const Block& blk = w[b];
      const KScales sm = unpack_k_scales(blk.scales);
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      __m256i high_bits;  // Q5_K: bit j of byte l is the 5th bit of element 32 j + l
      if constexpr (kHighBit) high_bits = loadu256(blk.qh);
      VELA_UNROLL
      for (int g = 0; g < 4; ++g) {  // 32 bytes of qs: sub-blocks 2g (low nibbles), 2g+1 (high)
        const __m256i raw = loadu256(blk.qs + 32 * g);
        __m256i q_lo = _mm256_and_si256(raw, low_nibble);
        __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibble);
        if constexpr (kHighBit) {
          // Bit 0 of each byte is the current sub-block's bit; 16-bit shifts only bring bits
          // from the neighbouring byte in at the top, which the mask drops.
          const __m256i one = _mm256_set1_epi8(1);
          q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
          high_bits = _mm256_srli_epi16(high_bits, 1);
          q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
          high_bits = _mm256_srli_epi16(high_bits, 1);
        }
        const __m256i sc_lo = _mm256_shuffle_epi8(sm.scales, broadcast_i16_mask(2 * g));
        const __m256i sc_hi = _mm256_shuffle_epi8(sm.scales, broadcast_i16_mask(2 * g + 1));
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          const int8_t* p = a[t][b].qs + 64 * g;
          const __m256i lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q_lo, loadu256(p)), sc_lo);
          const __m256i hi = _mm256_madd_epi16(_mm256_maddubs_epi16(q_hi, loadu256(p + 32)), sc_hi);
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(lo, hi));
        }
      }
      const float d = half_to_float(blk.d);
      const float dmin = half_to_float(blk.dmin);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        const BlockQ8_K& ab = a[t][b];
        const __m256i min_sum = _mm256_madd_epi16(loadu256(ab.bsums), sm.mins);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * ab.d), _mm256_cvtepi32_ps(min_sum), acc[t]);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(acc[t]);
  }
};

// Q6_K, per super-block: d d_a (sum_j sc_j (q . p)_j - 32 sum_j sc_j bsum_j), q in [0, 63].
// Ranges: maddubs pairs <= 2 * 63 * 127 (int16), times |sc| <= 128, summed per lane: < 2^26.
struct Q6KDot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const BlockQ6_K*>(w_row);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i top_pair = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const BlockQ6_K& blk = w[b];
      // The 16 sub-block scales as int16 [s0..s7 | s8..s15]; each half h of the super-block uses
      // one 128-bit half of them, broadcast so a shuffle can pick any of its 8.
      const __m256i scales =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      const __m256i scales_of_half[2] = {_mm256_permute2x128_si256(scales, scales, 0x00),
                                         _mm256_permute2x128_si256(scales, scales, 0x11)};
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const __m256i half_scales = scales_of_half[h];
        const __m256i ql0 = loadu256(blk.ql + 64 * h);
        const __m256i ql1 = loadu256(blk.ql + 64 * h + 32);
        const __m256i qh = loadu256(blk.qh + 32 * h);
        // Decoded one 32-element quarter j at a time, so that only it, its scales and the
        // source bytes are live next to the tile's accumulators.
        VELA_UNROLL
        for (int j = 0; j < 4; ++j) {
          // Element 128 h + 32 j + l: low 4 bits from ql0 (j even) or ql1 (j odd), low nibble
          // for j < 2; top 2 bits from bits 2j, 2j+1 of qh, moved to bits 4-5.
          const __m256i low_src = (j % 2 == 0) ? ql0 : ql1;
          const __m256i low = j < 2 ? low_src : _mm256_srli_epi16(low_src, 4);
          __m256i top;
          switch (j) {
            case 0:
              top = _mm256_slli_epi16(qh, 4);
              break;
            case 1:
              top = _mm256_slli_epi16(qh, 2);
              break;
            case 2:
              top = qh;
              break;
            default:
              top = _mm256_srli_epi16(qh, 2);
              break;
          }
          const __m256i q =
              _mm256_or_si256(_mm256_and_si256(low, low_nibble), _mm256_and_si256(top, top_pair));
          // 32 elements span two 16-element sub-blocks: the low 128 bits take scale 2j of this
          // half, the high 128 bits scale 2j+1.
          const __m256i pick =
              _mm256_set_m128i(_mm_set1_epi16(int16_t(0x0100 + 0x0202 * (2 * j + 1))),
                               _mm_set1_epi16(int16_t(0x0100 + 0x0202 * (2 * j))));
          const __m256i sc = _mm256_shuffle_epi8(half_scales, pick);
          VELA_UNROLL
          for (int t = 0; t < k; ++t) {
            const __m256i p = loadu256(a[t][b].qs + 128 * h + 32 * j);
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, p), sc));
          }
        }
      }
      const float d = half_to_float(blk.d);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        const BlockQ8_K& ab = a[t][b];
        const __m256i offset = _mm256_madd_epi16(loadu256(ab.bsums), scales);  // sum sc_j bsum_j
        const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(offset, 5));
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(total), acc[t]);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(acc[t]);
  }
};

constexpr int kTile = 4;
using Q4KRows = RowTiles<AffineKDot<BlockQ4_K, false>, kTile>;
using Q5KRows = RowTiles<AffineKDot<BlockQ5_K, true>, kTile>;
using Q6KRows = RowTiles<Q6KDot, kTile>;

}  // namespace

float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* a) {
  return Q4KRows::one(n, w, a);
}
float vec_dot_q5_k_q8_k(int64_t n, const void* w, const void* a) {
  return Q5KRows::one(n, w, a);
}
float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* a) {
  return Q6KRows::one(n, w, a);
}

void vec_dot_rows_q4_k_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q4KRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q5_k_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q5KRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q6_k_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q6KRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

}  // namespace vela::kernels::avx2

// AVX2 dot products of the 2- and 3-bit K super-blocks (Q2_K, Q3_K) and the ternary ones (TQ1_0,
// TQ2_0) with Q8_K activations. Each super-block is decoded 32 elements at a time (a register of
// unsigned levels in element order, so every activation register is one contiguous load) and
// dotted with every activation row of the tile: maddubs gives exact int16 pair sums; Q2_K and
// Q3_K weight them by their sub-block scales with madd into 8 int32 lanes per row, the ternary
// types add them up in int16. The levels' offsets (Q2_K's mins, Q3_K's -4, the ternary -1) come
// from Q8_K's 16-element sums, and each super-block's integer lanes are scaled once by
// d_w * d_a into the row's float accumulator, as the scalar reference does (the ternary types
// add the lanes up first, as gemm_int8_levels_avx2.h's prompt kernel, which they also take).
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/gemm_int8_levels_avx2.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks_low_k.h"

namespace vela::kernels::avx2 {

namespace {

// Register r (0..7) of a 2-bit field array: the levels of elements 32 r .. 32 r + 31, from bits
// 2 (r % 4) .. +1 of the 32 bytes half = qs + 32 (r / 4) (order: quant/blocks_low_k.h).
inline __m256i two_bit_levels(__m256i half, int r) {
  return _mm256_and_si256(_mm256_srli_epi16(half, 2 * (r % 4)), _mm256_set1_epi8(3));
}

// The int16 scales of the two 16-element sub-blocks of register r: scale 2r in the low 128 bits,
// 2r + 1 in the high ones. half_scales: the 8 int16 scales of sub-blocks 8 (r / 4) .. +7 in both
// 128-bit halves.
inline __m256i register_scales(__m256i half_scales, int r) {
  const int j = 2 * (r % 4);
  const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(int16_t(0x0100 + 0x0202 * (j + 1))),
                                        _mm_set1_epi16(int16_t(0x0100 + 0x0202 * j)));
  return _mm256_shuffle_epi8(half_scales, pick);
}

// Q3_K's 16 six-bit scales minus 32, as int8 (layout: q3_k_scale() in quant/blocks_low_k.h):
// the low nibbles of bytes 0-7, then their high nibbles, each ORed with 2 bits of bytes 8-11
// (scale j takes bits 2 (j / 4) .. +1 of byte 8 + j % 4, brought to bits 4-5). In vector
// registers throughout: assembling them in general-purpose ones and moving them over cost
// Q3_K about half its speed.
inline __m128i unpack_q3_k_scales(const uint8_t* packed) {
  const __m128i low8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
  const __m128i nibbles =
      _mm_and_si128(_mm_unpacklo_epi64(low8, _mm_srli_epi16(low8, 4)), _mm_set1_epi8(0x0F));
  const __m128i top =
      _mm_srlv_epi32(_mm_set1_epi32(load_i32(packed + 8)), _mm_setr_epi32(0, 2, 4, 6));
  const __m128i high = _mm_slli_epi16(_mm_and_si128(top, _mm_set1_epi8(3)), 4);
  return _mm_sub_epi8(_mm_or_si128(nibbles, high), _mm_set1_epi8(32));
}

// The two 128-bit halves of v, each broadcast to a whole register.
struct Halves {
  __m256i of[2];
  explicit Halves(__m256i v)
      : of{_mm256_permute2x128_si256(v, v, 0x00), _mm256_permute2x128_si256(v, v, 0x11)} {}
};

// Q2_K, per super-block: d d_a sum_j sc_j (q . p)_j - dmin d_a sum_j mn_j bsum_j, q in [0, 3].
// Ranges: maddubs pairs <= 2 * 3 * 127, times sc <= 15, summed over 8 registers: < 2^18.
struct Q2KDot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const BlockQ2_K*>(w_row);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    const __m128i low_nibble = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const BlockQ2_K& blk = w[b];
      prefetch_weights<sizeof(BlockQ2_K)>(&blk);
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
      const __m256i mins =
          _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low_nibble));
      const Halves scales(_mm256_cvtepu8_epi16(_mm_and_si128(packed, low_nibble)));
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      VELA_UNROLL
      for (int r = 0; r < 8; ++r) {
        const __m256i q = two_bit_levels(loadu256(blk.qs + 32 * (r / 4)), r);
        const __m256i sc = register_scales(scales.of[r / 4], r);
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          const __m256i p = loadu256(a[t][b].qs + 32 * r);
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, p), sc));
        }
      }
      const float d = half_to_float(blk.d);
      const float dmin = half_to_float(blk.dmin);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        const BlockQ8_K& ab = a[t][b];
        const __m256i min_sum = _mm256_madd_epi16(loadu256(ab.bsums), mins);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * ab.d), _mm256_cvtepi32_ps(min_sum), acc[t]);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(acc[t]);
  }
};

// Q3_K, per super-block: d d_a (sum_j s_j (u . p)_j - 4 sum_j s_j bsum_j), with the stored
// level u = q + 4 in [0, 7] (low 2 bits | third bit << 2) and s_j = scale - 32 in [-32, 31].
// Ranges: maddubs pairs <= 2 * 7 * 127, times |s| <= 32, summed over 8 registers: < 2^21.
struct Q3KDot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const BlockQ3_K*>(w_row);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    const __m256i bit2 = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const BlockQ3_K& blk = w[b];
      prefetch_weights<sizeof(BlockQ3_K)>(&blk);
      const __m256i scales16 = _mm256_cvtepi8_epi16(unpack_q3_k_scales(blk.scales));
      const Halves scales(scales16);
      const __m256i hmask = loadu256(blk.hmask);  // byte l, bit r: third bit of element 32 r + l
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      VELA_UNROLL
      for (int r = 0; r < 8; ++r) {
        // Bit r of each hmask byte moved to bit 2; 16-bit shifts by at most 5 never bring bits
        // across the byte boundary into bit 2 of either byte.
        __m256i third;
        if (r < 2) {
          third = _mm256_slli_epi16(hmask, 2 - r);
        } else if (r == 2) {
          third = hmask;
        } else {
          third = _mm256_srli_epi16(hmask, r - 2);
        }
        const __m256i u = _mm256_or_si256(two_bit_levels(loadu256(blk.qs + 32 * (r / 4)), r),
                                          _mm256_and_si256(third, bit2));
        const __m256i sc = register_scales(scales.of[r / 4], r);
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          const __m256i p = loadu256(a[t][b].qs + 32 * r);
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(u, p), sc));
        }
      }
      const float d = half_to_float(blk.d);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        const BlockQ8_K& ab = a[t][b];
        const __m256i offset = _mm256_madd_epi16(loadu256(ab.bsums), scales16);  // sum s_j bsum_j
        const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(offset, 2));
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab.d), _mm256_cvtepi32_ps(total), acc[t]);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(acc[t]);
  }
};

// TQ2_0's levels q in [0, 3], register r = elements 32 r .. 32 r + 31.
struct TQ2Levels {
  using Block = BlockTQ2_0;
  explicit TQ2Levels(const Block& blk) : half{loadu256(blk.qs), loadu256(blk.qs + 32)} {}
  __m256i next(int r) { return two_bit_levels(half[r / 4], r); }
  __m256i half[2];
};

// x * 3 per byte, modulo 256.
inline __m256i times3(__m256i x) {
  return _mm256_add_epi8(x, _mm256_add_epi8(x, x));
}

// TQ1_0's trits t in {0, 1, 2}, register r = elements 32 r .. 32 r + 31 (element map:
// quant/blocks_low_k.h). Trit n of a byte b is read from c = b * 3^n mod 256 as
// floor(3 c / 256) = (c >= 86) + (c >= 171). The bytes are kept offset by 128 (b ^ 0x80) so that
// signed byte compares serve: tripling keeps the offset, since 3 (c + 128) = 3 c + 128 mod 256.
struct TQ1Levels {
  using Block = BlockTQ1_0;
  explicit TQ1Levels(const Block& blk)
      : cur(_mm256_xor_si256(loadu256(blk.qs), _mm256_set1_epi8(char(0x80)))), qh(&blk.qh[0]) {
    const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 32));
    tail_bytes = _mm256_xor_si256(_mm256_broadcastsi128_si256(tail), _mm256_set1_epi8(char(0x80)));
  }

  static __m256i trits(__m256i offset_bytes) {
    const __m256i ge86 = _mm256_cmpgt_epi8(offset_bytes, _mm256_set1_epi8(85 - 128));
    const __m256i ge171 = _mm256_cmpgt_epi8(offset_bytes, _mm256_set1_epi8(170 - 128));
    return _mm256_abs_epi8(_mm256_add_epi8(ge86, ge171));  // -(-1 + -1), -(-1) or 0
  }

  // Called for r = 0, 1, ..., 7 in order.
  __m256i next(int r) {
    if (r < 5) {  // qs[0..31] trit r: element 32 r + m
      const __m256i t = trits(cur);
      if (r < 4) cur = times3(cur);
      return t;
    }
    if (r == 5) {  // qs[32..47] trits 0 | 1: elements 160 + m | 176 + m
      cur = _mm256_blend_epi32(tail_bytes, times3(tail_bytes), 0xF0);
    } else if (r == 6) {  // trits 2 | 3
      cur = times3(times3(cur));
    } else {  // trit 4 | qh[j] trit n for element 240 + 4 n + j
      const __m128i z = _mm_xor_si128(_mm_set1_epi32(int(load_u32(qh))), _mm_set1_epi8(char(0x80)));
      const __m128i z3 = _mm_add_epi8(z, _mm_add_epi8(z, z));
      const __m128i z9 = _mm_add_epi8(z3, _mm_add_epi8(z3, z3));
      const __m128i z27 = _mm_add_epi8(z9, _mm_add_epi8(z9, z9));
      const __m128i tail =
          _mm_blend_epi32(_mm_blend_epi32(z, z3, 0x2), _mm_blend_epi32(z9, z27, 0x8), 0xC);
      cur = _mm256_inserti128_si256(times3(times3(cur)), tail, 1);
    }
    return trits(cur);
  }

  __m256i cur;
  __m256i tail_bytes;
  const uint8_t* qh;
};

// The ternary types, per super-block: d d_a (sum_e u_e p_e - sum_e p_e) with the stored level
// u = weight + 1 (TQ1_0 in [0, 2], TQ2_0 in [0, 3]). Ranges: maddubs pairs <= 2 * 3 * 127, summed
// over 8 registers, minus a 16-element bsum <= 16 * 127: within int16.
template <class Levels>
struct TernaryDot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const typename Levels::Block*>(w_row);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const auto& blk = w[b];
      prefetch_weights<sizeof(blk)>(&blk);
      Levels levels(blk);
      __m256i pair_sums[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) pair_sums[t] = _mm256_setzero_si256();
      VELA_UNROLL
      for (int r = 0; r < 8; ++r) {
        const __m256i u = levels.next(r);
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          const __m256i p = loadu256(a[t][b].qs + 32 * r);
          pair_sums[t] = _mm256_add_epi16(pair_sums[t], _mm256_maddubs_epi16(u, p));
        }
      }
      const float d = half_to_float(blk.d);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        const BlockQ8_K& ab = a[t][b];
        const __m256i total =
            _mm256_madd_epi16(_mm256_sub_epi16(pair_sums[t], loadu256(ab.bsums)), ones);
        acc[t] = row_super_block_step(acc[t], total, d, ab.d);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = row_sum(acc[t]);
  }
};

// A ternary type as gemm_int8_levels_avx2.h's format: levels u - 1, one scale.
template <class Levels>
struct TernaryLevels {
  using Block = typename Levels::Block;
  static constexpr float kFactor = 1.0f;
  static void levels(const Block& w, Int8Levels* out) {
    Levels levels(w);
    VELA_UNROLL
    for (int r = 0; r < 8; ++r) out->v[r] = _mm256_sub_epi8(levels.next(r), _mm256_set1_epi8(1));
    out->scale = _mm256_set1_epi16(1);
    out->d = half_to_float(w.d);
  }
};

constexpr int kTile = 4;
using Q2KRows = RowTiles<Q2KDot, kTile>;
using Q3KRows = RowTiles<Q3KDot, kTile>;
using TQ1Rows = RowTiles<TernaryDot<TQ1Levels>, kTile>;
using TQ2Rows = RowTiles<TernaryDot<TQ2Levels>, kTile>;

}  // namespace

float vec_dot_q2_k_q8_k(int64_t n, const void* w, const void* a) {
  return Q2KRows::one(n, w, a);
}
float vec_dot_q3_k_q8_k(int64_t n, const void* w, const void* a) {
  return Q3KRows::one(n, w, a);
}
float vec_dot_tq1_0_q8_k(int64_t n, const void* w, const void* a) {
  return TQ1Rows::one(n, w, a);
}
float vec_dot_tq2_0_q8_k(int64_t n, const void* w, const void* a) {
  return TQ2Rows::one(n, w, a);
}

void vec_dot_rows_q2_k_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q2KRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q3_k_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q3KRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_tq1_0_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  TQ1Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_tq2_0_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  TQ2Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

void gemm_tile_tq1_0_q8_k(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                          const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                          int64_t out_stride) {
  int8_levels_gemm_tile<TernaryLevels<TQ1Levels>>(n, w, w_stride, n_w_rows, act, act_stride, n_act,
                                                  out, out_stride);
}
void gemm_tile_tq2_0_q8_k(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                          const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                          int64_t out_stride) {
  int8_levels_gemm_tile<TernaryLevels<TQ2Levels>>(n, w, w_stride, n_w_rows, act, act_stride, n_act,
                                                  out, out_stride);
}

}  // namespace vela::kernels::avx2

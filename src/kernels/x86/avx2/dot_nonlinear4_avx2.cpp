// AVX2 dot products of the 4-bit non-linear types: IQ4_NL and MXFP4 against Q8_0, IQ4_XS against
// Q8_K. A weight's 4-bit codes index a 16-entry int8 table, so one vpshufb per 32 codes (the
// table in both 128-bit halves) turns them into signed levels; each decoded block is then dotted
// with every activation row of the tile, its magnitude against the activation with the level's
// sign (maddubs + madd), exactly in int32 as the scalar reference sums it. IQ4_NL / MXFP4 scale
// each block's lanes by d_w * d_a into the row's float accumulators (two per row, for even and
// odd blocks); IQ4_XS first weights each sub-block's int16 pair sums by its integer scale and
// scales the super-block's lanes once.
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks.h"
#include "quant/blocks_nonlinear4.h"

namespace vela::kernels::avx2 {

namespace {

// The 16 levels in both 128-bit halves, as vpshufb's table.
inline __m256i level_table(const int8_t* levels) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
}

// 16 bytes of codes -> the 32 levels in element order (Q4_0's nibble order).
inline __m256i decode_codes_32(__m256i table, const uint8_t* qs) {
  return _mm256_shuffle_epi8(table, unpack_nibbles_32(qs));
}

struct IQ4_NLFormat {
  using Block = BlockIQ4_NL;
  static const int8_t* levels() { return kIQ4Levels; }
  static float scale(const Block& b) { return half_to_float(b.d); }
};

struct MXFP4Format {
  using Block = BlockMXFP4;
  static const int8_t* levels() { return kMXFP4Levels; }
  static float scale(const Block& b) { return kE8M0HalfScales[b.e]; }
};

// 32-element blocks against Q8_0: sum_b d_w d_a sum_j level_j p_j. Levels are at most 127 in
// magnitude (IQ4's -127 included), so maddubs' pair sums stay below 2^15.
template <class F>
struct Table32Dot {
  using Block = typename F::Block;

  // Adds block b of every row to that row's accumulator `slot`.
  template <int k, int slot>
  static void block(__m256i table, const Block& wb, const BlockQ8_0* const* a, int64_t b,
                    __m256 (*acc)[2]) {
    const __m256i q = decode_codes_32(table, wb.qs);
    const __m256i q_abs = _mm256_abs_epi8(q);
    const float dw = F::scale(wb);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      const BlockQ8_0& ab = a[t][b];
      const __m256i isum = dot_i8_i8(q_abs, q, loadu256(ab.qs));
      const __m256 scale = _mm256_set1_ps(dw * half_to_float(ab.d));
      acc[t][slot] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[t][slot]);
    }
  }

  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const Block*>(w_row);
    const __m256i table = level_table(F::levels());
    const BlockQ8_0* a[k];
    __m256 acc[k][2];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_0*>(act[t]);
      acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    }
    const int64_t nb = n / kQK8_0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      prefetch_weights<2 * sizeof(Block)>(w + b);
      block<k, 0>(table, w[b], a, b, acc);
      block<k, 1>(table, w[b + 1], a, b + 1, acc);
    }
    if (b < nb) block<k, 0>(table, w[b], a, b, acc);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
  }
};

// IQ4_XS against Q8_K, per super-block: d_w d_a sum_j (sc_j - 32) sum_l level_l p_l.
// Ranges: maddubs pairs <= 2 * 127 * 127, times |sc - 32| <= 32, summed over the 8 sub-blocks'
// shares of a lane: < 2^25.
struct IQ4_XSDot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const BlockIQ4_XS*>(w_row);
    const __m256i table = level_table(kIQ4Levels);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / kQK4_XS; ++b) {
      const BlockIQ4_XS& blk = w[b];
      prefetch_weights<sizeof(BlockIQ4_XS)>(&blk);
      // The 8 sub-block scales minus 32 as int16, in both 128-bit halves so that one vpshufb
      // broadcasts scale j to all 16 lanes of sub-block j's pair sums.
      const __m128i packed = _mm_cvtsi64_si128(int64_t(iq4_xs_packed_scales(blk)));
      const __m256i scales =
          _mm256_broadcastsi128_si256(_mm_sub_epi16(_mm_cvtepu8_epi16(packed), _mm_set1_epi16(32)));
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      VELA_UNROLL
      for (int j = 0; j < kIQ4XSSubBlocks; ++j) {
        const __m256i q = decode_codes_32(table, blk.qs + 16 * j);
        const __m256i q_abs = _mm256_abs_epi8(q);
        const __m256i sc =
            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(int16_t(0x0100 + 0x0202 * j)));
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          const __m256i p = loadu256(a[t][b].qs + 32 * j);
          const __m256i pairs = _mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(p, q));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, sc));
        }
      }
      const float d = half_to_float(blk.d);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        acc[t] =
            _mm256_fmadd_ps(_mm256_set1_ps(d * a[t][b].d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(acc[t]);
  }
};

// Four rows per tile, as the other block types: accumulators, the decoded block, its magnitude
// and the table fit in the 16 ymm registers.
constexpr int kTile = 4;
using IQ4_NLRows = RowTiles<Table32Dot<IQ4_NLFormat>, kTile>;
using MXFP4Rows = RowTiles<Table32Dot<MXFP4Format>, kTile>;
using IQ4_XSRows = RowTiles<IQ4_XSDot, kTile>;

}  // namespace

float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a) {
  return IQ4_NLRows::one(n, w, a);
}
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a) {
  return MXFP4Rows::one(n, w, a);
}
float vec_dot_iq4_xs_q8_k(int64_t n, const void* w, const void* a) {
  return IQ4_XSRows::one(n, w, a);
}

void vec_dot_rows_iq4_nl_q8_0(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                              int64_t n_act, float* out, int64_t out_stride) {
  IQ4_NLRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_mxfp4_q8_0(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  MXFP4Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_iq4_xs_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                              int64_t n_act, float* out, int64_t out_stride) {
  IQ4_XSRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

}  // namespace vela::kernels::avx2

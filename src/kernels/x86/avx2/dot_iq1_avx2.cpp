// AVX2 dot products of the 1-bit codebook types (IQ1_S, IQ1_M) with Q8_K activations.
// Per super-block, the 32 groups' codebook entries are loaded four at a time (one 32-element
// sub-block per register) and each sub-block is dotted with every activation row of the tile.
// The decoded byte of an element with codebook value g in {-1, 0, 1} and delta +-1/8 is
//   u = 8 g + (delta > 0 ? 10 : 8) = 8 (g + delta) + 9,  in [0, 18],
// so vpmaddubsw applies (u unsigned, the activation signed), and per 16 elements with scale ls
//   ls * sum u p - 9 ls * bsum = 8 ls * sum (g + delta) p,
// the Q8_K bsum removing the +9. Summed over the super-block this is the scalar reference's
// exact integer S (ref/vec_dot_iq1_ref.h, counted in eighths), scaled once in float by
// d_w / 8 * d_a. Prompts take gemm_int8_levels_avx2.h's kernel on the same decode (levels u - 9).
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/gemm_int8_levels_avx2.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks.h"
#include "quant/blocks_iq1.h"
#include "quant/iq1_grid.h"

namespace vela::kernels::avx2 {

namespace {

// Per super-block: the 16 scales ls (one per 16 elements, int16) in the two forms the dot uses.
struct Iq1Scales {
  __m256i ls_halves[2];  // [h]: ls 8h .. 8h+7 in both 128-bit halves (for a per-sub-block pick)
  __m256i bsum_scales;   // -9 ls per Q8_K bsum
  float d;               // d_w / 8 (exact: a power-of-two step)
};

// The indices and delta biases of one pair of sub-blocks (8 groups, in group order).
struct Iq1Pair {
  __m256i index;  // int32 codebook index per group, < 2048
  __m256i bias;   // int32 per group: 10 where its delta is positive, 8 where negative
};

inline Iq1Scales make_scales(__m256i ls, float d) {
  return {{_mm256_permute2x128_si256(ls, ls, 0x00), _mm256_permute2x128_si256(ls, ls, 0x11)},
          _mm256_mullo_epi16(ls, _mm256_set1_epi16(-9)),
          d * kIq1Delta};
}

// bias = 10 - 2 * (delta sign bit), from int32 lanes holding that bit at bit 0.
inline __m256i bias_from_sign(__m256i sign_bit) {
  return _mm256_sub_epi32(_mm256_set1_epi32(10), _mm256_add_epi32(sign_bit, sign_bit));
}

// The codebook indices' low 8 bits of groups 8p .. 8p+7, as int32.
inline __m256i index_bytes(const uint8_t* qs, int p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * p)));
}

struct IQ1_SFormat {
  using Block = BlockIQ1_S;

  static Iq1Scales scales(const Block& w) {
    // ls = 2 s + 1 per sub-block (qh bits 12-14); sub-block b covers bsums 2b and 2b+1.
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qh));
    const __m128i s = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
    const __m128i ls = _mm_add_epi16(_mm_add_epi16(s, s), _mm_set1_epi16(1));
    return make_scales(_mm256_set_m128i(_mm_unpackhi_epi16(ls, ls), _mm_unpacklo_epi16(ls, ls)),
                       half_to_float(w.d));
  }

  static Iq1Pair pair(const Block& w, int p) {
    // qh[2p] | qh[2p+1] << 16: group l of sub-block 2p + h has its 3 high index bits at
    // 16 h + 3 l and the sub-block's delta sign at 16 h + 15.
    const __m256i qh = _mm256_set1_epi32(int(load_u32(w.qh + 2 * p)));
    const __m256i high = _mm256_srlv_epi32(qh, _mm256_setr_epi32(0, 3, 6, 9, 16, 19, 22, 25));
    const __m256i sign = _mm256_srlv_epi32(qh, _mm256_setr_epi32(15, 15, 15, 15, 31, 31, 31, 31));
    const __m256i index = _mm256_or_si256(
        index_bytes(w.qs, p), _mm256_slli_epi32(_mm256_and_si256(high, _mm256_set1_epi32(7)), 8));
    return {index, bias_from_sign(_mm256_and_si256(sign, _mm256_set1_epi32(1)))};
  }
};

struct IQ1_MFormat {
  using Block = BlockIQ1_M;

  static Iq1Scales scales(const Block& w) {
    // Scale k sits at bits 3 (k % 4) of word k / 4. Lane k takes word k / 4 (a byte shuffle of
    // the broadcast words), a multiply by 2^(13 - 3 (k % 4)) moves its 3 bits to the top, and a
    // shift brings them down.
    const uint64_t words = iq1_m_scale_words(w);
    const __m256i all = _mm256_set1_epi64x(static_cast<long long>(words));
    const __m256i word_of = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,  //
                                             4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7);
    const __m256i to_top =
        _mm256_setr_epi16(1 << 13, 1 << 10, 1 << 7, 1 << 4, 1 << 13, 1 << 10, 1 << 7, 1 << 4,
                          1 << 13, 1 << 10, 1 << 7, 1 << 4, 1 << 13, 1 << 10, 1 << 7, 1 << 4);
    const __m256i s =
        _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(all, word_of), to_top), 13);
    const __m256i ls = _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1));
    return make_scales(ls, half_to_float(iq1m_scale_bits(w)));
  }

  static Iq1Pair pair(const Block& w, int p) {
    // qh[4p .. 4p+3] as a little-endian word: group 8p + j's nibble is bits 4j .. 4j+3 (3 high
    // index bits, then the delta sign).
    const __m256i qh = _mm256_set1_epi32(int(load_u32(w.qh + 4 * p)));
    const __m256i nibble = _mm256_srlv_epi32(qh, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i index = _mm256_or_si256(
        index_bytes(w.qs, p), _mm256_slli_epi32(_mm256_and_si256(nibble, _mm256_set1_epi32(7)), 8));
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(nibble, 3), _mm256_set1_epi32(1));
    return {index, bias_from_sign(sign)};
  }
};

// One sub-block's 32 decoded bytes u from its 4 groups' indices (index [4], each < 2048) and
// biases (int32 each). Plain loads rather than vpgatherdq: as fast here, and gathers are much
// slower on CPUs with the Gather Data Sampling mitigation.
inline __m256i decode_sub_block(const uint32_t* index, __m128i bias) {
  const auto entry_pair = [](uint32_t a, uint32_t b) {
    return _mm_insert_epi64(_mm_cvtsi64_si128(int64_t(kIq1Grid[a])), int64_t(kIq1Grid[b]), 1);
  };
  const __m256i g =
      _mm256_set_m128i(entry_pair(index[2], index[3]), entry_pair(index[0], index[1]));
  // Each group's bias byte repeated over its 8 bytes.
  const __m256i repeat = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8,  //
                                          0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
  const __m256i b = _mm256_shuffle_epi8(_mm256_cvtepu32_epi64(bias), repeat);
  // 8 g via the sign of g (g in {-1, 0, 1}), plus the bias.
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), b);
}

// Ranges: vpmaddubsw pairs <= 2 * 18 * 128; times ls <= 15 and summed per lane over the block,
// and with the bsum term (|bsum| <= 16 * 128, 9 ls <= 135), every int32 lane stays below 2^22.
template <class F>
struct Iq1Dot {
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const typename F::Block*>(w_row);
    const BlockQ8_K* a[k];
    __m256 acc[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act[t]);
      acc[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      const typename F::Block& blk = w[b];
      prefetch_weights<sizeof(blk)>(&blk);
      const Iq1Scales sc = F::scales(blk);
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      VELA_UNROLL
      for (int p = 0; p < 4; ++p) {
        const Iq1Pair pr = F::pair(blk, p);
        alignas(32) uint32_t index[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(index), pr.index);
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int sub = 2 * p + h;
          // (A literal lane index: clang wants the immediate constant before unrolling.)
          const __m128i bias =
              h == 0 ? _mm256_castsi256_si128(pr.bias) : _mm256_extracti128_si256(pr.bias, 1);
          const __m256i u = decode_sub_block(index + 4 * h, bias);
          // Elements 0-15 of the sub-block (low 128 bits) take scale 2 sub, 16-31 scale 2 sub+1.
          const int j = (2 * sub) % 8;
          const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(int16_t(0x0100 + 0x0202 * (j + 1))),
                                                _mm_set1_epi16(int16_t(0x0100 + 0x0202 * j)));
          const __m256i ls = _mm256_shuffle_epi8(sc.ls_halves[sub / 4], pick);
          VELA_UNROLL
          for (int t = 0; t < k; ++t) {
            const __m256i q = loadu256(a[t][b].qs + 32 * sub);
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ls));
          }
        }
      }
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        const BlockQ8_K& ab = a[t][b];
        const __m256i total =
            _mm256_add_epi32(isum[t], _mm256_madd_epi16(loadu256(ab.bsums), sc.bsum_scales));
        acc[t] = row_super_block_step(acc[t], total, sc.d, ab.d);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = row_sum(acc[t]);
  }
};

// F as gemm_int8_levels_avx2.h's format: levels 8 (g + delta) = u - 9, the scales ls.
template <class F>
struct Levels {
  using Block = typename F::Block;
  static constexpr float kFactor = 1.0f;
  static void levels(const Block& w, Int8Levels* out) {
    const Iq1Scales sc = F::scales(w);
    VELA_UNROLL
    for (int p = 0; p < 4; ++p) {
      const Iq1Pair pr = F::pair(w, p);
      alignas(32) uint32_t index[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(index), pr.index);
      out->v[2 * p] = _mm256_sub_epi8(decode_sub_block(index, _mm256_castsi256_si128(pr.bias)),
                                      _mm256_set1_epi8(9));
      out->v[2 * p + 1] = _mm256_sub_epi8(
          decode_sub_block(index + 4, _mm256_extracti128_si256(pr.bias, 1)), _mm256_set1_epi8(9));
    }
    out->scale = _mm256_blend_epi32(sc.ls_halves[0], sc.ls_halves[1], 0xF0);
    out->d = sc.d;
  }
};

constexpr int kTile = 4;
using IQ1_SRows = RowTiles<Iq1Dot<IQ1_SFormat>, kTile>;
using IQ1_MRows = RowTiles<Iq1Dot<IQ1_MFormat>, kTile>;

}  // namespace

float vec_dot_iq1_s_q8_k(int64_t n, const void* w, const void* a) {
  return IQ1_SRows::one(n, w, a);
}
float vec_dot_iq1_m_q8_k(int64_t n, const void* w, const void* a) {
  return IQ1_MRows::one(n, w, a);
}

void vec_dot_rows_iq1_s_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  IQ1_SRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_iq1_m_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  IQ1_MRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

void gemm_tile_iq1_s_q8_k(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                          const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                          int64_t out_stride) {
  int8_levels_gemm_tile<Levels<IQ1_SFormat>>(n, w, w_stride, n_w_rows, act, act_stride, n_act, out,
                                             out_stride);
}
void gemm_tile_iq1_m_q8_k(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                          const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                          int64_t out_stride) {
  int8_levels_gemm_tile<Levels<IQ1_MFormat>>(n, w, w_stride, n_w_rows, act, act_stride, n_act, out,
                                             out_stride);
}

}  // namespace vela::kernels::avx2

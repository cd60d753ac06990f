// AVX-512 dot products of the 1-bit codebook types (IQ1_S, IQ1_M) with Q8_K activations.
// Each 256-element super-block is decoded once into four registers of unsigned bytes, 64
// elements each in element order, plus int16 scale vectors; then every activation row of the
// tile is dotted with it, as the K types are (dot_k_avx512.cpp).
// The decoded byte of an element with codebook value g in {-1, 0, 1} and delta +-1/8 is
//   u = 8 (g + 1) + (delta > 0 ? 2 : 0) = 8 (g + delta) + 9,  in [0, 18],
// so vpmaddubsw applies (u unsigned, the activation signed), and per 16 elements with scale ls
//   ls * sum u p - 9 ls * bsum = 8 ls * sum (g + delta) p,
// the Q8_K bsum removing the +9. Summed over the super-block this is the scalar reference's
// exact integer S (ref/vec_dot_iq1_ref.h, counted in eighths), scaled once in float by
// d_w / 8 * d_a. With VNNI, prompts take gemm_int8_levels_avx512.h's kernel on the same decode,
// with levels u - 9.
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/block_dot_install.h"
#include "kernels/x86/avx512/gemm_int8_levels_avx512.h"
#include "quant/blocks.h"
#include "quant/blocks_iq1.h"
#include "quant/iq1_grid.h"

namespace vela::kernels::avx512 {

namespace {

// A decoded super-block. Register r holds elements 64r .. 64r+63.
struct DecodedIq1 {
  __m512i u[4];         // u = 8 (g + delta) + 9 per element, in [0, 18]
  __m512i scales[4];    // int16 per vpmaddubsw output lane: ls of that lane's 16 elements
  __m256i ls;           // int16 per Q8_K bsum (16 elements each): ls
  __m256i bsum_scales;  // int16 per Q8_K bsum: -9 ls
  float d;              // d_w / 8 (exact: a power-of-two step)
};

// Lane i of the result = v[first + i / kGroup] for a vector v of int16 values: kGroup 16 spreads
// two IQ1_S sub-block scales over a register's halves, kGroup 8 four IQ1_M scales over its
// quarters.
template <int kGroup>
inline __m512i spread(__m512i v, int first) {
  static_assert(kGroup == 16 || kGroup == 8);
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                        16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(short(first)),
                                       _mm512_srli_epi16(lane, kGroup == 16 ? 4 : 3));
  return _mm512_permutexvar_epi16(idx, v);
}

// The codebook entries of 8 groups, in group order: index [8] int32, each < 2048. Plain loads
// rather than vpgatherdq: as fast here, and gathers are much slower on CPUs with the Gather Data
// Sampling mitigation.
inline __m512i load_entries(const uint32_t* index) {
  const auto entry_pair = [](uint32_t a, uint32_t b) {
    return _mm_insert_epi64(_mm_cvtsi64_si128(int64_t(kIq1Grid[a])), int64_t(kIq1Grid[b]), 1);
  };
  const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(entry_pair(index[0], index[1])),
                                             entry_pair(index[2], index[3]), 1);
  const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(entry_pair(index[4], index[5])),
                                             entry_pair(index[6], index[7]), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The four registers of u from the 32 groups' codebook indices (two vectors of 16 int32, groups
// 0-15 and 16-31, each < 2048) and delta signs (mask bit set = negative delta).
inline void decode_groups(__m512i index_lo, __m512i index_hi, __mmask16 neg_lo, __mmask16 neg_hi,
                          DecodedIq1* k) {
  alignas(64) uint32_t index[32];
  _mm512_store_si512(index, index_lo);
  _mm512_store_si512(index + 16, index_hi);
  const uint32_t positive = ~(uint32_t(neg_lo) | uint32_t(neg_hi) << 16);
  const __m512i one = _mm512_set1_epi8(1);
  const __m512i two = _mm512_set1_epi64(0x0202020202020202);
  for (int r = 0; r < 4; ++r) {
    // g + 1 is 0..2 per byte, so the 16-bit shift moves no bit across a byte, and adding 2 to a
    // 64-bit lane (one group) carries into no neighbouring byte.
    const __m512i u = _mm512_slli_epi16(_mm512_add_epi8(load_entries(index + 8 * r), one), 3);
    k->u[r] = _mm512_mask_add_epi64(u, __mmask8(positive >> (8 * r)), u, two);
  }
}

// The low 8 index bits of groups 0-15 and 16-31 as int32.
inline void load_index_bytes(const uint8_t* qs, __m512i* lo, __m512i* hi) {
  *lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  *hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
}

struct IQ1_SFormat {
  using Block = BlockIQ1_S;
  static void decode(const Block& w, DecodedIq1* k) {
    // qh[b] in the lane of each of sub-block b's 4 groups; group l's 3 high index bits are qh
    // bits 3l..3l+2, and bit 15 is the sub-block's delta sign.
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qh));
    const __m512i qh32 = _mm512_zextsi256_si512(_mm256_cvtepu16_epi32(qh));
    const __m512i sub_lo = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i sub_hi = _mm512_add_epi32(sub_lo, _mm512_set1_epi32(4));
    const __m512i qh_lo = _mm512_permutexvar_epi32(sub_lo, qh32);
    const __m512i qh_hi = _mm512_permutexvar_epi32(sub_hi, qh32);
    const __m512i shift = _mm512_set_epi32(9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0);
    const __m512i seven = _mm512_set1_epi32(7);
    __m512i idx_lo, idx_hi;
    load_index_bytes(w.qs, &idx_lo, &idx_hi);
    idx_lo = _mm512_or_si512(
        idx_lo, _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(qh_lo, shift), seven), 8));
    idx_hi = _mm512_or_si512(
        idx_hi, _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(qh_hi, shift), seven), 8));
    const __m512i sign = _mm512_set1_epi32(0x8000);
    decode_groups(idx_lo, idx_hi, _mm512_test_epi32_mask(qh_lo, sign),
                  _mm512_test_epi32_mask(qh_hi, sign), k);

    // ls = 2 s + 1 per sub-block (qh bits 12-14), 8 int16; sub-block b covers bsums 2b, 2b+1.
    const __m128i s = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
    const __m128i ls = _mm_add_epi16(_mm_add_epi16(s, s), _mm_set1_epi16(1));
    const __m512i v = _mm512_zextsi256_si512(_mm256_castsi128_si256(ls));
    for (int r = 0; r < 4; ++r) k->scales[r] = spread<16>(v, 2 * r);
    const __m256i pair = _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    k->ls = _mm256_permutexvar_epi16(pair, _mm256_castsi128_si256(ls));
    k->bsum_scales = _mm256_mullo_epi16(k->ls, _mm256_set1_epi16(-9));
    k->d = half_to_float(w.d) * kIq1Delta;
  }
};

struct IQ1_MFormat {
  using Block = BlockIQ1_M;
  static void decode(const Block& w, DecodedIq1* k) {
    // Group g's nibble is nibble g % 2 of qh[g / 2]: 3 high index bits, then the delta sign.
    const __m512i qh32 =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qh)));
    const __m512i half_lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i half_hi = _mm512_add_epi32(half_lo, _mm512_set1_epi32(8));
    const __m512i shift = _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0);
    const __m512i nib_lo = _mm512_srlv_epi32(_mm512_permutexvar_epi32(half_lo, qh32), shift);
    const __m512i nib_hi = _mm512_srlv_epi32(_mm512_permutexvar_epi32(half_hi, qh32), shift);
    const __m512i seven = _mm512_set1_epi32(7);
    __m512i idx_lo, idx_hi;
    load_index_bytes(w.qs, &idx_lo, &idx_hi);
    idx_lo = _mm512_or_si512(idx_lo, _mm512_slli_epi32(_mm512_and_si512(nib_lo, seven), 8));
    idx_hi = _mm512_or_si512(idx_hi, _mm512_slli_epi32(_mm512_and_si512(nib_hi, seven), 8));
    const __m512i sign = _mm512_set1_epi32(8);
    decode_groups(idx_lo, idx_hi, _mm512_test_epi32_mask(nib_lo, sign),
                  _mm512_test_epi32_mask(nib_hi, sign), k);

    // The 16 three-bit scales: scale k at bits 3 (k % 4) of word k / 4 (blocks_iq1.h).
    const uint64_t words = iq1_m_scale_words(w);
    const __m256i word_of = _mm256_set_epi16(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m256i bit_of = _mm256_set_epi16(9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0);
    const __m256i spread_words =
        _mm256_permutexvar_epi16(word_of, _mm256_set1_epi64x(static_cast<long long>(words)));
    const __m256i s =
        _mm256_and_si256(_mm256_srlv_epi16(spread_words, bit_of), _mm256_set1_epi16(7));
    const __m256i ls = _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1));
    const __m512i v = _mm512_zextsi256_si512(ls);
    for (int r = 0; r < 4; ++r) k->scales[r] = spread<8>(v, 4 * r);
    k->ls = ls;
    k->bsum_scales = _mm256_mullo_epi16(ls, _mm256_set1_epi16(-9));
    k->d = half_to_float(iq1m_scale_bits(w)) * kIq1Delta;
  }
};

// Per activation row: acc (16 lanes) += d_w / 8 * d_a * (the super-block's integer sum S).
// Ranges: vpmaddubsw pairs <= 2 * 18 * 128; times ls <= 15 and summed per lane over the block,
// and with the bsum term (|bsum| <= 16 * 128, 9 ls <= 135), every int32 lane stays below 2^21.
template <bool kVnni>
inline void row_step(const DecodedIq1& k, const BlockQ8_K& a, __m512& acc) {
  const auto* qs = reinterpret_cast<const __m512i*>(a.qs);
  __m512i isum =
      _mm512_madd_epi16(_mm512_maddubs_epi16(k.u[0], _mm512_loadu_si512(qs)), k.scales[0]);
  for (int r = 1; r < 4; ++r)
    isum = scaled_dot_u8s8<kVnni>(isum, k.u[r], _mm512_loadu_si512(qs + r), k.scales[r]);
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  isum = dot_i16<kVnni>(isum, _mm512_zextsi256_si512(bsums), _mm512_zextsi256_si512(k.bsum_scales));
  acc = row_super_block_step(acc, isum, k.d, a.d);
}

// out[r * out_stride] = dot(w, activation row r) for R rows starting at act.
// w: [nb] blocks of F::Block; act: R rows of [nb] BlockQ8_K, act_stride bytes apart.
template <class F, bool kVnni, int R>
void dot_tile(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
              float* out, int64_t out_stride) {
  const BlockQ8_K* a[R];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride);
    acc[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_weights<sizeof(typename F::Block)>(w + b);
    DecodedIq1 k;
    F::decode(w[b], &k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) row_step<kVnni>(k, a[r][b], acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = row_sum(acc[r]);
}

// dot_tile as a type for block_dot_install.h.
struct Tile {
  template <class F, bool kVnni, int R>
  static void run(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
                  float* out, int64_t out_stride) {
    dot_tile<F, kVnni, R>(nb, w, act, act_stride, out, out_stride);
  }
};

// F as gemm_int8_levels_avx512.h's format: levels 8 (g + delta) = u - 9, the scales ls.
template <class F, int kScaleElemsOfF>
struct Levels {
  using Block = typename F::Block;
  static constexpr float kFactor = 1.0f;
  static constexpr int kScaleElems = kScaleElemsOfF;
  static void levels(const Block& w, Int8Levels* out) {
    DecodedIq1 k;
    F::decode(w, &k);
    for (int c = 0; c < 4; ++c) out->v[c] = _mm512_sub_epi8(k.u[c], _mm512_set1_epi8(9));
    out->scale = _mm512_cvtepu16_epi32(k.ls);
    out->d = k.d;
  }
};

template <class F, int kScaleElems>
void install(TraitsTable& table, GgmlType type, bool vnni) {
  install_tiled<Tile, F, kQK_K>(table, type, vnni);
  table[static_cast<size_t>(type)].gemm_tile =
      vnni ? int8_levels_gemm_tile<Levels<F, kScaleElems>> : nullptr;
}

}  // namespace

void register_iq1_kernels(TraitsTable& table, Avx512Extensions ext) {
  install<IQ1_SFormat, 32>(table, GgmlType::IQ1_S, ext.vnni);  // a scale per 32 elements
  install<IQ1_MFormat, 16>(table, GgmlType::IQ1_M, ext.vnni);  // per 16
}

}  // namespace vela::kernels::avx512

// AVX-512 dot products of the 4-bit non-linear types: IQ4_NL and MXFP4 against Q8_0, IQ4_XS
// against Q8_K. A weight's 4-bit codes index a 16-entry int8 table: one vpshufb through the
// table of |level| (in every 128-bit lane) decodes 64 codes, and the level's sign follows from
// the code alone (a compare into a mask). Each decoded register (two 32-element blocks, or a
// quarter of an IQ4_XS super-block) is dotted with every activation row of the tile: the
// activation takes the level's sign, and vpdpbusd (or vpmaddubsw + vpmaddwd) forms the exact
// integer sums. IQ4_NL / MXFP4 scale each block's lanes by d_w * d_a into the row's float
// accumulators; IQ4_XS weights each sub-block's int16 pair sums by its integer scale (vpdpwssd)
// and scales the super-block's int32 lanes once, as the scalar reference does.
#include <algorithm>
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/block_dot_install.h"
#include "quant/blocks.h"
#include "quant/blocks_nonlinear4.h"

namespace vela::kernels::avx512 {

namespace {

// |level| of each code in every 128-bit lane, as vpshufb's table.
inline __m512i magnitude_table(const int8_t* levels) {
  return _mm512_abs_epi8(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels))));
}

// Codes arranged with each 128-bit lane pair (0-1, 2-3) holding the same 16 bytes -> the 64
// codes in element order: the low nibbles of lanes 0 and 2, the high nibbles of lanes 1 and 3.
inline __m512i lane_pair_nibbles(__m512i codes) {
  const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(codes, shifts), _mm512_set1_epi8(0x0F));
}

// The sign of a level follows from its code: IQ4's levels are negative for codes 0-7, MXFP4's
// (e2m1: bit 3 is the sign) for codes 9-15, code 8 being -0 (masking it too changes nothing).
struct IQ4Sign {
  static __mmask64 negative(__m512i nibbles) {
    return _mm512_cmplt_epu8_mask(nibbles, _mm512_set1_epi8(8));
  }
};
struct E2M1Sign {
  static __mmask64 negative(__m512i nibbles) {
    return _mm512_test_epi8_mask(nibbles, _mm512_set1_epi8(8));
  }
};

// --- IQ4_NL and MXFP4 against Q8_0: two 32-element blocks per register. ---

// One or two consecutive weight blocks, decoded: byte i of `u` multiplies byte i of the
// activation pair (block 0 in bytes 0-31, block 1 in bytes 32-63).
struct DecodedPair {
  __m512i u;      // |level|, 0..127
  __mmask64 neg;  // bytes whose level is negative
  __m512 d;       // weight scale: lanes 0-7 block 0, lanes 8-15 block 1 (0 when absent)
};

// The first min(64, blocks * kBytes) bytes at p (one block, or two consecutive ones), the rest
// zero; or, when kReadable64 (64 bytes from p are inside the row), the 64 bytes as they are: a
// masked load only where needed, as it is slow when its masked-off part crosses into a page
// missing from the TLB.
template <size_t kBytes, bool kTwo, bool kReadable64>
inline __m512i load_upto_64(const void* p) {
  constexpr size_t bytes = std::min<size_t>(64, (kTwo ? 2 : 1) * kBytes);
  if constexpr (bytes == 64 || kReadable64) {
    return _mm512_loadu_si512(p);
  } else {
    return _mm512_maskz_loadu_epi8((__mmask64(1) << bytes) - 1, p);
  }
}

// A vpermw index (16-bit lanes), built at compile time.
struct WordIndex {
  alignas(64) int16_t lane[32];
  __m512i get() const { return _mm512_load_si512(lane); }
};

// 128-bit lanes 0-1: the 8 words from word q0, lanes 2-3: the 8 words from word q1.
constexpr WordIndex code_index(int q0, int q1) {
  WordIndex idx{};
  for (int i = 0; i < 32; ++i) idx.lane[i] = int16_t((i < 16 ? q0 : q1) + i % 8);
  return idx;
}

// Lanes 0-7: word d0, lanes 8-15: word d1 (the low 256 bits, for vcvtph2ps).
constexpr WordIndex scale_index(int d0, int d1) {
  WordIndex idx{};
  for (int i = 0; i < 32; ++i) idx.lane[i] = int16_t(i < 8 ? d0 : d1);
  return idx;
}

// The pair's magnitudes and signs from its 64 codes in element order.
template <class Sign>
inline void set_levels(__m512i magnitudes, __m512i nibbles, DecodedPair* p) {
  p->u = _mm512_shuffle_epi8(magnitudes, nibbles);
  p->neg = Sign::negative(nibbles);
}

// IQ4_NL: 18-byte blocks, so both blocks' codes (words 1-8 and 10-17) and scales (words 0 and 9)
// are whole words of the pair's first 64 bytes: one load, then vpermw gathers them. A lone block
// loads as zeros past its end: its upper half's codes decode to a level, but the activation half
// it meets and its scale are zero, so it adds exactly 0.
struct IQ4_NLFormat {
  using Block = BlockIQ4_NL;
  static constexpr int kW = int(sizeof(Block) / 2);
  static constexpr WordIndex kCodes = code_index(int(offsetof(Block, qs) / 2), kW + 1);
  static constexpr WordIndex kScales = scale_index(0, kW);
  static const int8_t* levels() { return kIQ4Levels; }
  template <bool kTwo, bool kReadable64>
  static DecodedPair decode(__m512i magnitudes, const Block* w) {
    const __m512i raw = load_upto_64<sizeof(Block), kTwo, kReadable64>(w);
    DecodedPair p;
    set_levels<IQ4Sign>(magnitudes, lane_pair_nibbles(_mm512_permutexvar_epi16(kCodes.get(), raw)),
                        &p);
    p.d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(kScales.get(), raw)));
    return p;
  }
};

// MXFP4: 17-byte blocks put block 0's codes at an odd offset, so each block's 16 code bytes are
// loaded on their own; the scales come from the e8m0 table.
struct MXFP4Format {
  using Block = BlockMXFP4;
  static const int8_t* levels() { return kMXFP4Levels; }
  template <bool kTwo, bool /*kReadable64*/>
  static DecodedPair decode(__m512i magnitudes, const Block* w) {
    const auto load_codes = [](const Block& b) {
      return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
    };
    const __m256i c1 = kTwo ? load_codes(w[1]) : _mm256_setzero_si256();
    const __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(load_codes(w[0])), c1, 1);
    DecodedPair p;
    set_levels<E2M1Sign>(magnitudes, lane_pair_nibbles(codes), &p);
    const __m512 d0 = _mm512_set1_ps(kE8M0HalfScales[w[0].e]);
    p.d =
        _mm512_mask_blend_ps(__mmask16(0xFF00), d0,
                             kTwo ? _mm512_set1_ps(kE8M0HalfScales[w[1].e]) : _mm512_setzero_ps());
    return p;
  }
};

// The quants of one Q8_0 block (kTwo false: upper half zero) or of two consecutive ones.
template <bool kTwo>
inline __m512i load_act_quants(const BlockQ8_0* a) {
  const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs));
  if constexpr (!kTwo) return _mm512_zextsi256_si512(q0);
  const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs));
  return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
}

// The Q8_0 pair's scales (words 0 and 17 of its first 64 bytes; a pair has 68) as floats.
constexpr WordIndex kActScales = scale_index(0, int(sizeof(BlockQ8_0) / 2));

// acc + the pair's contribution for one activation row (a: the pair's first block).
// Activation quants are in [-127, 127] (from_float), so negating them cannot overflow.
// d_w * d_a is exact in f32 (two fp16 values, or a power of two and an fp16 value, away from
// the ends of f32's range), as in the scalar reference.
template <bool kVnni, bool kTwo>
inline __m512 pair_row_step(const DecodedPair& p, const BlockQ8_0* a, __m512 acc) {
  __m512i q = load_act_quants<kTwo>(a);
  q = _mm512_mask_sub_epi8(q, p.neg, _mm512_setzero_si512(), q);
  const __m512i sum = dot_u8s8<kVnni>(_mm512_setzero_si512(), p.u, q);
  const __m512i raw = load_upto_64<sizeof(BlockQ8_0), kTwo, false>(a);
  const __m512 da =
      _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(kActScales.get(), raw)));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(p.d, da), acc);
}

// Accumulator chains per activation row, to hide the FMA latency in the single-row case. The
// same for every tile size, so each row's sum is formed in the same order whatever tile it falls
// in: vec_dot_rows gives bit-identical results to vec_dot (batch invariance).
constexpr int kChains = 2;

// out[r * out_stride] = dot(w, activation row r) for R rows starting at act.
// w: [nb] blocks of F::Block; act: R rows of [nb] BlockQ8_0, act_stride bytes apart.
template <class F, bool kVnni, int R>
void pair_dot_tile(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
                   float* out, int64_t out_stride) {
  const __m512i magnitudes = magnitude_table(F::levels());
  const BlockQ8_0* a[R];
  __m512 acc[R][kChains];
  for (int r = 0; r < R; ++r) {
    a[r] = reinterpret_cast<const BlockQ8_0*>(act + size_t(r) * act_stride);
    for (int c = 0; c < kChains; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  // The main loop may read 64 bytes at each pair, so it stops where that would pass the row's
  // end; the pairs after it load only their own bytes.
  constexpr int64_t kReadableBlocks =
      (64 + sizeof(typename F::Block) - 1) / sizeof(typename F::Block);
  int64_t b = 0;
  for (; b + 2 * (kChains - 1) + kReadableBlocks <= nb; b += 2 * kChains) {
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      prefetch_weights<2 * sizeof(typename F::Block)>(w + b + 2 * c);
      const DecodedPair p = F::template decode<true, true>(magnitudes, w + b + 2 * c);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r][c] = pair_row_step<kVnni, true>(p, a[r] + b + 2 * c, acc[r][c]);
    }
  }
  for (; b + 2 <= nb; b += 2) {
    const DecodedPair p = F::template decode<true, false>(magnitudes, w + b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = pair_row_step<kVnni, true>(p, a[r] + b, acc[r][0]);
  }
  if (b < nb) {  // an odd block count leaves one block
    const DecodedPair p = F::template decode<false, false>(magnitudes, w + b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = pair_row_step<kVnni, false>(p, a[r] + b, acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 1; c < kChains; ++c) acc[r][0] = _mm512_add_ps(acc[r][0], acc[r][c]);
    out[r * out_stride] = hsum(acc[r][0]);
  }
}

// --- IQ4_XS against Q8_K: a super-block in four registers of 64 elements. ---

// A decoded super-block. Register g holds elements 64g .. 64g+63 (sub-blocks 2g and 2g+1).
struct DecodedXS {
  __m512i u[4];       // |level|, 0..127
  __mmask64 neg[4];   // bytes whose level is negative
  __m512i scales[4];  // int16 per maddubs output lane: its sub-block's scale - 32
  float d;            // fp16 super-scale as float
};

// The 8 sub-block scales minus 32 as int16: the low 4 bits from scales_l's nibbles, the top 2
// from scales_h's 2-bit fields, each moved into place by a per-lane shift.
inline __m128i xs_scales(const BlockIQ4_XS& w) {
  // Word j = scales_l byte j / 2 (vpshufb index 0x80 zeroes the high byte).
  const __m128i l = _mm_shuffle_epi8(
      _mm_cvtsi32_si128(load_i32(w.scales_l)),
      _mm_set_epi8(-128, 3, -128, 3, -128, 2, -128, 2, -128, 1, -128, 1, -128, 0, -128, 0));
  const __m128i low =
      _mm_and_si128(_mm_srlv_epi16(l, _mm_set_epi16(4, 0, 4, 0, 4, 0, 4, 0)), _mm_set1_epi16(0x0F));
  const __m128i h = _mm_set1_epi16(short(w.scales_h));
  const __m128i high =
      _mm_and_si128(_mm_srlv_epi16(h, _mm_set_epi16(14, 12, 10, 8, 6, 4, 2, 0)), _mm_set1_epi16(3));
  return _mm_sub_epi16(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi16(32));
}

inline void decode_xs(__m512i magnitudes, const BlockIQ4_XS& w, DecodedXS* x) {
  // 64 code bytes hold sub-blocks 0-3 (then 4-7), 16 bytes each; register g takes sub-block
  // 2g's bytes into lanes 0-1 and 2g+1's into lanes 2-3.
  for (int half = 0; half < 2; ++half) {
    const __m512i codes = _mm512_loadu_si512(w.qs + 64 * half);
    const __m512i spread[2] = {_mm512_shuffle_i32x4(codes, codes, _MM_SHUFFLE(1, 1, 0, 0)),
                               _mm512_shuffle_i32x4(codes, codes, _MM_SHUFFLE(3, 3, 2, 2))};
    for (int i = 0; i < 2; ++i) {
      const __m512i nibbles = lane_pair_nibbles(spread[i]);
      x->u[2 * half + i] = _mm512_shuffle_epi8(magnitudes, nibbles);
      x->neg[2 * half + i] = IQ4Sign::negative(nibbles);
    }
  }
  // Register g's int16 lanes 0-15 take scale 2g, lanes 16-31 scale 2g+1.
  const __m512i sc = _mm512_castsi128_si512(xs_scales(w));
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                        16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i sub = _mm512_srli_epi16(lane, 4);  // 0 for lanes 0-15, 1 for 16-31
  for (int g = 0; g < 4; ++g)
    x->scales[g] =
        _mm512_permutexvar_epi16(_mm512_add_epi16(sub, _mm512_set1_epi16(short(2 * g))), sc);
  x->d = half_to_float(w.d);
}

// acc + d_w d_a * (the super-block's integer sum) for one activation row.
// Ranges: vpmaddubsw pairs <= 2 * 127 * 127, times |scale| <= 32, over 4 registers: < 2^23.
template <bool kVnni>
inline __m512 xs_row_step(const DecodedXS& x, const BlockQ8_K& a, __m512 acc) {
  __m512i isum = _mm512_setzero_si512();
  for (int g = 0; g < 4; ++g) {
    __m512i q = _mm512_loadu_si512(a.qs + 64 * g);
    q = _mm512_mask_sub_epi8(q, x.neg[g], _mm512_setzero_si512(), q);
    isum = scaled_dot_u8s8<kVnni>(isum, x.u[g], q, x.scales[g]);
  }
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(x.d * a.d), acc);
}

// out[r * out_stride] = dot(w, activation row r) for R rows starting at act.
// w: [nb] super-blocks; act: R rows of [nb] BlockQ8_K, act_stride bytes apart.
template <bool kVnni, int R>
void xs_dot_tile(int64_t nb, const BlockIQ4_XS* w, const uint8_t* act, size_t act_stride,
                 float* out, int64_t out_stride) {
  const __m512i magnitudes = magnitude_table(kIQ4Levels);
  const BlockQ8_K* a[R];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride);
    acc[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_weights<sizeof(BlockIQ4_XS)>(w + b);
    DecodedXS x;
    decode_xs(magnitudes, w[b], &x);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = xs_row_step<kVnni>(x, a[r][b], acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(acc[r]);
}

// The tiles as types for block_dot_install.h.
struct PairTile {
  template <class F, bool kVnni, int R>
  static void run(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
                  float* out, int64_t out_stride) {
    pair_dot_tile<F, kVnni, R>(nb, w, act, act_stride, out, out_stride);
  }
};

struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
};

struct XSTile {
  template <class F, bool kVnni, int R>
  static void run(int64_t nb, const BlockIQ4_XS* w, const uint8_t* act, size_t act_stride,
                  float* out, int64_t out_stride) {
    xs_dot_tile<kVnni, R>(nb, w, act, act_stride, out, out_stride);
  }
};

}  // namespace

void register_nonlinear4_kernels(TraitsTable& table, Avx512Extensions ext) {
  install_tiled<PairTile, IQ4_NLFormat, kQK4_NL>(table, GgmlType::IQ4_NL, ext.vnni);
  install_tiled<PairTile, MXFP4Format, kQKMXFP4>(table, GgmlType::MXFP4, ext.vnni);
  install_tiled<XSTile, IQ4_XSFormat, kQK4_XS>(table, GgmlType::IQ4_XS, ext.vnni);
}

}  // namespace vela::kernels::avx512

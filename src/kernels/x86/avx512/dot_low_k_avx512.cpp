// AVX-512 dot products of the 2- and 3-bit K super-blocks (Q2_K, Q3_K) and the ternary ones
// (TQ1_0, TQ2_0) with Q8_K activations. Each 256-element super-block is decoded once into four
// registers of unsigned levels (64 elements each, in element order, so every activation register
// is one contiguous load) plus, for Q2_K and Q3_K, int16 vectors of the sub-block scales. Per
// activation row, vpmaddubsw + vpdpwssd (or vpmaddwd + add) weight the level x quant pair sums by
// the scales; the ternary types, having none, take vpdpbusd (or vpmaddubsw + vpmaddwd). The whole
// super-block's integer sum stays exact in int32 lanes and is scaled once in float, as the
// scalar reference does. The levels' offsets (Q2_K's mins, Q3_K's -4, the ternary -1) come from
// the activation's bsums. With VNNI, prompts of the ternary types take gemm_int8_levels_avx512.h's
// kernel on the same decode (levels q - 1, one scale), their rows summed as its kernels do.
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/block_dot_install.h"
#include "kernels/x86/avx512/gemm_int8_levels_avx512.h"
#include "quant/blocks_low_k.h"

namespace vela::kernels::avx512 {

namespace {

// A decoded super-block. Register g holds elements 64g .. 64g+63.
struct DecodedLowK {
  __m512i q[4];         // unsigned levels (Q2_K 0..3, Q3_K 0..7, TQ1_0 0..2, TQ2_0 0..3)
  __m512i scales[4];    // Q2_K, Q3_K: int16 per maddubs output lane, its sub-block's scale
  __m256i bsum_scales;  // int16 per Q8_K bsum: Q2_K min, Q3_K -4 * scale, ternary -1
  float d;              // fp16 super-scale as float
  float dmin;           // Q2_K: fp16 super-scale of the mins
};

// How a format's decoded levels meet the activations.
enum class Kind {
  kAffine,   // scaled sub-blocks, minus dmin-scaled mins (Q2_K)
  kScaled,   // scaled sub-blocks with an offset folded into the integer sum (Q3_K)
  kTernary,  // no sub-block scales, an offset folded into the integer sum (TQ1_0, TQ2_0)
};

// A register whose 16-bit lanes in 128-bit lane i all hold v_i.
inline __m512i per_lane_i16(int v0, int v1, int v2, int v3) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(short(v1)),
                                                                    _mm_set1_epi16(short(v0)))),
                            _mm256_set_m128i(_mm_set1_epi16(short(v3)), _mm_set1_epi16(short(v2))),
                            1);
}

// Lane i of the result = v[first + i / 8] for a vector v of int16 values: spreads four 16-element
// sub-blocks' scales over the 8-lane quarters of one register's maddubs output.
inline __m512i spread_quarters(__m512i v, int first) {
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                        16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(short(first)), _mm512_srli_epi16(lane, 3));
  return _mm512_permutexvar_epi16(idx, v);
}

// k->scales from the 16 sub-block scales as int16: register g's 128-bit lane i (8 maddubs
// outputs, 16 elements) belongs to sub-block 4 g + i.
inline void set_scales(__m256i scales16, DecodedLowK* k) {
  const __m512i v = _mm512_zextsi256_si512(scales16);
  for (int g = 0; g < 4; ++g) k->scales[g] = spread_quarters(v, 4 * g);
}

// The 2-bit fields of qs (order: quant/blocks_low_k.h) as register g: half g / 2 of qs, bit
// pairs 2 (g % 2) (low 256 bits) and 2 (g % 2) + 1 (high 256 bits).
inline __m512i two_bit_levels(const uint8_t* qs, int g) {
  const __m512i half = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (g / 2))));
  const int64_t lo = 4 * (g % 2), hi = lo + 2;
  const __m512i shifts = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
  return _mm512_and_si512(_mm512_srlv_epi64(half, shifts), _mm512_set1_epi8(3));
}

struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr Kind kKind = Kind::kAffine;
  static void decode(const Block& w, DecodedLowK* k) {
    for (int g = 0; g < 4; ++g) k->q[g] = two_bit_levels(w.qs, g);
    // Byte j: sub-block j's scale (low nibble) and min (high nibble).
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    set_scales(_mm256_cvtepu8_epi16(_mm_and_si128(packed, low4)), k);
    k->bsum_scales = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
    k->d = half_to_float(w.d);
    k->dmin = half_to_float(w.dmin);
  }
};

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

struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr Kind kKind = Kind::kScaled;
  static void decode(const Block& w, DecodedLowK* k) {
    // Stored level u = q + 4 in [0, 7]: the 2-bit field plus 4 where the hmask bit is set. hmask
    // byte l, bit r is the third bit of element 32 r + l, so register g takes bit 2g in its low
    // 256 bits and bit 2g + 1 in its high ones.
    const __m512i hmask =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.hmask)));
    const __m512i four = _mm512_set1_epi8(4);
    for (int g = 0; g < 4; ++g) {
      const __m512i select = _mm512_mask_set1_epi8(_mm512_set1_epi8(char(1 << (2 * g))),
                                                   0xFFFFFFFF00000000ull, char(1 << (2 * g + 1)));
      const __m512i low = two_bit_levels(w.qs, g);
      k->q[g] = _mm512_mask_add_epi8(low, _mm512_test_epi8_mask(hmask, select), low, four);
    }
    const __m256i sc = _mm256_cvtepi8_epi16(unpack_q3_k_scales(w.scales));
    set_scales(sc, k);
    // sum s (u - 4) p = sum s u p - 4 sum s bsum.
    k->bsum_scales = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 2));
    k->d = half_to_float(w.d);
    k->dmin = 0.0f;
  }
};

struct TQ2_0Format {
  using Block = BlockTQ2_0;
  static constexpr Kind kKind = Kind::kTernary;
  static void decode(const Block& w, DecodedLowK* k) {
    for (int g = 0; g < 4; ++g) k->q[g] = two_bit_levels(w.qs, g);
    k->bsum_scales = _mm256_set1_epi16(-1);  // weight = level - 1
    k->d = half_to_float(w.d);
    k->dmin = 0.0f;
  }
};

// Per byte b of v: floor(3 (b * m mod 256) / 256), the trit that multiplying by m = 3^n brings to
// the top (quant/blocks_low_k.h), where m gives each 16-bit lane's multiplier (< 256) for both
// of its bytes. The even and odd bytes go through separate 16-bit multiplies: the low byte of
// each product is b * m mod 256 (the high byte, garbage, meets a 0 weight in vpmaddubsw, which
// then forms 3 * that), and its high byte is the trit.
inline __m512i ternary_digits(__m512i v, __m512i m) {
  const __m512i times3_low = _mm512_set1_epi16(3);  // bytes (3, 0): 3 * low byte of each lane
  const __m512i even = _mm512_maddubs_epi16(_mm512_mullo_epi16(v, m), times3_low);
  const __m512i odd =
      _mm512_maddubs_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(v, 8), m), times3_low);
  // ternlog 0xF8: a | (b & c): the even trit in the low byte, the odd one in the high byte.
  return _mm512_ternarylogic_epi32(_mm512_srli_epi16(even, 8), odd,
                                   _mm512_set1_epi16(short(0xFF00)), 0xF8);
}

struct TQ1_0Format {
  using Block = BlockTQ1_0;
  static constexpr Kind kKind = Kind::kTernary;
  // Elements (quant/blocks_low_k.h): A = qs[0..31] gives 0..159 (trit n at 32 n), y =
  // qs[32..47] gives 160..239 (trit n at 160 + 16 n), qh[j] trit n is element 240 + 4 n + j. So
  // the registers are the trits that 3^n brings to the top of [A | A] (n = 0 | 1), [A | A]
  // (2 | 3), [A | y | y] (4 | 0 | 1) and [y | y | y | qh x 4] (2 | 3 | 4 | 0, 1, 2, 3 by 4 bytes).
  static void decode(const Block& w, DecodedLowK* k) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 32));
    const __m512i aa = _mm512_broadcast_i64x4(a);
    const __m512i a_yy = _mm512_inserti64x4(aa, _mm256_broadcastsi128_si256(y), 1);
    // y in 128-bit lanes 0-2, the 4 qh bytes repeated in lane 3.
    const __m512i yyy_h =
        _mm512_inserti32x4(_mm512_broadcast_i32x4(y), _mm_set1_epi32(load_i32(w.qh)), 3);
    // Lane 3's multipliers go by 4-byte group: 1, 3, 9, 27 (two 16-bit lanes each).
    const __m512i tail_mul =
        _mm512_inserti32x4(per_lane_i16(9, 27, 81, 1), _mm_set_epi16(27, 27, 9, 9, 3, 3, 1, 1), 3);
    k->q[0] = ternary_digits(aa, per_lane_i16(1, 1, 3, 3));
    k->q[1] = ternary_digits(aa, per_lane_i16(9, 9, 27, 27));
    k->q[2] = ternary_digits(a_yy, per_lane_i16(81, 81, 1, 3));
    k->q[3] = ternary_digits(yyy_h, tail_mul);
    k->bsum_scales = _mm256_set1_epi16(-1);  // weight = trit - 1
    k->d = half_to_float(w.d);
    k->dmin = 0.0f;
  }
};

// Per activation row: acc (16 lanes) gets d * d_a * (integer super-block sum); for Q2_K acc_min
// (8 lanes) gets dmin * d_a * sum of min * bsum, subtracted at the end.
template <class F, bool kVnni>
inline void row_step(const DecodedLowK& k, const BlockQ8_K& a, __m512& acc, __m256& acc_min) {
  const auto* qs = reinterpret_cast<const __m512i*>(a.qs);
  __m512i isum;
  if constexpr (F::kKind == Kind::kTernary) {
    isum = dot_u8s8<kVnni>(_mm512_setzero_si512(), k.q[0], _mm512_loadu_si512(qs));
    for (int g = 1; g < 4; ++g) isum = dot_u8s8<kVnni>(isum, k.q[g], _mm512_loadu_si512(qs + g));
  } else {
    isum = _mm512_madd_epi16(_mm512_maddubs_epi16(k.q[0], _mm512_loadu_si512(qs)), k.scales[0]);
    for (int g = 1; g < 4; ++g)
      isum = scaled_dot_u8s8<kVnni>(isum, k.q[g], _mm512_loadu_si512(qs + g), k.scales[g]);
  }
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const float da = a.d;
  if constexpr (F::kKind == Kind::kAffine) {
    const __m256i mins = _mm256_madd_epi16(bsums, k.bsum_scales);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(k.dmin * da), acc_min);
  } else {
    isum =
        dot_i16<kVnni>(isum, _mm512_zextsi256_si512(bsums), _mm512_zextsi256_si512(k.bsum_scales));
  }
  if constexpr (F::kKind == Kind::kTernary)
    acc = row_super_block_step(acc, isum, k.d, da);
  else
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(k.d * da), acc);
}

// out[r * out_stride] = dot(w, activation row r) for R rows starting at act.
// w: [nb] super-blocks of F::Block; act: R rows of [nb] BlockQ8_K, act_stride bytes apart.
template <class F, bool kVnni, int R>
void dot_tile(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
              float* out, int64_t out_stride) {
  const BlockQ8_K* a[R];
  __m512 acc[R];
  __m256 acc_min[R];
  for (int r = 0; r < R; ++r) {
    a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride);
    acc[r] = _mm512_setzero_ps();
    acc_min[r] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_weights<sizeof(typename F::Block)>(w + b);
    DecodedLowK k;
    F::decode(w[b], &k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) row_step<F, kVnni>(k, a[r][b], acc[r], acc_min[r]);
  }
  for (int r = 0; r < R; ++r) {
    if constexpr (F::kKind == Kind::kTernary) {
      out[r * out_stride] = row_sum(acc[r]);
      continue;
    }
    float sum = hsum(acc[r]);
    if constexpr (F::kKind == Kind::kAffine) sum -= hsum(acc_min[r]);
    out[r * out_stride] = sum;
  }
}

// dot_tile as a type for block_dot_install.h.
struct Tile {
  template <class F, bool kVnni, int R>
  static void run(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
                  float* out, int64_t out_stride) {
    dot_tile<F, kVnni, R>(nb, w, act, act_stride, out, out_stride);
  }
};

// A ternary F as gemm_int8_levels_avx512.h's format: levels q - 1, one scale for the super-block.
template <class F>
struct TernaryLevels {
  using Block = typename F::Block;
  static constexpr float kFactor = 1.0f;
  static constexpr int kScaleElems = kQK_K;
  static void levels(const Block& w, Int8Levels* out) {
    DecodedLowK k;
    F::decode(w, &k);
    for (int c = 0; c < 4; ++c) out->v[c] = _mm512_sub_epi8(k.q[c], _mm512_set1_epi8(1));
    out->scale = _mm512_set1_epi32(1);
    out->d = k.d;
  }
};

template <class F>
void install(TraitsTable& table, GgmlType type, bool vnni) {
  install_tiled<Tile, F, kQK_K>(table, type, vnni);
  if constexpr (F::kKind == Kind::kTernary)
    table[static_cast<size_t>(type)].gemm_tile =
        vnni ? int8_levels_gemm_tile<TernaryLevels<F>> : nullptr;
}

}  // namespace

void register_low_k_kernels(TraitsTable& table, Avx512Extensions ext) {
  install<Q2_KFormat>(table, GgmlType::Q2_K, ext.vnni);
  install<Q3_KFormat>(table, GgmlType::Q3_K, ext.vnni);
  install<TQ1_0Format>(table, GgmlType::TQ1_0, ext.vnni);
  install<TQ2_0Format>(table, GgmlType::TQ2_0, ext.vnni);
}

}  // namespace vela::kernels::avx512

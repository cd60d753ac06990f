// AVX-512 dot products of the K super-block types (Q4_K, Q5_K, Q6_K) with Q8_K activations.
// Each 256-element super-block is decoded once into four registers of unsigned levels (64
// elements each, in element order, so every activation register is one contiguous load) plus
// int16 scale vectors. Per activation row, vpmaddubsw gives int16 pair sums and vpdpwssd (or
// vpmaddwd + add) weights them by the sub-block scales: the whole super-block's integer sum
// stays exact in int32 lanes and is scaled once in float, as the scalar reference does. The
// affine mins (Q4_K, Q5_K) and Q6_K's -32 offset come from the activation's bsums.
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/block_dot_install.h"
#include "quant/blocks.h"

namespace vela::kernels::avx512 {

namespace {

// A decoded super-block. Register g holds elements 64g .. 64g+63.
struct DecodedK {
  __m512i q[4];         // unsigned levels (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63)
  __m512i scales[4];    // int16 per maddubs output lane: the scale of that lane's sub-block
  __m256i bsum_scales;  // int16 per Q8_K bsum (16 elements each): Q4_K/Q5_K min, Q6_K -32*scale
  float d;              // fp16 super-scale as float
  float dmin;           // Q4_K/Q5_K: fp16 super-scale of the mins
};

// Lane i of the result = v[first + i / kGroup] for a vector v of int16 values: kGroup = 16 spreads
// two Q4_K/Q5_K sub-block scales over a register's two halves; kGroup = 8 spreads four Q6_K
// scales over its quarters.
template <int kGroup>
inline __m512i spread(__m512i v, int first) {
  static_assert(kGroup == 16 || kGroup == 8);
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                        16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(short(first)),
                                       _mm512_srli_epi16(lane, kGroup == 16 ? 4 : 3));
  return _mm512_permutexvar_epi16(idx, v);
}

// Q4_K / Q5_K: the 12 packed bytes as 8 six-bit scales (low 8 bytes) and 8 mins (high 8 bytes),
// the same unpacking as k_scale_min() done four sub-blocks at a time in 32-bit words.
inline __m128i unpack_scales_mins(const uint8_t* packed) {
  const uint32_t a = uint32_t(load_i32(packed));      // scale (low 6 bits) of sub-blocks 0-3
  const uint32_t b = uint32_t(load_i32(packed + 4));  // min (low 6 bits) of sub-blocks 0-3
  const uint32_t c = uint32_t(load_i32(packed + 8));  // low 4 bits of 4-7: scale | min << 4
  const uint32_t sc_lo = a & 0x3F3F3F3Fu;
  const uint32_t mn_lo = b & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
  return _mm_set_epi32(int(mn_hi), int(mn_lo), int(sc_hi), int(sc_lo));
}

// Q4_K / Q5_K scale vectors from the unpacked scales and mins.
inline void set_affine_scales(const uint8_t* packed, DecodedK* k) {
  const __m256i sm = _mm256_cvtepu8_epi16(unpack_scales_mins(packed));  // 8 scales, 8 mins
  const __m512i v = _mm512_zextsi256_si512(sm);
  for (int g = 0; g < 4; ++g) k->scales[g] = spread<16>(v, 2 * g);
  // bsum i covers elements 16i .. 16i+15, in sub-block i / 2.
  const __m256i idx = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  k->bsum_scales = _mm256_permutexvar_epi16(idx, sm);
}

// Q4_K / Q5_K low 4 bits: qs group g (32 bytes) holds sub-block 2g in its low nibbles and 2g+1
// in its high nibbles, which become the lower and upper halves of register g.
inline __m512i load_k_nibbles(const uint8_t* qs32) {
  const __m512i raw =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs32)));
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(raw, shifts), _mm512_set1_epi8(0x0F));
}

struct Q4_KFormat {
  using Block = BlockQ4_K;
  static constexpr bool kAffine = true;
  static void decode(const Block& w, DecodedK* k) {
    for (int g = 0; g < 4; ++g) k->q[g] = load_k_nibbles(w.qs + 32 * g);
    set_affine_scales(w.scales, k);
    k->d = half_to_float(w.d);
    k->dmin = half_to_float(w.dmin);
  }
};

struct Q5_KFormat {
  using Block = BlockQ5_K;
  static constexpr bool kAffine = true;
  static void decode(const Block& w, DecodedK* k) {
    // qh byte l, bit j: 5th bit of element 32j + l, i.e. of sub-block j at position l.
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh)));
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    for (int g = 0; g < 4; ++g) {
      const __m512i select = _mm512_mask_set1_epi8(_mm512_set1_epi8(char(1 << (2 * g))),
                                                   0xFFFFFFFF00000000ull, char(1 << (2 * g + 1)));
      const __m512i q = load_k_nibbles(w.qs + 32 * g);
      k->q[g] = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, select), q, bit4);
    }
    set_affine_scales(w.scales, k);
    k->d = half_to_float(w.d);
    k->dmin = half_to_float(w.dmin);
  }
};

struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr bool kAffine = false;
  static void decode(const Block& w, DecodedK* k) {
    // Half h (128 elements): quarter k' takes its low 4 bits from ql[64h + 32(k' & 1) + l]
    // (low nibble for k' < 2) and its top 2 bits from bits 2k'..2k'+1 of qh[32h + l]. Register
    // 2h holds quarters 0 and 1, register 2h+1 quarters 2 and 3: the low nibbles of the 64 ql
    // bytes, then their high nibbles, each with qh shifted so the needed bits land at 4..5.
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    const __m512i shl01 = _mm512_mask_set1_epi16(_mm512_set1_epi16(4), 0xFFFF0000, 2);
    const __m512i shr23 = _mm512_mask_set1_epi16(_mm512_setzero_si512(), 0xFFFF0000, 2);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(w.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * h)));
      // ternlog 0xF8: a | (b & c)
      k->q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, low4),
                                              _mm512_sllv_epi16(qh, shl01), bits45, 0xF8);
      k->q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                                  _mm512_srlv_epi16(qh, shr23), bits45, 0xF8);
    }
    // 16 signed scales, one per 16 elements: register g covers scales 4g .. 4g+3.
    const __m256i sc =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
    const __m512i v = _mm512_zextsi256_si512(sc);
    for (int g = 0; g < 4; ++g) k->scales[g] = spread<8>(v, 4 * g);
    // Levels are stored +32: sum sc (q - 32) a = sum sc q a - 32 sum sc bsum.
    k->bsum_scales = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 5));
    k->d = half_to_float(w.d);
    k->dmin = 0.0f;
  }
};

// Per activation row: acc (16 lanes) gets d * d_a * (integer super-block sum); for the affine
// types acc_min (8 lanes) gets dmin * d_a * sum of min * bsum, subtracted at the end.
template <class F, bool kVnni>
inline void row_step(const DecodedK& k, const BlockQ8_K& a, __m512& acc, __m256& acc_min) {
  const auto* qs = reinterpret_cast<const __m512i*>(a.qs);
  __m512i isum =
      _mm512_madd_epi16(_mm512_maddubs_epi16(k.q[0], _mm512_loadu_si512(qs)), k.scales[0]);
  for (int g = 1; g < 4; ++g)
    isum = scaled_dot_u8s8<kVnni>(isum, k.q[g], _mm512_loadu_si512(qs + g), k.scales[g]);
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const float da = a.d;
  if constexpr (F::kAffine) {
    const __m256i mins = _mm256_madd_epi16(bsums, k.bsum_scales);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(k.dmin * da), acc_min);
  } else {
    isum =
        dot_i16<kVnni>(isum, _mm512_zextsi256_si512(bsums), _mm512_zextsi256_si512(k.bsum_scales));
  }
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
    DecodedK k;
    F::decode(w[b], &k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) row_step<F, kVnni>(k, a[r][b], acc[r], acc_min[r]);
  }
  for (int r = 0; r < R; ++r) {
    float sum = hsum(acc[r]);
    if constexpr (F::kAffine) sum -= hsum(acc_min[r]);
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

template <class F>
void install(TraitsTable& table, GgmlType type, bool vnni) {
  install_tiled<Tile, F, kQK_K>(table, type, vnni);
}

}  // namespace

void register_k_kernels(TraitsTable& table, Avx512Extensions ext) {
  install<Q4_KFormat>(table, GgmlType::Q4_K, ext.vnni);
  install<Q5_KFormat>(table, GgmlType::Q5_K, ext.vnni);
  install<Q6_KFormat>(table, GgmlType::Q6_K, ext.vnni);
}

}  // namespace vela::kernels::avx512

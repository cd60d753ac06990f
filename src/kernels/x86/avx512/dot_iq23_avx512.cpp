// AVX-512 dot products of the E8-lattice codebook types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// with Q8_K activations. Each 256-element super-block is decoded once into four registers of
// unsigned magnitudes (64 elements each, in element order: codebook entries fetched by scalar
// loads and assembled, which beats vpgather on the CPUs we target), four 64-bit masks of the
// negative elements and four int16 scale vectors. Per activation row, a masked subtract from 0
// moves the signs onto the activation quants, vpmaddubsw multiplies them by the magnitudes and
// vpdpwssd (or vpmaddwd + add) weights the int16 pair sums by the scales: the super-block's
// integer sum stays exact in int32 lanes (as in the scalar reference), is added up and scaled
// once in float by d_w * d_a; the row's sum is finally scaled by the format's constant (1/8, 1/4
// or 1). With VNNI, prompts take gemm_int8_levels_avx512.h's kernel on the same decode.
#include <cstddef>
#include <cstring>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/block_dot_install.h"
#include "kernels/x86/avx512/gemm_int8_levels_avx512.h"
#include "quant/blocks.h"
#include "quant/blocks_iq23.h"
#include "quant/iq23_grids.h"

namespace vela::kernels::avx512 {

namespace {

// A decoded super-block. Register c holds elements 64c .. 64c+63 (sub-blocks 2c and 2c+1).
struct DecodedIq {
  __m512i mag[4];      // unsigned magnitudes (codebook bytes)
  __mmask64 neg[4];    // bit i set: element 64c + i is negative
  __m512i scales[4];   // int16 per vpmaddubsw output lane: the ls of that lane's 16 elements
  __m256i sub_scales;  // int16 ls of elements 16j .. 16j + 15 in lane j
  float d;             // fp16 super-scale as float
};

inline __m256i loadu256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 64 magnitudes from eight 8-byte codebook entries (IQ2 types), in element order.
inline __m512i grid8_x8(const uint64_t* g, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3,
                        uint32_t i4, uint32_t i5, uint32_t i6, uint32_t i7) {
  return _mm512_set_epi64(int64_t(g[i7]), int64_t(g[i6]), int64_t(g[i5]), int64_t(g[i4]),
                          int64_t(g[i3]), int64_t(g[i2]), int64_t(g[i1]), int64_t(g[i0]));
}

// 64 magnitudes from sixteen 4-byte codebook entries (IQ3 types); idx: [16] indices in element
// order.
template <class Index>
inline __m512i grid4_x16(const uint32_t* g, const Index* idx) {
  const __m256i lo =
      _mm256_set_epi32(int(g[idx[7]]), int(g[idx[6]]), int(g[idx[5]]), int(g[idx[4]]),
                       int(g[idx[3]]), int(g[idx[2]]), int(g[idx[1]]), int(g[idx[0]]));
  const __m256i hi =
      _mm256_set_epi32(int(g[idx[15]]), int(g[idx[14]]), int(g[idx[13]]), int(g[idx[12]]),
                       int(g[idx[11]]), int(g[idx[10]]), int(g[idx[9]]), int(g[idx[8]]));
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

// Per 32-bit lane holding four 7-bit stored sign fields at bits 0-27 (IQ2_XXS, IQ3_XXS): the
// four sign bytes, each its field plus the parity bit 7 (kIqSigns, computed).
inline __m256i sign_bytes_from_fields(__m256i w) {
  // Fields 2-3 up by 2 bits to start at bit 16, then fields 1 and 3 up by 1 to start a byte.
  const __m256i y =
      _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi32(0x3FFF)),
                      _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x0FFFC000)), 2));
  const __m256i z =
      _mm256_or_si256(_mm256_and_si256(y, _mm256_set1_epi32(0x007F007F)),
                      _mm256_slli_epi32(_mm256_and_si256(y, _mm256_set1_epi32(0x3F803F80)), 1));
  // Bit 0 of each byte folds to the parity of its 7 bits; the bits that 32-bit shifts bring in
  // from the next byte only reach bits 4-7, which the folds into bit 0 never read.
  __m256i p = _mm256_xor_si256(z, _mm256_srli_epi32(z, 4));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
  return _mm256_or_si256(z, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi8(1)), 7));
}

// The 32 sign bytes of a super-block (bit i of byte g: element 8g + i negative) as the four
// 64-bit masks of its registers.
inline void set_sign_masks(__m256i sign_bytes, DecodedIq* k) {
  alignas(32) uint64_t words[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(words), sign_bytes);
  for (int c = 0; c < 4; ++c) k->neg[c] = words[c];
}

inline void load_sign_masks(const uint8_t* signs, DecodedIq* k) {
  set_sign_masks(loadu256(signs), k);
}

// Per 32-bit lane holding a 4-bit scale s: ls = 2 s + 1 in both of its int16 halves, i.e. the
// 16 int16 [ls0 ls0 ls1 ls1 ...] that set_scales takes.
inline __m256i odd_scales_i16(__m256i s) {
  const __m256i ls = _mm256_or_si256(_mm256_add_epi32(s, s), _mm256_set1_epi32(1));
  return _mm256_or_si256(ls, _mm256_slli_epi32(ls, 16));
}

// IQ2_XS / IQ2_S scales (two 4-bit scales per sub-block, for its elements 0-15 and 16-31):
// int16 [lo0 hi0 lo1 hi1 ...] for set_scales.
inline __m256i half_scales_i16(const uint8_t* scales) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i s =
      _mm_unpacklo_epi8(_mm_and_si128(x, nibble), _mm_and_si128(_mm_srli_epi16(x, 4), nibble));
  return _mm256_cvtepu8_epi16(_mm_or_si128(_mm_add_epi8(s, s), _mm_set1_epi8(1)));
}

// half_scales: 16 int16, ls of elements 16j .. 16j+15 in lane j. Register c's vpmaddubsw lane m
// covers elements 64c + 2m, 2m+1, so it takes half_scales[4c + m / 8].
inline void set_scales(__m256i half_scales, DecodedIq* k) {
  k->sub_scales = half_scales;
  const __m512i v = _mm512_zextsi256_si512(half_scales);
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                        16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i eighth = _mm512_srli_epi16(lane, 3);
  for (int c = 0; c < 4; ++c) {
    k->scales[c] =
        _mm512_permutexvar_epi16(_mm512_add_epi16(eighth, _mm512_set1_epi16(short(4 * c))), v);
  }
}

// The second uint32 of each of the 8 chunks of 8 bytes at p (IQ2_XXS's sign fields and scale),
// in order.
inline __m256i odd_words(const uint8_t* p) {
  const __m256 c0 = _mm256_castsi256_ps(loadu256(p));
  const __m256 c1 = _mm256_castsi256_ps(loadu256(p + 32));
  // vshufps picks [0 1 4 5 | 2 3 6 7]; vpermq restores the order.
  return _mm256_permute4x64_epi64(
      _mm256_castps_si256(_mm256_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1))),
      _MM_SHUFFLE(3, 1, 2, 0));
}

// IQ2_XXS: per sub-block 4 index bytes, then a uint32 of 4 sign fields and the scale.
struct Iq2XxsFormat {
  using Block = BlockIQ2_XXS;
  static constexpr float kFactor = 0.125f;
  static constexpr int kScaleElems = 32;  // elements per scale
  static void decode(const Block& w, DecodedIq* k) {
    const __m256i aux = odd_words(w.qs);
    set_sign_masks(sign_bytes_from_fields(aux), k);
    set_scales(odd_scales_i16(_mm256_srli_epi32(aux, 28)), k);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = w.qs + 16 * c;  // sub-blocks 2c (bytes 0-3) and 2c+1 (bytes 8-11)
      k->mag[c] = grid8_x8(kIq2XxsGrid, q[0], q[1], q[2], q[3], q[8], q[9], q[10], q[11]);
    }
    k->d = half_to_float(w.d);
  }
};

// IQ2_XS: per group a uint16 of a 9-bit index and a 7-bit sign field; two scales per sub-block.
struct Iq2XsFormat {
  using Block = BlockIQ2_XS;
  static constexpr float kFactor = 0.125f;
  static constexpr int kScaleElems = 16;  // elements per scale
  static void decode(const Block& w, DecodedIq* k) {
    const __m512i q = _mm512_loadu_si512(w.qs);
    // Sign bytes: the field in bits 9-15 plus its parity in bit 7 (as kIqSigns).
    const __m512i f = _mm512_srli_epi16(q, 9);
    __m512i p = _mm512_xor_si512(f, _mm512_srli_epi16(f, 4));
    p = _mm512_xor_si512(p, _mm512_srli_epi16(p, 2));
    p = _mm512_xor_si512(p, _mm512_srli_epi16(p, 1));
    const __m512i signs =
        _mm512_or_si512(f, _mm512_slli_epi16(_mm512_and_si512(p, _mm512_set1_epi16(1)), 7));
    set_sign_masks(_mm512_cvtepi16_epi8(signs), k);
    set_scales(half_scales_i16(w.scales), k);
    // The indices by scalar loads and masks: cheaper here than extracting them from q.
    for (int c = 0; c < 4; ++c) {
      const uint16_t* i = w.qs + 8 * c;
      k->mag[c] = grid8_x8(kIq2XsGrid, i[0] & 511u, i[1] & 511u, i[2] & 511u, i[3] & 511u,
                           i[4] & 511u, i[5] & 511u, i[6] & 511u, i[7] & 511u);
    }
    k->d = half_to_float(w.d);
  }
};

// IQ2_S: 10-bit indices (8 bits in qs, 2 in qh), sign bytes stored whole, two scales per
// sub-block.
struct Iq2SFormat {
  using Block = BlockIQ2_S;
  static constexpr float kFactor = 0.125f;
  static constexpr int kScaleElems = 16;  // elements per scale
  static void decode(const Block& w, DecodedIq* k) {
    load_sign_masks(w.signs, k);
    set_scales(half_scales_i16(w.scales), k);
    // Group g = 4 sb + l takes bits 2l, 2l+1 of qh[sb] (bits 2g, 2g+1 of the 8 qh bytes as one
    // little-endian word) as index bits 8-9; computed in scalar registers, which measured faster
    // than a vector computation stored and read back.
    uint64_t qh;
    std::memcpy(&qh, w.qh, sizeof(qh));
    for (int c = 0; c < 4; ++c) {
      const auto index = [&](int j) {
        const int g = 8 * c + j;
        return uint32_t(w.qs[g]) | (uint32_t(qh >> (2 * g)) & 3) << 8;
      };
      k->mag[c] = grid8_x8(kIq2SGrid, index(0), index(1), index(2), index(3), index(4), index(5),
                           index(6), index(7));
    }
    k->d = half_to_float(w.d);
  }
};

// IQ3_XXS: byte indices into 4-byte entries; per sub-block a uint32 of 4 sign fields and the
// scale, all 8 of them contiguous.
struct Iq3XxsFormat {
  using Block = BlockIQ3_XXS;
  static constexpr float kFactor = 0.25f;
  static constexpr int kScaleElems = 32;  // elements per scale
  static void decode(const Block& w, DecodedIq* k) {
    const __m256i aux = loadu256(w.scales_signs);
    set_sign_masks(sign_bytes_from_fields(aux), k);
    set_scales(odd_scales_i16(_mm256_srli_epi32(aux, 28)), k);
    for (int c = 0; c < 4; ++c) k->mag[c] = grid4_x16(kIq3XxsGrid, w.qs + 16 * c);
    k->d = half_to_float(w.d);
  }
};

// IQ3_S: 9-bit indices (8 bits in qs, 1 in qh) into 4-byte entries, sign bytes stored whole,
// one scale per sub-block.
struct Iq3SFormat {
  using Block = BlockIQ3_S;
  static constexpr float kFactor = 1.0f;
  static constexpr int kScaleElems = 32;  // elements per scale
  static void decode(const Block& w, DecodedIq* k) {
    // Half-group i = 8 sb + j takes bit j of qh[sb] as index bit 8.
    const __m512i lane =
        _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                         12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i qh = _mm512_zextsi256_si512(
        _mm256_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.qh))));
    const __m512i shift = _mm512_and_si512(lane, _mm512_set1_epi16(7));
    alignas(64) uint16_t index[64];  // [64] codebook index per half-group
    for (int h = 0; h < 2; ++h) {    // half-groups 32h .. 32h + 31: qh[4h .. 4h + 3]
      const __m512i qh_of_half = _mm512_permutexvar_epi16(
          _mm512_add_epi16(_mm512_srli_epi16(lane, 3), _mm512_set1_epi16(short(4 * h))), qh);
      const __m512i high = _mm512_slli_epi16(
          _mm512_and_si512(_mm512_srlv_epi16(qh_of_half, shift), _mm512_set1_epi16(1)), 8);
      const __m512i low = _mm512_cvtepu8_epi16(loadu256(w.qs + 32 * h));
      _mm512_store_si512(index + 32 * h, _mm512_or_si512(low, high));
    }
    load_sign_masks(w.signs, k);
    // scales[sb / 2] nibble sb % 2 -> 32-bit lane sb.
    const uint32_t packed = uint32_t(load_i32(w.scales));
    const __m128i nibbles = _mm_unpacklo_epi8(_mm_cvtsi32_si128(int(packed & 0x0F0F0F0F)),
                                              _mm_cvtsi32_si128(int((packed >> 4) & 0x0F0F0F0F)));
    set_scales(odd_scales_i16(_mm256_cvtepu8_epi32(nibbles)), k);
    for (int c = 0; c < 4; ++c) k->mag[c] = grid4_x16(kIq3SGrid, index + 16 * c);
    k->d = half_to_float(w.d);
  }
};

// Per activation row: acc (16 lanes) += d * d_a * (the super-block's integer sum, in lanes).
// The signs go onto the activation quants (0 - p where the weight is negative), which must not be
// -128: the Q8_K quantizer maps to [-127, 127]. Ranges: vpmaddubsw pairs <= 2 * 62 * 127 (no
// int16 saturation), times ls <= 31, summed per int32 lane over the 4 registers: < 2^23.
template <bool kVnni>
inline void row_step(const DecodedIq& k, const BlockQ8_K& a, __m512& acc) {
  const __m512i zero = _mm512_setzero_si512();
  const auto* qs = reinterpret_cast<const __m512i*>(a.qs);
  __m512i p = _mm512_loadu_si512(qs);
  __m512i isum = _mm512_madd_epi16(
      _mm512_maddubs_epi16(k.mag[0], _mm512_mask_sub_epi8(p, k.neg[0], zero, p)), k.scales[0]);
  for (int c = 1; c < 4; ++c) {
    p = _mm512_loadu_si512(qs + c);
    isum = scaled_dot_u8s8<kVnni>(isum, k.mag[c], _mm512_mask_sub_epi8(p, k.neg[c], zero, p),
                                  k.scales[c]);
  }
  acc = row_super_block_step(acc, isum, k.d, a.d);
}

// out[r * out_stride] = dot(w, activation row r) for R rows starting at act.
// w: [nb] super-blocks of F::Block; act: R rows of [nb] BlockQ8_K, act_stride bytes apart.
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
    DecodedIq k;
    F::decode(w[b], &k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) row_step<kVnni>(k, a[r][b], acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = F::kFactor * row_sum(acc[r]);
}

// dot_tile as a type for block_dot_install.h.
struct Tile {
  template <class F, bool kVnni, int R>
  static void run(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
                  float* out, int64_t out_stride) {
    dot_tile<F, kVnni, R>(nb, w, act, act_stride, out, out_stride);
  }
};

// F as gemm_int8_levels_avx512.h's format: the signed levels and per-16 scales of a super-block.
template <class F>
struct Levels {
  using Block = typename F::Block;
  static constexpr float kFactor = F::kFactor;
  static constexpr int kScaleElems = F::kScaleElems;
  static void levels(const Block& w, Int8Levels* out) {
    DecodedIq k;
    F::decode(w, &k);
    const __m512i zero = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c)
      out->v[c] = _mm512_mask_sub_epi8(k.mag[c], k.neg[c], zero, k.mag[c]);
    out->scale = _mm512_cvtepu16_epi32(k.sub_scales);
    out->d = k.d;
  }
};

template <class F>
void install(TraitsTable& table, GgmlType type, bool vnni) {
  install_tiled<Tile, F, kQK_K>(table, type, vnni);
  table[static_cast<size_t>(type)].gemm_tile = vnni ? int8_levels_gemm_tile<Levels<F>> : nullptr;
}

}  // namespace

void register_iq23_kernels(TraitsTable& table, Avx512Extensions ext) {
  install<Iq2XxsFormat>(table, GgmlType::IQ2_XXS, ext.vnni);
  install<Iq2XsFormat>(table, GgmlType::IQ2_XS, ext.vnni);
  install<Iq2SFormat>(table, GgmlType::IQ2_S, ext.vnni);
  install<Iq3XxsFormat>(table, GgmlType::IQ3_XXS, ext.vnni);
  install<Iq3SFormat>(table, GgmlType::IQ3_S, ext.vnni);
}

}  // namespace vela::kernels::avx512

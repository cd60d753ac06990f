// AVX2 dot products of the E8-lattice codebook types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// with Q8_K activations. Each 32-element sub-block is decoded once for all the tile's activation
// rows into three registers: its 32 magnitudes (codebook entries fetched by scalar loads and
// assembled, which beats vpgather on the CPUs we target), its signs as +-1 bytes, and its scales
// as int16. Per row, vpsignb moves the signs onto the activation quants, vpmaddubsw multiplies
// them by the unsigned magnitudes and vpmaddwd by the scales: the super-block's integer sum stays
// exact in 8 int32 lanes (as in the scalar reference), is added up and scaled once by d_w * d_a in
// float. Prompts take gemm_int8_levels_avx2.h's kernel on the same decode.
// How each format gets its indices and signs (scalar registers and a +-1 table, or vector code
// for the whole super-block first) was chosen per format by measurement; the decode, not the
// memory traffic, bounds these kernels.
#include <cstring>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/gemm_int8_levels_avx2.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks.h"
#include "quant/blocks_iq23.h"
#include "quant/iq23_grids.h"

namespace vela::kernels::avx2 {

namespace {

// 32 magnitudes from four 8-byte codebook entries, in element order.
inline __m256i grid8_x4(const uint64_t* grid, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  return _mm256_set_epi64x(int64_t(grid[i3]), int64_t(grid[i2]), int64_t(grid[i1]),
                           int64_t(grid[i0]));
}

// 32 magnitudes from eight 4-byte codebook entries; idx: [8] indices in element order.
template <class Index>
inline __m256i grid4_x8(const uint32_t* grid, const Index* idx) {
  return _mm256_set_epi32(int(grid[idx[7]]), int(grid[idx[6]]), int(grid[idx[5]]),
                          int(grid[idx[4]]), int(grid[idx[3]]), int(grid[idx[2]]),
                          int(grid[idx[1]]), int(grid[idx[0]]));
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

// Which 128-bit half of a block-wide vector holds sub-block sb's 32-bit word (lane sb), in both
// halves: vpshufb (which cannot cross halves) then picks the word with a constant mask.
struct HalfBroadcast {
  __m256i lo, hi;  // lanes 0-3 / lanes 4-7 of v, repeated in both 128-bit halves
  explicit HalfBroadcast(__m256i v)
      : lo(_mm256_permute2x128_si256(v, v, 0x00)), hi(_mm256_permute2x128_si256(v, v, 0x11)) {}
  __m256i of(int sb) const { return sb < 4 ? lo : hi; }
};

// Sub-block sb's sign word (lane sb of a HalfBroadcast) -> +-1 bytes: byte j is -1 where bit j
// is set (element negative), else +1 (vpsignb's multiplier; it must not be 0).
inline __m256i signs_of(const HalfBroadcast& words, int sb) {
  const char b = char(4 * (sb % 4));  // byte offset of the word in its half
  const __m256i spread = _mm256_shuffle_epi8(
      words.of(sb),
      _mm256_setr_epi8(b, b, b, b, b, b, b, b, char(b + 1), char(b + 1), char(b + 1), char(b + 1),
                       char(b + 1), char(b + 1), char(b + 1), char(b + 1), char(b + 2), char(b + 2),
                       char(b + 2), char(b + 2), char(b + 2), char(b + 2), char(b + 2), char(b + 2),
                       char(b + 3), char(b + 3), char(b + 3), char(b + 3), char(b + 3), char(b + 3),
                       char(b + 3), char(b + 3)));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i negative = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_or_si256(negative, _mm256_set1_epi8(1));
}

// Sub-block sb's scale word (lane sb of a HalfBroadcast: int16 ls for its elements 0-15, then
// for 16-31) -> the int16 vector vpmaddwd takes: the first ls in the low 128 bits (elements 0-15
// after vpmaddubsw), the second in the high 128 bits.
inline __m256i scales_of(const HalfBroadcast& words, int sb) {
  const char b = char(4 * (sb % 4));
  const char b1 = char(b + 1), b2 = char(b + 2), b3 = char(b + 3);
  return _mm256_shuffle_epi8(
      words.of(sb), _mm256_setr_epi8(b, b1, b, b1, b, b1, b, b1, b, b1, b, b1, b, b1, b, b1, b2, b3,
                                     b2, b3, b2, b3, b2, b3, b2, b3, b2, b3, b2, b3, b2, b3));
}

// Per 32-bit lane holding a 4-bit scale s: ls = 2 s + 1 in both of its int16 halves.
inline __m256i odd_scales_i16(__m256i s) {
  const __m256i ls = _mm256_or_si256(_mm256_add_epi32(s, s), _mm256_set1_epi32(1));
  return _mm256_or_si256(ls, _mm256_slli_epi32(ls, 16));
}

// IQ2_XS / IQ2_S scales (two 4-bit scales per sub-block, for its elements 0-15 and 16-31):
// int16 pairs (ls_low, ls_high), pair sb in 32-bit lane sb.
inline __m256i half_scales_i16(const uint8_t* scales) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i s =
      _mm_unpacklo_epi8(_mm_and_si128(x, nibble), _mm_and_si128(_mm_srli_epi16(x, 4), nibble));
  return _mm256_cvtepu8_epi16(_mm_or_si128(_mm_add_epi8(s, s), _mm_set1_epi8(1)));
}

// +-1 bytes for every 7-bit stored sign field f (IQ2_XXS, IQ2_XS): byte j is -1 where the
// group's element j is negative, bit j of f for j < 7 and the parity of f for j = 7 (the rule
// kIqSigns encodes), else +1. Fetched like the codebook entries, 8 bytes per group: for these
// two types cheaper than computing the sign bytes in vector registers (measured).
struct SignFieldTable {
  uint64_t plus_minus_one[128];
  constexpr SignFieldTable() : plus_minus_one() {
    for (int f = 0; f < 128; ++f) {
      int parity = 0;
      for (int j = 0; j < 7; ++j) parity ^= (f >> j) & 1;
      const int bits = f | parity << 7;
      uint64_t v = 0;
      for (int j = 0; j < 8; ++j) v |= uint64_t((bits >> j) & 1 ? 0xFF : 0x01) << (8 * j);
      plus_minus_one[f] = v;
    }
  }
};
alignas(64) constexpr SignFieldTable kSignFields;

// The per-format decoders: magnitudes(sb) and signs(sb) give sub-block sb's 32 magnitudes and
// +-1 bytes; scales holds every sub-block's scale word (int16 ls for elements 0-15, then for
// 16-31) in 32-bit lane sb, for scales_of.

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
struct Iq2Xxs {
  using Block = BlockIQ2_XXS;
  static constexpr float kFactor = 0.125f;
  struct Decoder {
    const Block& w;
    HalfBroadcast scales;
    explicit Decoder(const Block& blk)
        : w(blk), scales(odd_scales_i16(_mm256_srli_epi32(odd_words(blk.qs), 28))) {}
    __m256i magnitudes(int sb) const {
      const uint8_t* q = w.qs + 8 * sb;
      return grid8_x4(kIq2XxsGrid, q[0], q[1], q[2], q[3]);
    }
    __m256i signs(int sb) const {
      const uint32_t aux = load_u32(w.qs + 8 * sb + 4);
      return grid8_x4(kSignFields.plus_minus_one, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127,
                      (aux >> 21) & 127);
    }
  };
};

// IQ2_XS: per group a uint16 of a 9-bit index and a 7-bit sign field; two scales per sub-block.
// Indices and fields are taken apart in scalar registers (measured faster than in vectors).
struct Iq2Xs {
  using Block = BlockIQ2_XS;
  static constexpr float kFactor = 0.125f;
  struct Decoder {
    const Block& w;
    HalfBroadcast scales;
    explicit Decoder(const Block& blk) : w(blk), scales(half_scales_i16(blk.scales)) {}
    __m256i magnitudes(int sb) const {
      const uint16_t* q = w.qs + 4 * sb;
      return grid8_x4(kIq2XsGrid, q[0] & 511u, q[1] & 511u, q[2] & 511u, q[3] & 511u);
    }
    __m256i signs(int sb) const {
      const uint16_t* q = w.qs + 4 * sb;
      return grid8_x4(kSignFields.plus_minus_one, q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
    }
  };
};

// IQ2_S: 10-bit indices (8 bits in qs, 2 in qh), sign bytes stored whole, two scales per
// sub-block.
struct Iq2S {
  using Block = BlockIQ2_S;
  static constexpr float kFactor = 0.125f;
  struct Decoder {
    const Block& w;
    uint64_t qh;  // the 8 qh bytes as one little-endian word: bits 2g, 2g+1 belong to group g
    HalfBroadcast sign_words, scales;
    explicit Decoder(const Block& blk)
        : w(blk), sign_words(loadu256(blk.signs)), scales(half_scales_i16(blk.scales)) {
      std::memcpy(&qh, blk.qh, sizeof(qh));
    }
    // Group g's index in scalar registers: measured faster than a vector computation.
    uint32_t index(int g) const { return uint32_t(w.qs[g]) | (uint32_t(qh >> (2 * g)) & 3) << 8; }
    __m256i magnitudes(int sb) const {
      return grid8_x4(kIq2SGrid, index(4 * sb), index(4 * sb + 1), index(4 * sb + 2),
                      index(4 * sb + 3));
    }
    __m256i signs(int sb) const { return signs_of(sign_words, sb); }
  };
};

// IQ3_XXS: byte indices into 4-byte entries; per sub-block a uint32 of 4 sign fields and the
// scale, all 8 of them contiguous.
struct Iq3Xxs {
  using Block = BlockIQ3_XXS;
  static constexpr float kFactor = 0.25f;
  struct Decoder {
    const Block& w;
    HalfBroadcast sign_words, scales;
    explicit Decoder(const Block& blk)
        : w(blk),
          sign_words(sign_bytes_from_fields(loadu256(blk.scales_signs))),
          scales(odd_scales_i16(_mm256_srli_epi32(loadu256(blk.scales_signs), 28))) {}
    __m256i magnitudes(int sb) const { return grid4_x8(kIq3XxsGrid, w.qs + 8 * sb); }
    __m256i signs(int sb) const { return signs_of(sign_words, sb); }
  };
};

// IQ3_S: 9-bit indices (8 bits in qs, 1 in qh) into 4-byte entries, sign bytes stored whole,
// one scale per sub-block.
struct Iq3S {
  using Block = BlockIQ3_S;
  static constexpr float kFactor = 1.0f;
  // scales[sb / 2] nibble sb % 2 -> 32-bit lane sb, as odd_scales_i16.
  static __m256i scale_words(const Block& blk) {
    const uint32_t packed = load_u32(blk.scales);
    const __m128i nibbles = _mm_unpacklo_epi8(_mm_cvtsi32_si128(int(packed & 0x0F0F0F0F)),
                                              _mm_cvtsi32_si128(int((packed >> 4) & 0x0F0F0F0F)));
    return odd_scales_i16(_mm256_cvtepu8_epi32(nibbles));
  }
  struct Decoder {
    alignas(32) uint16_t index[64];  // [64] codebook index per half-group
    HalfBroadcast sign_words, scales;
    explicit Decoder(const Block& blk) : sign_words(loadu256(blk.signs)), scales(scale_words(blk)) {
      // Half-group i = 8 sb + k takes bit k of qh[sb] as index bit 8: qh[sb] into the low byte
      // of 16-bit lane i, times 2^(8 - k).
      const __m256i qh =
          _mm256_broadcastsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qh)));
      const __m256i mul =
          _mm256_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2, 256, 128, 64, 32, 16, 8, 4, 2);
      const __m256i bit8 = _mm256_set1_epi16(0x100);
      VELA_UNROLL
      for (int pair = 0; pair < 4; ++pair) {  // sub-blocks 2 pair and 2 pair + 1
        const char b0 = char(2 * pair), b1 = char(2 * pair + 1), z = -128;
        const __m256i pick =
            _mm256_setr_epi8(b0, z, b0, z, b0, z, b0, z, b0, z, b0, z, b0, z, b0, z, b1, z, b1, z,
                             b1, z, b1, z, b1, z, b1, z, b1, z, b1, z);
        const __m256i bits =
            _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), mul), bit8);
        const __m256i low = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * pair)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(index + 16 * pair),
                           _mm256_or_si256(low, bits));
      }
    }
    __m256i magnitudes(int sb) const { return grid4_x8(kIq3SGrid, index + 8 * sb); }
    __m256i signs(int sb) const { return signs_of(sign_words, sb); }
  };
};

// Per super-block and row: sum over sub-blocks of scale * (magnitudes . signed activations).
// Ranges: vpmaddubsw pairs <= 2 * 62 * 127 (no int16 saturation), times ls <= 31 and summed
// per int32 lane over the 8 sub-blocks: < 2^24. The activation must not be -128 (vpsignb
// cannot negate it), which the Q8_K quantizer never produces (it maps to [-127, 127]).
template <class Format>
struct IqDot {
  using Block = typename Format::Block;

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
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      prefetch_weights<sizeof(Block)>(w + b);
      const typename Format::Decoder dec(w[b]);
      __m256i isum[k];
      VELA_UNROLL
      for (int t = 0; t < k; ++t) isum[t] = _mm256_setzero_si256();
      VELA_UNROLL
      for (int sb = 0; sb < 8; ++sb) {
        const __m256i mag = dec.magnitudes(sb);
        const __m256i sign = dec.signs(sb);
        const __m256i scale = scales_of(dec.scales, sb);
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          const __m256i p = _mm256_sign_epi8(loadu256(a[t][b].qs + 32 * sb), sign);
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, p), scale));
        }
      }
      const float d = half_to_float(w[b].d);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) acc[t] = row_super_block_step(acc[t], isum[t], d, a[t][b].d);
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = Format::kFactor * row_sum(acc[t]);
  }
};

// Format as gemm_int8_levels_avx2.h's: the signed levels and per-16 scales of a super-block.
template <class Format>
struct Levels {
  using Block = typename Format::Block;
  static constexpr float kFactor = Format::kFactor;
  static void levels(const Block& w, Int8Levels* out) {
    const typename Format::Decoder dec(w);
    VELA_UNROLL
    for (int sb = 0; sb < 8; ++sb) out->v[sb] = _mm256_sign_epi8(dec.magnitudes(sb), dec.signs(sb));
    // Lane sb of the scale words holds sub-block sb's two int16 scales.
    out->scale = _mm256_blend_epi32(dec.scales.lo, dec.scales.hi, 0xF0);
    out->d = half_to_float(w.d);
  }
};

constexpr int kTile = 4;
using Iq2XxsRows = RowTiles<IqDot<Iq2Xxs>, kTile>;
using Iq2XsRows = RowTiles<IqDot<Iq2Xs>, kTile>;
using Iq2SRows = RowTiles<IqDot<Iq2S>, kTile>;
using Iq3XxsRows = RowTiles<IqDot<Iq3Xxs>, kTile>;
using Iq3SRows = RowTiles<IqDot<Iq3S>, kTile>;

}  // namespace

float vec_dot_iq2_xxs_q8_k(int64_t n, const void* w, const void* a) {
  return Iq2XxsRows::one(n, w, a);
}
float vec_dot_iq2_xs_q8_k(int64_t n, const void* w, const void* a) {
  return Iq2XsRows::one(n, w, a);
}
float vec_dot_iq2_s_q8_k(int64_t n, const void* w, const void* a) {
  return Iq2SRows::one(n, w, a);
}
float vec_dot_iq3_xxs_q8_k(int64_t n, const void* w, const void* a) {
  return Iq3XxsRows::one(n, w, a);
}
float vec_dot_iq3_s_q8_k(int64_t n, const void* w, const void* a) {
  return Iq3SRows::one(n, w, a);
}

void vec_dot_rows_iq2_xxs_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                               int64_t n_act, float* out, int64_t out_stride) {
  Iq2XxsRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_iq2_xs_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                              int64_t n_act, float* out, int64_t out_stride) {
  Iq2XsRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_iq2_s_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  Iq2SRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_iq3_xxs_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                               int64_t n_act, float* out, int64_t out_stride) {
  Iq3XxsRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_iq3_s_q8_k(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                             int64_t n_act, float* out, int64_t out_stride) {
  Iq3SRows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

#define VELA_IQ23_GEMM_TILE(name, Format)                                                        \
  void gemm_tile_##name##_q8_k(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,      \
                               const uint8_t* act, size_t act_stride, int64_t n_act, float* out, \
                               int64_t out_stride) {                                             \
    int8_levels_gemm_tile<Levels<Format>>(n, w, w_stride, n_w_rows, act, act_stride, n_act, out, \
                                          out_stride);                                           \
  }
VELA_IQ23_GEMM_TILE(iq2_xxs, Iq2Xxs)
VELA_IQ23_GEMM_TILE(iq2_xs, Iq2Xs)
VELA_IQ23_GEMM_TILE(iq2_s, Iq2S)
VELA_IQ23_GEMM_TILE(iq3_xxs, Iq3Xxs)
VELA_IQ23_GEMM_TILE(iq3_s, Iq3S)
#undef VELA_IQ23_GEMM_TILE

}  // namespace vela::kernels::avx2

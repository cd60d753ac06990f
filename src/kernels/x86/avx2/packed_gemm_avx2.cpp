// AVX2 kernels for 16-row interleaved Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights
// (packed_gemm.h; Q4_K, Q5_K and Q6_K in packed_gemm_k_avx2.cpp), for CPUs without AVX-512. A
// packed block's vector j holds 4 weights of each of the 16 rows; its 32-byte halves are rows 0-7
// and 8-15, so with one broadcast activation dword, vpmaddubsw gives each row's two pair sums (at
// most 2 * 15 * 127, no saturation), eight of them add up exactly in int16 (at most 30480), and one
// vpmaddwd by ones makes each row's exact block sum. Then the reference's float chain, so results
// are bit-identical to the scalar reference and to the AVX-512 kernels (batch invariance holds on
// every kernel level). Q8_0 and the codebook formats IQ4_NL and MXFP4, whose levels (IQ4_NL: -127
// to 113) do not fit unsigned nibble sums, take their signed levels apart instead (below).
#include <type_traits>

#include "kernels/packed/nibble_format.h"
#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/packed_gemm_avx2_common.h"
#include "quant/blocks.h"

namespace vela::kernels {
namespace avx2 {
namespace {

template <class Packed>
using NibbleFormat = NibbleTraits<Packed>;  // the formats on Q4_0's nibble layout

// Vector v of rows 8h .. 8h + 7 of a nibble block, decoded: vectors 0-3 are the low nibbles of
// the block's 4 byte vectors, 4-7 the high ones, the 5th bits joined where the format has them.
template <class Packed>
inline __m256i decode_vector(const Packed& blk, int h, int v) {
  const __m256i raw = loadu256(blk.qs[v % 4][kHalfRows * h]);
  const __m256i w =
      _mm256_and_si256(v < 4 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
  if constexpr (NibbleFormat<Packed>::kHighBit)
    return _mm256_or_si256(w, high_bits_of(loadu256(blk.qh + kHalfRows * h), v));
  else
    return w;
}

// Rows 8h .. 8h + 7 of a nibble block, decoded: its 8 vectors of levels.
template <class Packed>
inline void decode_half(const Packed& blk, int h, __m256i w[8]) {
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) w[v] = decode_vector(blk, h, v);
}

// The block scales of rows 8h .. 8h + 7: f16, or MXFP4's e8m0 bytes as e8m0_half_scale decodes
// them, 2^(e - 128) (the exponent field e - 1 from e = 2 on, below it the subnormals 2^-128 and
// 2^-127).
template <class Packed>
inline __m256 half_scales(const Packed& blk, int h) {
  if constexpr (NibbleFormat<Packed>::kE8M0) {
    const __m256i e = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.e + kHalfRows * h)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
  } else {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.d + kHalfRows * h)));
  }
}

// The formats whose levels the kernels take as signed bytes: Q8_0's, and the codebook formats'
// looked up from their nibbles.
template <class Packed>
constexpr bool kSignedLevels =
    std::is_same_v<Packed, BlockQ8_0x16> || NibbleFormat<Packed>::kCodebook;

// The activation blocks Packed meets (Q8_0, Q4_0 / Q5_0 and the codebook formats: Q8_0; Q4_1 /
// Q5_1: Q8_1), and whether its kernel takes the activations' start sums (Q4_0 / Q5_0, whose
// levels carry a bias).
template <class Packed>
using ActOf = typename NibbleFormat<Packed>::Act;
template <class Packed>
constexpr bool kTakesStarts = !kSignedLevels<Packed> && !NibbleFormat<Packed>::kAffine;

// One activation block a (start: its start sum, Q4_0 / Q5_0 only) against rows 8h .. 8h + 7 of
// blk, from the rows' exact block sums isum, dw the rows' scales: acc plus the block's products.
template <class Packed>
inline __m256 finish_half_block(__m256i isum, const Packed& blk, int h, __m256 dw,
                                const ActOf<Packed>& a, int32_t start, __m256 acc) {
  using F = NibbleFormat<Packed>;
  if constexpr (kTakesStarts<Packed>) isum = _mm256_add_epi32(isum, _mm256_set1_epi32(start));
  const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(half_to_float(a.d)));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
  if constexpr (F::kAffine) {
    const __m256 mw =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.m + kHalfRows * h)));
    acc = _mm256_fmadd_ps(mw, _mm256_set1_ps(half_to_float(a.s)), acc);
  }
  return acc;
}

// The same for both halves of block blk against R rows' activation blocks a[r] (start(r): row r's
// start sum where kTakesStarts): acc[h][r] plus the products, from the exact sums isum[h][r].
template <class Packed, int R, class Start>
inline void finish_block(const Packed& blk, const __m256i (&isum)[2][R],
                         const ActOf<Packed>* const (&a)[R], Start&& start, __m256 (&acc)[2][R]) {
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m256 dw = half_scales(blk, h);
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      acc[h][r] = finish_half_block(isum[h][r], blk, h, dw, *a[r], start(r), acc[h][r]);
  }
}

// acc plus one activation block a against rows 8h .. 8h + 7 of blk, for a lone row, each vector of
// levels decoded just before its vpmaddubsw (group_tile's integer sums and float steps). A lone
// row uses each decoded vector once; decoding all 8 first keeps them live together, which AVX2's
// 16 registers cannot hold beside a lone row's 4 accumulators. The pair sums are added with
// vpaddsw (see group_tile): with vpaddw GCC regrouped them and kept every product live at once.
// Together with lone_row's reloaded activations, the spills of the Q5_1 loop went from 107 stack
// accesses per step of two blocks to 1. `vela bench matmul --rows 2048 --working-set-mib 8
// --tokens 1 -t 1` (in L3), medians of four alternations on a Zen 3: Q4_0 1.18x, Q4_1 1.16x,
// Q5_0 1.15x, Q5_1 1.16x.
template <class Packed>
inline __m256 half_block_row_streamed(const Packed& blk, int h, __m256 dw,
                                      const typename NibbleFormat<Packed>::Act& a, int32_t start,
                                      __m256 acc) {
  using F = NibbleFormat<Packed>;
  __m256i plane = _mm256_setzero_si256();
  if constexpr (F::kHighBit) plane = loadu256(blk.qh + kHalfRows * h);
  __m256i s16[2];  // vectors 0-3 and 4-7
  VELA_UNROLL
  for (int j = 0; j < 4; ++j)
    nibble_pair_products<F::kHighBit>(loadu256(blk.qs[j][kHalfRows * h]), plane, j, plane, j + 4,
                                      a.qs + 4 * j, a.qs + 16 + 4 * j, j == 0, s16[0], s16[1]);
  // 4-bit levels' two sums add up in int16 too (group_tile's bounds); 5-bit ones may not.
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i isum = F::kHighBit ? _mm256_add_epi32(_mm256_madd_epi16(s16[0], ones),
                                                      _mm256_madd_epi16(s16[1], ones))
                                   : _mm256_madd_epi16(_mm256_add_epi16(s16[0], s16[1]), ones);
  return finish_half_block(isum, blk, h, dw, a, start, acc);
}

// Q8_0: the packed weights are level + 128; as signed bytes again, vpmaddubsw takes |w| (at
// most 128) against the activations with w's sign, so each pair sum stays below 2 * 128 * 127.
// Two of those could overflow int16, so every vector goes through vpmaddwd on its own. (The
// activation quants are within +-127, as the Q8_0 quantizer makes them, so vpsignb never has
// to negate -128.) The codebook formats' levels, looked up by vpshufb, go the same way (|w| at
// most 127).
template <class Packed>
inline __m256i decode_signed_vector(const Packed& blk, int h, int v) {
  if constexpr (std::is_same_v<Packed, BlockQ8_0x16>) {
    return _mm256_xor_si256(loadu256(blk.qs[v][kHalfRows * h]), _mm256_set1_epi8(char(0x80)));
  } else {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(NibbleFormat<Packed>::kLevels)));
    return _mm256_shuffle_epi8(table, decode_vector(blk, h, v));
  }
}

// The exact sums of one vector of levels w (|w| in w_abs) against one broadcast activation dword.
inline __m256i q8_0_products(__m256i w_abs, __m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w)),
                           _mm256_set1_epi16(1));
}

// acc plus one activation block a against rows 8h .. 8h + 7 of a block (a lone row), each vector
// decoded just before its products, as the nibble formats' half_block_row_streamed.
template <class Packed>
inline __m256 signed_half_block_row_streamed(const Packed& blk, int h, __m256 dw,
                                             const BlockQ8_0& a, __m256 acc) {
  __m256i isum = _mm256_setzero_si256();
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) {
    const __m256i w = decode_signed_vector(blk, h, v);
    isum = _mm256_add_epi32(
        isum, q8_0_products(_mm256_abs_epi8(w), w, _mm256_set1_epi32(load_i32(a.qs + 4 * v))));
  }
  return finish_half_block(isum, blk, h, dw, a, 0, acc);
}

// Q8_0 and the codebook formats: rows r < R of the token tile at act against both halves of one
// group of nb blocks, vector by vector, as group_tile: each vector is decoded (and its |w| taken)
// once for the R rows, each activation broadcast serves both halves. Never decoded once: `vela
// bench matmul --type Q8_0 -t 1` on a Zen 3, two alternations, against a half of 4 rows at a
// time that decoded |w| and w once from 16 tokens: 1.65x at 2 tokens, 1.3x at 4-8, 1.25x at 16,
// 1.1x at 32, 1.04x at 64-512.
template <class Packed, int R>
void group_tile_signed(const Packed* wg, int64_t nb, const uint8_t* act, size_t act_stride,
                       float* y, int64_t y_stride) {
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(wg + b);
    const BlockQ8_0* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r) a[r] = reinterpret_cast<const BlockQ8_0*>(act + r * act_stride) + b;
    __m256i isum[2][R];  // each (half, row)'s exact block sums
    VELA_UNROLL
    for (int v = 0; v < 8; ++v) {
      __m256i w[2], w_abs[2];
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        w[h] = decode_signed_vector(wg[b], h, v);
        w_abs[h] = _mm256_abs_epi8(w[h]);
      }
      VELA_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256i x = _mm256_set1_epi32(load_i32(a[r]->qs + 4 * v));
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) {
          const __m256i sums = q8_0_products(w_abs[h], w[h], x);
          isum[h][r] = v == 0 ? sums : _mm256_add_epi32(isum[h][r], sums);
        }
      }
    }
    finish_block(
        wg[b], isum, a, [](int) { return 0; }, acc);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// The nibble formats: rows r < R of the token tile at act against both halves of one group of nb
// blocks (starts: the activations' start sums where kTakesStarts, else nullptr), vector by vector:
// each vector of levels serves the R rows, and each activation broadcast both halves, so that 4
// rows take 0.75 loads per vpmaddubsw (1.25 a half at a time). decoded: when kDecoded, the
// group's blocks decoded once (half h of block b at decoded + 8 (h nb + b), for_group_tiles);
// otherwise each vector is decoded just before its vpmaddubsw.
// The pair sums (4-bit levels: at most 2 * 15 * 127; 5-bit: 2 * 31 * 127) add up exactly in int16
// 8 vectors at a time for 4-bit levels (at most 30480), 4 for 5-bit (31496), then vpmaddwd by
// ones (both_halves_pair_sums).
// `vela bench matmul -t 1` on a Zen 3, two alternations, against a half of 4 rows at a time that
// decoded once from 16 tokens: 1.3-1.75x at 2 tokens, 1.17-1.45x at 4-64, at 512 Q4_0 1.15x, Q4_1
// 1.25x, Q5_0 1.13x, Q5_1 1.3x.
template <class Packed, int R, bool kDecoded>
void group_tile(const Packed* wg, int64_t nb, const __m256i* decoded, const uint8_t* act,
                size_t act_stride, const int32_t* starts, float* y, int64_t y_stride) {
  constexpr int kInt16Terms = NibbleFormat<Packed>::kHighBit ? 4 : 8;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (!kDecoded) prefetch_ahead(wg + b);
    const ActOf<Packed>* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      a[r] = reinterpret_cast<const ActOf<Packed>*>(act + r * act_stride) + b;
    __m256i isum[2][R];  // each (half, row)'s exact block sums
    VELA_UNROLL
    for (int v0 = 0; v0 < 8; v0 += kInt16Terms) {
      __m256i s16[2][R];
      both_halves_pair_sums<R, kInt16Terms>(
          [&](int h, int i) {
            return kDecoded ? _mm256_load_si256(decoded + 8 * (h * nb + b) + v0 + i)
                            : decode_vector(wg[b], h, v0 + i);
          },
          [&](int r, int i) { return a[r]->qs + 4 * (v0 + i); }, s16);
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) VELA_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256i part = _mm256_madd_epi16(s16[h][r], ones);
        isum[h][r] = v0 == 0 ? part : _mm256_add_epi32(isum[h][r], part);
      }
    }
    finish_block(
        wg[b], isum, a,
        [&](int r) {
          return kTakesStarts<Packed> ? starts[size_t(r) * size_t(nb) + size_t(b)] : 0;
        },
        acc);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// One activation row against S groups, group i's nb blocks at wg + i * apart and its 16 outputs
// at y + i * y_apart, walked in lockstep (for_lone_group_pairs), both halves of each block at
// once: each block is read from memory once, its halves' arithmetic overlapping the reads (a
// half per pass would read the group in the first and compute the second from cache alone).
// Whether lone_row reloads the activation broadcasts for each (stream, half) (see there).
template <class Packed>
constexpr bool kReloadBroadcasts = kSignedLevels<Packed> || NibbleFormat<Packed>::kHighBit;

template <class Packed, int S>
void lone_row(const Packed* wg, int64_t apart, int64_t nb, const uint8_t* act,
              const int32_t* starts, float* y, int64_t y_apart) {
  const auto* a = reinterpret_cast<const ActOf<Packed>*>(act);
  __m256 acc[S][2];
  VELA_UNROLL
  for (int i = 0; i < S; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    VELA_UNROLL
    for (int i = 0; i < S; ++i) {
      const Packed& blk = wg[i * apart + b];
      prefetch_ahead(&blk);
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int32_t start = kTakesStarts<Packed> ? starts[b] : 0;
        // With 5th bits, the plane and its mask leave no registers for the 8 activation
        // broadcasts that GCC would otherwise load once per block and keep for all 4 of its
        // halves: an opaque pointer has them loaded again (a broadcast load costs no ALU
        // work), instead of spilled. Q8_0's |w| and signed broadcasts take the same room (77
        // stack accesses per step of both streams without the reload, 2 with it; from memory
        // with -t 1 1.25x). Without 5th bits they fit, and reloading them was slower.
        const ActOf<Packed>* ab = a + b;
        if constexpr (kReloadBroadcasts<Packed>) asm volatile("" : "+r"(ab));
        if constexpr (kSignedLevels<Packed>)
          acc[i][h] = signed_half_block_row_streamed(blk, h, half_scales(blk, h), *ab, acc[i][h]);
        else
          acc[i][h] = half_block_row_streamed(blk, h, half_scales(blk, h), *ab, start, acc[i][h]);
      }
    }
  }
  VELA_UNROLL
  for (int i = 0; i < S; ++i)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + i * y_apart + kHalfRows * h, acc[i][h]);
}

// Q8_0 and the nibble formats (Packed: BlockQ8_0x16, BlockQ4_0x16, ..., BlockMXFP4x16; kType its
// GGML type).
template <class Packed, GgmlType kType>
void gemm_blocks(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedBlockK;
  const int32_t* starts = kTakesStarts<Packed> ? packed_act_sums(kType, p) : nullptr;
  const auto* w = static_cast<const Packed*>(p.w);
  if (p.n_act == 1) {
    for_lone_group_pairs(p.n_groups, [&](auto streams, int64_t g, int64_t apart) {
      lone_row<Packed, decltype(streams)::value>(w + g * nb, apart * nb, nb, p.act, starts,
                                                 p.y + g * kPackedRows, apart * kPackedRows);
    });
    return;
  }
  if constexpr (kSignedLevels<Packed>) {
    for_group_tiles<4>(p, [&](int64_t g, auto rows, int64_t t) {
      group_tile_signed<Packed, decltype(rows)::value>(
          w + g * nb, nb, p.act + size_t(t) * p.act_stride, p.act_stride,
          p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
    });
  } else if constexpr (!NibbleFormat<Packed>::kHighBit) {
    for_group_tiles<4>(p, [&](int64_t g, auto rows, int64_t t) {
      group_tile<Packed, decltype(rows)::value, false>(
          w + g * nb, nb, nullptr, p.act + size_t(t) * p.act_stride, p.act_stride,
          kTakesStarts<Packed> ? starts + t * nb : nullptr, p.y + t * p.y_stride + g * kPackedRows,
          p.y_stride);
    });
  } else {
    for_group_tiles<8, 4, Packed, kQ5DecodeOnceMinTokens>(
        p, nb, [](const Packed& blk, int h, __m256i* out) { decode_half(blk, h, out); },
        [&](auto decoded_t, int64_t g, auto rows, int64_t t, const __m256i* decoded) {
          group_tile<Packed, decltype(rows)::value, decltype(decoded_t)::value>(
              w + g * nb, nb, decoded, p.act + size_t(t) * p.act_stride, p.act_stride,
              kTakesStarts<Packed> ? starts + t * nb : nullptr,
              p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
        });
  }
}

}  // namespace
}  // namespace avx2

PackedGemmFn packed_gemm_avx2(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0:
      return avx2::gemm_blocks<BlockQ8_0x16, GgmlType::Q8_0>;
    case GgmlType::Q4_0:
      return avx2::gemm_blocks<BlockQ4_0x16, GgmlType::Q4_0>;
    case GgmlType::Q5_0:
      return avx2::gemm_blocks<BlockQ5_0x16, GgmlType::Q5_0>;
    case GgmlType::Q4_1:
      return avx2::gemm_blocks<BlockQ4_1x16, GgmlType::Q4_1>;
    case GgmlType::Q5_1:
      return avx2::gemm_blocks<BlockQ5_1x16, GgmlType::Q5_1>;
    case GgmlType::IQ4_NL:
      return avx2::gemm_blocks<BlockIQ4_NLx16, GgmlType::IQ4_NL>;
    case GgmlType::MXFP4:
      return avx2::gemm_blocks<BlockMXFP4x16, GgmlType::MXFP4>;
    default:
      return packed_gemm_k_avx2(w_type);
  }
}

}  // namespace vela::kernels

// AVX-512 VNNI kernels for 16-row interleaved Q4_K, Q5_K, Q6_K, IQ4_XS, Q3_K, Q2_K and TQ2_0
// weights against Q8_K activations (packed_gemm.h). As for Q8_0 / Q4_0, a dword lane holds four
// weights of one row, so vpdpbusd with one broadcast activation dword feeds the exact integer sums
// of all 16 rows at once. (Measured: 16-row token tiles over a block-major activation copy, which
// pay for Q8_0 / Q4_0, made Q4_K prompt processing 4-7% slower and Q6_K 10% slower here.)
#include <type_traits>

#include "kernels/packed/nibble_format.h"
#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/packed_act_avx512.h"
#include "kernels/x86/avx512/packed_gemm_avx512.h"

namespace vela::kernels {
namespace avx512 {
namespace {

// Pair p of a Q4_K / Q5_K block decoded: lo the low nibbles' 8 vectors, hi the high ones'.
template <class Packed>
inline void decode_q4_k_pair(const Packed& blk, int p, __m512i lo[8], __m512i hi[8]) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  const BlockQ4_Kx16& wb = k_scales(blk);
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    const __m512i raw = _mm512_loadu_si512(wb.qs[p][g]);
    lo[g] = _mm512_and_si512(raw, low);
    hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
  }
  if constexpr (std::is_same_v<Packed, BlockQ5_Kx16>) {
    // The 5th bits: + 16 where bit g of the sub-block's plane byte is set (one plane load per
    // sub-block for all 8 vectors).
    const __m512i sixteen = _mm512_set1_epi8(16);
    const __m512i lo_plane = _mm512_loadu_si512(blk.qh[p][0]);
    const __m512i hi_plane = _mm512_loadu_si512(blk.qh[p][1]);
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i bit = _mm512_set1_epi8(char(1 << g));
      lo[g] = _mm512_mask_add_epi8(lo[g], _mm512_test_epi8_mask(lo_plane, bit), lo[g], sixteen);
      hi[g] = _mm512_mask_add_epi8(hi[g], _mm512_test_epi8_mask(hi_plane, bit), hi[g], sixteen);
    }
  }
}

// Vectors of a decoded Q4_K / Q5_K or Q6_K block: 4 pairs x 16, or 16 sub-blocks x 4.
constexpr int kDecodedBlockVectors = 64;

// kVectors vectors from a decoded buffer.
template <int kVectors>
inline void load_decoded(const __m512i* decoded, __m512i* v) {
#pragma GCC unroll 16
  for (int j = 0; j < kVectors; ++j) v[j] = _mm512_load_si512(decoded + j);
}

// Against this many tokens or more, each group is decoded once into a per-thread buffer that its
// token tiles then load (kDecoded below), instead of every tile decoding every block again.
// Measured with `vela bench matmul -t 1`, 5632 x 2048: at 512 tokens Q4_K 1.26x, Q5_K 1.32x,
// Q6_K 1.23x; Q4_K was 8% slower at 16 tokens and even at 24, Q6_K faster from 16 on.
constexpr int64_t kQ4_KDecodeOnceMinTokens = 32;
constexpr int64_t kQ6_KDecodeOnceMinTokens = 16;
// IQ4_XS: Q6_K's (a sub-block's 8 vectors cost 4 loads, 8 masks or shifts and 8 shuffles); not
// measured on its own.
constexpr int64_t kIQ4_XSDecodeOnceMinTokens = 16;
// Q3_K: as IQ4_XS (a shift, a mask, a test and a masked add per vector); not measured on its
// own.
constexpr int64_t kQ3_KDecodeOnceMinTokens = 16;
// Q2_K decodes every tile's blocks itself at any token count: a plane load gives 4 vectors for
// 3 operations each, and the decoded copy (4x the plane's bytes) measured slower, `vela bench
// matmul --type Q2_K -t 1` on a Zen 5, three alternations: 0.70-0.92x at 16 tokens, 0.76-1.02x
// at 32, 0.72-1.15x at 512.

// The nb blocks of group wg decoded into this thread's buffer by decode(block, out), block b at
// kDecodedBlockVectors b.
template <class Packed, class Decode>
const __m512i* decode_group(const Packed* wg, int64_t nb, Decode&& decode) {
  __m512i* out = thread_buffer<__m512i>(size_t(nb) * kDecodedBlockVectors);
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(wg + b, true);
    decode(wg[b], out + kDecodedBlockVectors * b);
  }
  return out;
}

// Q4_K / Q5_K: rows r < R (R <= 4: a super-block pair's 16 decoded vectors stay in registers) of
// the token tile against one group; Q5_K's 5th bits join the decoded nibbles by a masked add. Per
// super-block: each sub-block's exact dot for all 16 rows by vpdpbusd, scaled by the sub-block
// scales with vpmulld; the mins meet the activation block sums (int16 pairs) in vpdpwssd; then the
// reference's float operations.
// decoded: when kDecoded, every block of the group decoded (decode_group; pair p's low and high
// vectors at kDecodedBlockVectors b + 16 p).
template <class Packed, int R, bool kDecoded = false>
void group_tile_q4_k(const Packed* wg, int64_t nb, const __m512i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* bsum_pairs, float* y, int64_t y_stride,
                     bool streams) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_Kx16& wb = k_scales(wg[b]);
    const BlockQ8_K* a[R];
    __m512i dots[R], mins[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      dots[r] = _mm512_setzero_si512();
      mins[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      __m512i lo[8], hi[8];
      if constexpr (kDecoded) {
        load_decoded<8>(decoded + kDecodedBlockVectors * b + 16 * p, lo);
        load_decoded<8>(decoded + kDecodedBlockVectors * b + 16 * p + 8, hi);
      } else {
        prefetch_ahead_part<4>(wg + b, p, streams);
        decode_q4_k_pair(wg[b], p, lo, hi);
      }
      const __m512i sc_lo =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale[2 * p])));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale[2 * p + 1])));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int8_t* q = a[r]->qs + 64 * p;
        __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          d0 = _mm512_dpbusd_epi32(d0, lo[g], _mm512_set1_epi32(load_i32(q + 4 * g)));
          d1 = _mm512_dpbusd_epi32(d1, hi[g], _mm512_set1_epi32(load_i32(q + 32 + 4 * g)));
        }
        dots[r] = _mm512_add_epi32(dots[r], _mm512_add_epi32(_mm512_mullo_epi32(d0, sc_lo),
                                                             _mm512_mullo_epi32(d1, sc_hi)));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.d)));
    const __m512 dmw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.dmin)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i mp = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.min_pairs[k])));
      for (int r = 0; r < R; ++r)
        mins[r] =
            _mm512_dpwssd_epi32(mins[r], mp, _mm512_set1_epi32(bsum_pairs[(r * nb + b) * 4 + k]));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 ad = _mm512_set1_ps(a[r]->d);
      const __m512 d = _mm512_mul_ps(dw, ad);
      const __m512 m = _mm512_mul_ps(_mm512_mul_ps(dmw, ad), _mm512_cvtepi32_ps(mins[r]));
      acc[r] = _mm512_add_ps(acc[r], _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(dots[r]), m));
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// Sub-block s of a Q6_K block decoded: its 4 vectors of levels (0..63).
inline void decode_q6_k_sub(const BlockQ6_Kx16& wb, int s, __m512i q[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), high2 = _mm512_set1_epi8(0x30);
  const __m512i l01 = _mm512_loadu_si512(wb.ql[s][0]), l23 = _mm512_loadu_si512(wb.ql[s][1]);
  const __m512i h = _mm512_loadu_si512(wb.qh[s]);
  q[0] = _mm512_or_si512(_mm512_and_si512(l01, low4),
                         _mm512_and_si512(_mm512_slli_epi16(h, 4), high2));
  q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l01, 4), low4),
                         _mm512_and_si512(_mm512_slli_epi16(h, 2), high2));
  q[2] = _mm512_or_si512(_mm512_and_si512(l23, low4), _mm512_and_si512(h, high2));
  q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l23, 4), low4),
                         _mm512_and_si512(_mm512_srli_epi16(h, 2), high2));
}

// Sub-block s's scales of a Q6_K, IQ4_XS or Q3_K group, one int32 lane per row (the kernels that
// scale each sub-block's exact dot; their groups keep the rows' fp16 d and int8 scales alike).
template <class Packed>
inline __m512i sub_block_scales(const Packed& wb, int s) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale[s])));
}

// acc + a block's part of 16 rows' outputs from their scaled sub-block dots `sum` with an
// activation row of scale ad: the reference's float operations.
template <class Packed>
inline __m512 sub_block_acc(const Packed& wb, __m512i sum, float ad, __m512 acc) {
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.d)));
  return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(ad)), _mm512_cvtepi32_ps(sum), acc);
}

// start + the exact dot of one activation row's sub-block (its 16 values at qa) with the 4
// vectors of levels q, for all 16 rows: two chains of two, since a single row would otherwise wait
// on vpdpbusd latency.
inline __m512i q6_k_lone_sub_dot(const __m512i q[4], const int8_t* qa, __m512i start) {
  __m512i dot2 =
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[1], _mm512_set1_epi32(load_i32(qa + 4)));
  __m512i dot = _mm512_dpbusd_epi32(start, q[0], _mm512_set1_epi32(load_i32(qa)));
  dot2 = _mm512_dpbusd_epi32(dot2, q[3], _mm512_set1_epi32(load_i32(qa + 12)));
  dot = _mm512_dpbusd_epi32(dot, q[2], _mm512_set1_epi32(load_i32(qa + 8)));
  return _mm512_add_epi32(dot, dot2);
}

// Q6_K: rows r < R of the token tile against one group. Per sub-block: the 4 groups' levels
// (4 low bits | 2 high bits) decoded once for the tile, each row's exact dot by vpdpbusd starting
// from -32 * the activations' sub-block sum, times the sub-block scales with vpmulld.
// decoded: when kDecoded, every block of the group decoded (decode_group; sub-block s at
// kDecodedBlockVectors b + 4 s).
template <int R, bool kDecoded = false>
void group_tile_q6_k(const BlockQ6_Kx16* wg, int64_t nb, const __m512i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* starts, float* y, int64_t y_stride,
                     bool streams) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_Kx16& wb = wg[b];
    const BlockQ8_K* a[R];
    __m512i sum[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      sum[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int s = 0; s < 16; ++s) {
      __m512i q[4];
      if constexpr (kDecoded) {
        load_decoded<4>(decoded + kDecodedBlockVectors * b + 4 * s, q);
      } else {
        prefetch_ahead_part<16>(wg + b, s, streams);
        decode_q6_k_sub(wb, s, q);
      }
      const __m512i sc = sub_block_scales(wb, s);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 16 * s;
        __m512i dot = _mm512_set1_epi32(starts[(r * nb + b) * 16 + s]);
        if constexpr (R == 1) {
          dot = q6_k_lone_sub_dot(q, qa, dot);
        } else {
#pragma GCC unroll 4
          for (int g = 0; g < 4; ++g)
            dot = _mm512_dpbusd_epi32(dot, q[g], _mm512_set1_epi32(load_i32(qa + 4 * g)));
        }
        sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(dot, sc));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = sub_block_acc(wb, sum[r], a[r]->d, acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// One activation row against S groups of a weight stream from memory (group i's nb blocks at
// wg + i * apart, its 16 outputs at y + i * y_apart), walked in lockstep a sub-block at a time: S
// weight streams in flight at once, as the nibble types' lone rows (for_lone_group_pairs). The
// same integer dots and float steps as group_tile_q6_k<1>, so the same outputs.
template <int S>
void lone_row_groups_q6_k(const BlockQ6_Kx16* wg, int64_t apart, int64_t nb, const uint8_t* act,
                          const int32_t* starts, float* y, int64_t y_apart) {
  __m512 acc[S];
  for (int i = 0; i < S; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(act) + b;
    __m512i sum[S];
    for (int i = 0; i < S; ++i) sum[i] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int s = 0; s < 16; ++s) {
#pragma GCC unroll 2
      for (int i = 0; i < S; ++i) {
        const BlockQ6_Kx16& wb = wg[i * apart + b];
        prefetch_ahead_part<16>(&wb, s, true);
        __m512i q[4];
        decode_q6_k_sub(wb, s, q);
        const __m512i dot =
            q6_k_lone_sub_dot(q, a->qs + 16 * s, _mm512_set1_epi32(starts[b * 16 + s]));
        sum[i] = _mm512_add_epi32(sum[i], _mm512_mullo_epi32(dot, sub_block_scales(wb, s)));
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < S; ++i) acc[i] = sub_block_acc(wg[i * apart + b], sum[i], a->d, acc[i]);
  }
  for (int i = 0; i < S; ++i) _mm512_storeu_ps(y + i * y_apart, acc[i]);
}

// Sub-block j of an IQ4_XS block decoded: its 8 vectors of levels + 128 (1..241, unsigned for
// vpdpbusd), each looked up from its nibbles by one byte shuffle of IQ4_NL's biased table.
inline void decode_iq4_xs_sub(const BlockIQ4_XSx16& wb, int j, __m512i q[8]) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(
      reinterpret_cast<const __m128i*>(NibbleTraits<BlockIQ4_NLx16>::kBiasedLevels.data())));
  static_assert(NibbleTraits<BlockIQ4_NLx16>::kBias == kCodebookPackedBias);
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) {
    const __m512i raw = _mm512_loadu_si512(wb.qs[j][v]);
    q[v] = _mm512_shuffle_epi8(table, _mm512_and_si512(raw, low));
    q[v + 4] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(raw, 4), low));
  }
}

// IQ4_XS: rows r < R of the token tile against one group, as Q6_K's: per 32-element sub-block the
// 8 vectors of biased levels decoded once for the tile, each row's exact dot by vpdpbusd starting
// from -128 * the activations' sub-block sum (starts), times the sub-block scales (ls - 32) with
// vpmulld. decoded: when kDecoded, every block of the group decoded (decode_group; sub-block j at
// kDecodedBlockVectors b + 8 j).
template <int R, bool kDecoded = false>
void group_tile_iq4_xs(const BlockIQ4_XSx16* wg, int64_t nb, const __m512i* decoded,
                       const uint8_t* act, size_t act_stride, const int32_t* starts, float* y,
                       int64_t y_stride, bool streams) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XSx16& wb = wg[b];
    const BlockQ8_K* a[R];
    __m512i sum[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      sum[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int j = 0; j < 8; ++j) {
      __m512i q[8];
      if constexpr (kDecoded) {
        load_decoded<8>(decoded + kDecodedBlockVectors * b + 8 * j, q);
      } else {
        // Hints pay in tiles of four tokens or more; without them a lone token's row ran 15-20%
        // faster (its loads keep ahead of the decode on their own).
        if constexpr (R >= 4) prefetch_ahead_part<8>(wg + b, j, streams);
        decode_iq4_xs_sub(wb, j, q);
      }
      const __m512i sc = sub_block_scales(wb, j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 32 * j;
        // Two chains of four: one chain of eight would wait on vpdpbusd latency.
        __m512i dot = _mm512_set1_epi32(starts[(r * nb + b) * 8 + j]);
        __m512i dot2 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          dot = _mm512_dpbusd_epi32(dot, q[v], _mm512_set1_epi32(load_i32(qa + 4 * v)));
          dot2 = _mm512_dpbusd_epi32(dot2, q[v + 4], _mm512_set1_epi32(load_i32(qa + 16 + 4 * v)));
        }
        sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(_mm512_add_epi32(dot, dot2), sc));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = sub_block_acc(wb, sum[r], a[r]->d, acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// The driver of the kernels that scale each sub-block's exact dot (Q6_K, IQ4_XS, Q3_K): from
// min_tokens tokens on, each group decoded once into this thread's buffer (decode_block), then
// the group's token tiles (tile_for(rows, decoded) gives the tile function); kStarts activation
// start sums per block and token.
template <class Packed, int kStarts, class DecodeBlock, class TileFor>
void gemm_sub_blocks(const PackedGemmArgs& p, GgmlType type, int64_t min_tokens,
                     DecodeBlock&& decode_block, TileFor&& tile_for) {
  const int64_t nb = p.n_cols / kPackedSuperK;
  const int32_t* starts = packed_act_sums(type, p);
  const auto* w = static_cast<const Packed*>(p.w);
  const bool decode_once = p.n_act >= min_tokens;
  for (int64_t g = 0; g < p.n_groups; ++g) {
    const __m512i* decoded = decode_once ? decode_group(w + g * nb, nb, decode_block) : nullptr;
    for_row_tiles(p.n_act, [&](auto tile, int64_t t) {
      tile_for(tile, decode_once)(w + g * nb, nb, decoded, p.act + size_t(t) * p.act_stride,
                                  p.act_stride, starts + t * nb * kStarts,
                                  p.y + t * p.y_stride + g * kPackedRows, p.y_stride, t == 0);
    });
  }
}

void gemm_iq4_xs(const PackedGemmArgs& p) {
  gemm_sub_blocks<BlockIQ4_XSx16, 8>(
      p, GgmlType::IQ4_XS, kIQ4_XSDecodeOnceMinTokens,
      [](const BlockIQ4_XSx16& wb, __m512i* out) {
        for (int j = 0; j < 8; ++j) decode_iq4_xs_sub(wb, j, out + 8 * j);
      },
      [](auto tile, bool decoded) {
        return decoded ? group_tile_iq4_xs<decltype(tile)::value, true>
                       : group_tile_iq4_xs<decltype(tile)::value, false>;
      });
}

// Sub-block pair p (sub-blocks 2p, 2p + 1) of a Q3_K block decoded: its 8 vectors of q (level
// + 4, 0..7, unsigned for vpdpbusd), vectors 0-3 sub-block 2p's, 4-7 sub-block 2p + 1's. Vector v
// is its 2-bit field of the low plane shifted down and masked, plus 4 where bit v of the high
// plane is set (one vptestmb and one masked add, as Q5_K's 5th bits): 3 loads for 8 vectors.
inline void decode_q3_k_pair(const BlockQ3_Kx16& wb, int p, __m512i q[8]) {
  const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  const __m512i low[2] = {_mm512_loadu_si512(wb.ql[2 * p]), _mm512_loadu_si512(wb.ql[2 * p + 1])};
  const __m512i high = _mm512_loadu_si512(wb.qh[p]);
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) {
    const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(low[v / 4], 2 * (v % 4)), three);
    q[v] = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(high, _mm512_set1_epi8(char(1 << v))), lo,
                                four);
  }
}

// Q3_K: rows r < R of the token tile against one group, as IQ4_XS's with 16-element sub-blocks:
// per sub-block pair the 8 vectors of q decoded once for the tile, each sub-block's exact dot by
// vpdpbusd (one chain of four vectors each) starting from -4 * the activations' sub-block sum
// (starts), times its scale (s - 32) with vpmulld. decoded: when kDecoded, every block of the group
// decoded (decode_group; pair p at kDecodedBlockVectors b + 8 p).
template <int R, bool kDecoded = false>
void group_tile_q3_k(const BlockQ3_Kx16* wg, int64_t nb, const __m512i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* starts, float* y, int64_t y_stride,
                     bool streams) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_Kx16& wb = wg[b];
    const BlockQ8_K* a[R];
    __m512i sum[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      sum[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int p = 0; p < 8; ++p) {
      __m512i q[8];
      if constexpr (kDecoded) {
        load_decoded<8>(decoded + kDecodedBlockVectors * b + 8 * p, q);
      } else {
        prefetch_ahead_part<8>(wg + b, p, streams);
        decode_q3_k_pair(wb, p, q);
      }
      const __m512i sc0 = sub_block_scales(wb, 2 * p);
      const __m512i sc1 = sub_block_scales(wb, 2 * p + 1);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 32 * p;
        const int32_t* st = starts + (r * nb + b) * 16 + 2 * p;
        __m512i dot = _mm512_set1_epi32(st[0]);
        __m512i dot2 = _mm512_set1_epi32(st[1]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          dot = _mm512_dpbusd_epi32(dot, q[v], _mm512_set1_epi32(load_i32(qa + 4 * v)));
          dot2 = _mm512_dpbusd_epi32(dot2, q[v + 4], _mm512_set1_epi32(load_i32(qa + 16 + 4 * v)));
        }
        sum[r] = _mm512_add_epi32(
            sum[r], _mm512_add_epi32(_mm512_mullo_epi32(dot, sc0), _mm512_mullo_epi32(dot2, sc1)));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = sub_block_acc(wb, sum[r], a[r]->d, acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

void gemm_q3_k(const PackedGemmArgs& p) {
  gemm_sub_blocks<BlockQ3_Kx16, 16>(
      p, GgmlType::Q3_K, kQ3_KDecodeOnceMinTokens,
      [](const BlockQ3_Kx16& wb, __m512i* out) {
        for (int j = 0; j < 8; ++j) decode_q3_k_pair(wb, j, out + 8 * j);
      },
      [](auto tile, bool decoded) {
        return decoded ? group_tile_q3_k<decltype(tile)::value, true>
                       : group_tile_q3_k<decltype(tile)::value, false>;
      });
}

// Sub-block pair p (sub-blocks 2p, 2p + 1) of a Q2_K block decoded: its 8 vectors of sc_j * q
// (0..45, unsigned for vpdpbusd), vectors 0-3 sub-block 2p's, 4-7 sub-block 2p + 1's, so that the
// tiles' dots come out scaled, without Q3_K's vpmulld per sub-block and row. Vector v is its
// 2-bit field of the plane shifted down and masked, times its rows' scales by vpmullw: a 16-bit
// lane of bytes b0, b1 times sc is b0 sc + 256 b1 sc, both products under 256, so exact per byte.
inline void decode_q2_k_pair(const BlockQ2_Kx16& wb, int p, __m512i q[8]) {
  const __m512i three = _mm512_set1_epi8(3);
  // [16 rows] dword n: the scale / min bytes of row n's sub-blocks 2p (low word) and 2p + 1.
  const __m512i sm =
      _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scale_min[p])));
  const __m512i sc = _mm512_and_si512(sm, _mm512_set1_epi16(0x0F));
  // [2 sub-blocks][16 rows] each scale in both words of its row's dword (vpmullw's operand).
  const __m512i scale[2] = {
      _mm512_shuffle_epi8(sc, _mm512_broadcast_i32x4(
                                  _mm_setr_epi32(0x01000100, 0x05040504, 0x09080908, 0x0D0C0D0C))),
      _mm512_shuffle_epi8(sc, _mm512_broadcast_i32x4(
                                  _mm_setr_epi32(0x03020302, 0x07060706, 0x0B0A0B0A, 0x0F0E0F0E)))};
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {
    const __m512i raw = _mm512_loadu_si512(wb.qs[2 * p + k]);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v)
      q[4 * k + v] =
          _mm512_mullo_epi16(_mm512_and_si512(_mm512_srli_epi16(raw, 2 * v), three), scale[k]);
  }
}

// Q2_K: rows r < R of the token tile against one group. Per sub-block pair the 8 vectors of
// sc * q decoded for the tile (decode_q2_k_pair), each row's scaled dot by vpdpbusd alone
// (kChains chains per row: one chain waits on vpdpbusd latency, 8 rows keep 8 in flight); the
// mins meet the activations' sub-block sum pairs in vpdpwssd; then the reference's float
// operations, as Q4_K's.
template <int R>
void group_tile_q2_k(const BlockQ2_Kx16* wg, int64_t nb, const uint8_t* act, size_t act_stride,
                     const int32_t* sum_pairs, float* y, int64_t y_stride, bool streams) {
  constexpr int kChains = R <= 2 ? 4 : R <= 4 ? 2 : 1;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ2_Kx16& wb = wg[b];
    const BlockQ8_K* a[R];
    __m512i dots[kChains][R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      for (int c = 0; c < kChains; ++c) dots[c][r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int p = 0; p < 8; ++p) {
      __m512i q[8];
      prefetch_ahead_part<8>(wg + b, p, streams);
      decode_q2_k_pair(wb, p, q);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 32 * p;
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v)
          dots[v % kChains][r] = _mm512_dpbusd_epi32(dots[v % kChains][r], q[v],
                                                     _mm512_set1_epi32(load_i32(qa + 4 * v)));
      }
    }
    __m512i mins[R];
    for (int r = 0; r < R; ++r) mins[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      // [16 rows] (m_2k, m_2k+1) as int16 pairs: the high nibbles of the widened bytes.
      const __m512i mp = _mm512_srli_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256(
                                               reinterpret_cast<const __m256i*>(wb.scale_min[k]))),
                                           4);
      for (int r = 0; r < R; ++r)
        mins[r] =
            _mm512_dpwssd_epi32(mins[r], mp, _mm512_set1_epi32(sum_pairs[(r * nb + b) * 8 + k]));
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.d)));
    const __m512 dmw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.dmin)));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512i dot = dots[0][r];
      for (int c = 1; c < kChains; ++c) dot = _mm512_add_epi32(dot, dots[c][r]);
      const __m512 ad = _mm512_set1_ps(a[r]->d);
      const __m512 d = _mm512_mul_ps(dw, ad);
      const __m512 m = _mm512_mul_ps(_mm512_mul_ps(dmw, ad), _mm512_cvtepi32_ps(mins[r]));
      acc[r] = _mm512_add_ps(acc[r], _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(dot), m));
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// The formats on the 2-bit plane (Q2_K, TQ2_0): every token tile against every group, each with
// its tokens' kSumsPerBlock activation sums per block. tile_for(std::integral_constant<int, R>)
// gives the format's tile of R tokens.
template <class Packed, GgmlType kType, int kSumsPerBlock, class TileFor>
void gemm_two_bit(const PackedGemmArgs& p, TileFor tile_for) {
  const int64_t nb = p.n_cols / kPackedSuperK;
  const int32_t* sums = packed_act_sums(kType, p);
  const auto* w = static_cast<const Packed*>(p.w);
  for (int64_t g = 0; g < p.n_groups; ++g)
    for_row_tiles(p.n_act, [&](auto tile, int64_t t) {
      tile_for(tile)(w + g * nb, nb, p.act + size_t(t) * p.act_stride, p.act_stride,
                     sums + t * nb * kSumsPerBlock, p.y + t * p.y_stride + g * kPackedRows,
                     p.y_stride, t == 0);
    });
}

void gemm_q2_k(const PackedGemmArgs& p) {
  gemm_two_bit<BlockQ2_Kx16, GgmlType::Q2_K, 8>(
      p, [](auto tile) { return group_tile_q2_k<decltype(tile)::value>; });
}

// TQ2_0: rows r < R of the token tile against one group. Per sub-block the plane's 4 vectors of
// q (0..3: a shift and a mask each), each row's dot by vpdpbusd from the block's start (-1 * the
// activations' sum: the levels are q - 1) in kChains chains; then super_block_step's one fma,
// as the row-wise kernels of the type.
template <int R>
void group_tile_tq2_0(const BlockTQ2_0x16* wg, int64_t nb, const uint8_t* act, size_t act_stride,
                      const int32_t* starts, float* y, int64_t y_stride, bool streams) {
  constexpr int kChains = R <= 2 ? 4 : R <= 4 ? 2 : 1;
  const __m512i three = _mm512_set1_epi8(3);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockTQ2_0x16& wb = wg[b];
    const BlockQ8_K* a[R];
    __m512i dots[kChains][R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      dots[0][r] = _mm512_set1_epi32(starts[r * nb + b]);
      for (int c = 1; c < kChains; ++c) dots[c][r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int j = 0; j < 16; ++j) {
      prefetch_ahead_part<16>(wg + b, j, streams);
      const __m512i raw = _mm512_loadu_si512(wb.qs[j]);
      __m512i q[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) q[v] = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * v), three);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 16 * j;
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          __m512i& dot = dots[(4 * j + v) % kChains][r];
          dot = _mm512_dpbusd_epi32(dot, q[v], _mm512_set1_epi32(load_i32(qa + 4 * v)));
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.d)));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512i dot = dots[0][r];
      for (int c = 1; c < kChains; ++c) dot = _mm512_add_epi32(dot, dots[c][r]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(a[r]->d)),
                               acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

void gemm_tq2_0(const PackedGemmArgs& p) {
  gemm_two_bit<BlockTQ2_0x16, GgmlType::TQ2_0, 1>(
      p, [](auto tile) { return group_tile_tq2_0<decltype(tile)::value>; });
}

void gemm_q6_k(const PackedGemmArgs& p) {
  if (p.n_act == 1) {
    const int64_t nb = p.n_cols / kPackedSuperK;
    const int32_t* starts = packed_act_sums(GgmlType::Q6_K, p);
    const auto* w = static_cast<const BlockQ6_Kx16*>(p.w);
    for_lone_group_pairs(p.n_groups, [&](auto streams, int64_t g, int64_t apart) {
      lone_row_groups_q6_k<decltype(streams)::value>(w + g * nb, apart * nb, nb, p.act, starts,
                                                     p.y + g * kPackedRows, apart * kPackedRows);
    });
    return;
  }
  gemm_sub_blocks<BlockQ6_Kx16, 16>(
      p, GgmlType::Q6_K, kQ6_KDecodeOnceMinTokens,
      [](const BlockQ6_Kx16& wb, __m512i* out) {
        for (int s = 0; s < 16; ++s) decode_q6_k_sub(wb, s, out + 4 * s);
      },
      [](auto tile, bool decoded) {
        return decoded ? group_tile_q6_k<decltype(tile)::value, true>
                       : group_tile_q6_k<decltype(tile)::value, false>;
      });
}

// Q4_K and Q5_K (Packed: BlockQ4_Kx16 / BlockQ5_Kx16).
template <class Packed>
void gemm_q4_k(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedSuperK;
  const int32_t* pairs = packed_act_sums(GgmlType::Q4_K, p);  // Q5_K's are the same
  const auto* w = static_cast<const Packed*>(p.w);
  const bool decode_once = p.n_act >= kQ4_KDecodeOnceMinTokens;
  for (int64_t g = 0; g < p.n_groups; ++g) {
    const __m512i* decoded = nullptr;
    if (decode_once)
      decoded = decode_group(w + g * nb, nb, [](const Packed& blk, __m512i* out) {
        for (int pair = 0; pair < 4; ++pair)
          decode_q4_k_pair(blk, pair, out + 16 * pair, out + 16 * pair + 8);
      });
    const auto run = [&](auto tile, int64_t t) {
      const auto fn = decode_once ? group_tile_q4_k<Packed, decltype(tile)::value, true>
                                  : group_tile_q4_k<Packed, decltype(tile)::value, false>;
      fn(w + g * nb, nb, decoded, p.act + size_t(t) * p.act_stride, p.act_stride,
         pairs + t * nb * 4, p.y + t * p.y_stride + g * kPackedRows, p.y_stride, t == 0);
    };
    // Tiles of 4 (the accumulators of more rows would not stay in registers), then one of the
    // rest: a verification of 3 tokens is one tile, not 2 + 1.
    int64_t t = 0;
    for (; t + 4 <= p.n_act; t += 4) run(std::integral_constant<int, 4>{}, t);
    if (p.n_act - t == 3) run(std::integral_constant<int, 3>{}, t), t += 3;
    if (t + 2 <= p.n_act) run(std::integral_constant<int, 2>{}, t), t += 2;
    if (t < p.n_act) run(std::integral_constant<int, 1>{}, t);
  }
}

}  // namespace
}  // namespace avx512

PackedGemmFn packed_gemm_k_avx512_vnni(GgmlType w_type) {
  using namespace avx512;  // NOLINT(build/namespaces): the kernels of this file
  switch (w_type) {
    case GgmlType::Q4_K:
      return gemm_q4_k<BlockQ4_Kx16>;
    case GgmlType::Q5_K:
      return gemm_q4_k<BlockQ5_Kx16>;
    case GgmlType::Q6_K:
      return gemm_q6_k;
    case GgmlType::IQ4_XS:
      return gemm_iq4_xs;
    case GgmlType::Q3_K:
      return gemm_q3_k;
    case GgmlType::Q2_K:
      return gemm_q2_k;
    case GgmlType::TQ2_0:
      return gemm_tq2_0;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

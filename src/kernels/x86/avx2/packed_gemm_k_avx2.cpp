// AVX2 kernels for 16-row interleaved Q4_K, Q5_K, Q6_K, IQ4_XS and Q3_K weights (packed_gemm.h),
// on the int8 scheme of packed_gemm_avx2.cpp: exact integer sums per sub-block by vpmaddubsw and
// vpmaddwd, scaled by the sub-block scales in int32, then the reference's float steps per
// super-block, so results are bit-identical to the scalar reference and to the AVX-512 kernels. A
// lone token walks two groups' weight streams in lockstep; token tiles take both halves of a group
// vector by vector, or load a group decoded once from enough tokens on.
#include <type_traits>

#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/packed_gemm_avx2_common.h"
#include "quant/blocks.h"
#include "quant/blocks_nonlinear4.h"

namespace vela::kernels {
namespace avx2 {
namespace {

// Vector g of sub-block sub (a pair's low or high nibbles) of rows 8h .. 8h + 7 of a Q4_K block,
// decoded.
inline __m256i decode_q4_k_vector(const BlockQ4_Kx16& wb, int sub, int h, int g) {
  const __m256i raw = loadu256(wb.qs[sub / 2][g][kHalfRows * h]);
  return _mm256_and_si256(sub % 2 ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
}

// Sub-block sub of rows 8h .. 8h + 7 of a Q4_K block, decoded.
inline void decode_q4_k_sub(const BlockQ4_Kx16& wb, int sub, int h, __m256i w[8]) {
  VELA_UNROLL
  for (int g = 0; g < 8; ++g) w[g] = decode_q4_k_vector(wb, sub, h, g);
}

// The same of a Q5_K block: the nibbles, plus the 5th bits from the sub-block's plane.
inline void decode_q4_k_sub(const BlockQ5_Kx16& wb, int sub, int h, __m256i w[8]) {
  decode_q4_k_sub(wb.low, sub, h, w);
  join_high_bits(wb.qh[sub / 2][sub % 2] + kHalfRows * h, w);
}

// A lone row's sub-blocks 2p and 2p + 1 of rows 8h .. 8h + 7 of a Q4_K or Q5_K block (the low and
// high nibbles of the same bytes) against its activation quants q (64 of them): dots plus each
// sub-block's exact sum times its scale. Each byte vector is loaded once for both sub-blocks
// (nibble_pair_products), so that no vector of levels waits in a register (or on the stack).
// `vela bench matmul --rows 2048 --working-set-mib 8 --tokens 1 -t 1` (in L3) on a Zen 3, three
// alternations against decoding each sub-block's 8 vectors first: Q4_K 1.35x, Q5_K 1.27x; from
// memory with one thread 1.07x and 1.11x.
template <class Packed, int kInt16Terms>
inline __m256i lone_sub_pair_q4_k(const Packed& blk, int p, int h, const int8_t* q, __m256i dots) {
  constexpr bool kHighBit = std::is_same_v<Packed, BlockQ5_Kx16>;
  const BlockQ4_Kx16& wb = k_scales(blk);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i plane_lo = _mm256_setzero_si256(), plane_hi = plane_lo;
  if constexpr (kHighBit) {
    plane_lo = loadu256(blk.qh[p][0] + kHalfRows * h);
    plane_hi = loadu256(blk.qh[p][1] + kHalfRows * h);
  }
  __m256i d_lo = _mm256_setzero_si256(), d_hi = d_lo;
  VELA_UNROLL
  for (int g0 = 0; g0 < 8; g0 += kInt16Terms) {
    __m256i s_lo = _mm256_setzero_si256(), s_hi = s_lo;
    VELA_UNROLL
    for (int g = g0; g < g0 + kInt16Terms; ++g)
      nibble_pair_products<kHighBit>(loadu256(wb.qs[p][g][kHalfRows * h]), plane_lo, g, plane_hi, g,
                                     q + 4 * g, q + 32 + 4 * g, g == g0, s_lo, s_hi);
    d_lo = _mm256_add_epi32(d_lo, _mm256_madd_epi16(s_lo, ones));
    d_hi = _mm256_add_epi32(d_hi, _mm256_madd_epi16(s_hi, ones));
  }
  const auto scale = [&](int sub) {
    return _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[sub] + kHalfRows * h)));
  };
  dots = _mm256_add_epi32(dots, _mm256_mullo_epi32(d_lo, scale(2 * p)));
  return _mm256_add_epi32(dots, _mm256_mullo_epi32(d_hi, scale(2 * p + 1)));
}

// The reference's float steps for half h of a Q4_K/Q5_K block (wb: its scales) against
// activation block a (block_pairs: its 4 sums of sub-block pairs): acc plus d * dots minus
// dmin * the mins times those sums.
inline __m256 finish_half_block_q4_k(const BlockQ4_Kx16& wb, int h, __m256i dots,
                                     const BlockQ8_K& a, const int32_t* block_pairs, __m256 acc) {
  const __m256 dw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d + kHalfRows * h)));
  const __m256 dmw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin + kHalfRows * h)));
  __m256i mins = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256i mp = _mm256_cvtepu8_epi16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.min_pairs[k][kHalfRows * h])));
    mins = _mm256_add_epi32(mins, _mm256_madd_epi16(mp, _mm256_set1_epi32(block_pairs[k])));
  }
  const __m256 ad = _mm256_set1_ps(a.d);
  const __m256 d = _mm256_mul_ps(dw, ad);
  const __m256 m = _mm256_mul_ps(_mm256_mul_ps(dmw, ad), _mm256_cvtepi32_ps(mins));
  return _mm256_add_ps(acc, _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(dots), m));
}

// A lone row's step p of a Q4_K or Q5_K block (sub-blocks 2p and 2p + 1, lone_sub_pair_q4_k)
// on rows 8h .. 8h + 7 against activation block a: dots plus their scaled sums.
template <class Packed>
inline __m256i lone_step_q4_k(const Packed& blk, int p, int h, const BlockQ8_K& a, __m256i dots) {
  // Opaque, so that each (group, half) of lone_row_k loads its own activation broadcasts: GCC
  // otherwise broadcast them once for all four and spilled them (49 stack accesses per step of
  // both streams, 4 with this).
  const int8_t* q = a.qs + 64 * p;
  asm volatile("" : "+r"(q));
  return lone_sub_pair_q4_k < Packed,
         std::is_same_v<Packed, BlockQ5_Kx16> ? 4 : 8 > (blk, p, h, q, dots);
}

// Q4_K and Q5_K (Packed: BlockQ4_Kx16, BlockQ5_Kx16): rows r < R of the token tile against both
// halves of one group, each block read once for both, sub-block by sub-block and vector by vector:
// each vector of levels (decoded here, or loaded from decoded when kDecoded: half h of block b's
// sub-block sub at decoded + 64 (h nb + b) + 8 sub) serves the R rows, and each activation
// broadcast both halves, as the nibble formats' group_tile. Pair sums by vpmaddubsw add up exactly
// in int16 (4-bit levels: all 8, at most 8 * 2 * 15 * 127; 5-bit: 4 at a time, at most 4 * 2 * 31
// * 127) in both_halves_pair_sums, and one vpmaddwd by the sub-block scale (in both 16-bit halves
// of each row's lane) adds and scales them. `vela bench matmul -t 1` on a Zen 3, two alternations,
// against a half of 2 rows at a time (vpmaddwd by ones, then vpmulld): Q4_K 1.6x at 2 tokens, 1.8x
// at 4, 1.35-1.55x at 8-16, 1.25x at 32-512; Q5_K 2.2x at 2, 1.8x at 4, 1.4x at 8, 1.1-1.2x at
// 16-512. A lone row (R = 1, not decoded) goes to lone_row_k instead.
// Then the mins by vpmaddwd with the activation sums and the reference's float steps.
template <class Packed, int R, bool kDecoded>
void group_tile_q4_k(const Packed* wg, int64_t nb, const __m256i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* pairs, float* y, int64_t y_stride) {
  constexpr bool kHighBit = std::is_same_v<Packed, BlockQ5_Kx16>;
  constexpr int kInt16Terms = kHighBit ? 4 : 8;
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_Kx16& wb = k_scales(wg[b]);
    const BlockQ8_K* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
    __m256i dots[2][R];  // each (half, row)'s sub-block sums times their scales
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r) dots[h][r] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < 8; ++sub) {
      if constexpr (!kDecoded) prefetch_ahead_slice<Packed, 8>(wg + b, sub);
      __m256i scale[2], plane[2];
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const __m256i s32 = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[sub] + kHalfRows * h)));
        scale[h] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
        if constexpr (kHighBit && !kDecoded)
          plane[h] = loadu256(wg[b].qh[sub / 2][sub % 2] + kHalfRows * h);
      }
      VELA_UNROLL
      for (int g0 = 0; g0 < 8; g0 += kInt16Terms) {
        __m256i s16[2][R];
        both_halves_pair_sums<R, kInt16Terms>(
            [&](int h, int i) {
              const int g = g0 + i;
              if constexpr (kDecoded)
                return _mm256_load_si256(decoded + 64 * (h * nb + b) + 8 * sub + g);
              else if constexpr (kHighBit)
                return _mm256_or_si256(decode_q4_k_vector(wb, sub, h, g),
                                       high_bits_of(plane[h], g));
              else
                return decode_q4_k_vector(wb, sub, h, g);
            },
            [&](int r, int i) { return a[r]->qs + 32 * sub + 4 * (g0 + i); }, s16);
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) VELA_UNROLL
        for (int r = 0; r < R; ++r)
          dots[h][r] = _mm256_add_epi32(dots[h][r], _mm256_madd_epi16(s16[h][r], scale[h]));
      }
    }
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r)
      acc[h][r] =
          finish_half_block_q4_k(wb, h, dots[h][r], *a[r], pairs + (r * nb + b) * 4, acc[h][r]);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// Vector v of sub-block sub of rows 8h .. 8h + 7 of a Q6_K block, decoded: levels 0..63, the low 4
// bits from ql (vectors 0-1: the low and high nibbles of ql[sub][0], 2-3 of ql[sub][1]) and bits
// 2v, 2v + 1 of qh's bytes moved to bits 4-5.
inline __m256i decode_q6_k_vector(const BlockQ6_Kx16& wb, int sub, int h, int v) {
  const __m256i l = loadu256(wb.ql[sub][v / 2][kHalfRows * h]);
  const __m256i hb = loadu256(wb.qh[sub][kHalfRows * h]);
  const __m256i low = _mm256_and_si256(v % 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0F));
  const __m256i high = v == 0   ? _mm256_slli_epi16(hb, 4)
                       : v == 1 ? _mm256_slli_epi16(hb, 2)
                       : v == 2 ? hb
                                : _mm256_srli_epi16(hb, 2);
  return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
}

// Sub-block sub of rows 8h .. 8h + 7 of a Q6_K block, decoded: its 4 vectors of levels.
inline void decode_q6_k_sub(const BlockQ6_Kx16& wb, int sub, int h, __m256i q[4]) {
  VELA_UNROLL
  for (int v = 0; v < 4; ++v) q[v] = decode_q6_k_vector(wb, sub, h, v);
}

// The reference's float steps for half h of a Q6_K or IQ4_XS block against activation block a: acc
// plus d * a.d * the block's scaled sub-block sums.
template <class Packed>
inline __m256 finish_half_block_q6_k(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                                     __m256 acc) {
  const __m256 dw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d + kHalfRows * h)));
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a.d)), _mm256_cvtepi32_ps(sum), acc);
}

// A lone row's step sub of a Q6_K block (sub-block sub, its 4 vectors of levels decoded in turn) on
// rows 8h .. 8h + 7 against activation block a (starts: its 16 start sums): sum plus the
// sub-block's scaled sum. Two vpmaddubsw pair sums add up exactly in int16 (at most 2 * 2 * 63 *
// 127), vpmaddwd by ones, the sum starts from -32 * the activations' sub-block sum and is scaled
// by the sub-block scales with vpmulld.
inline __m256i lone_step_q6_k(const BlockQ6_Kx16& wb, int sub, int h, const BlockQ8_K& a,
                              const int32_t* starts, __m256i sum) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* qa = a.qs + 16 * sub;
  __m256i q[4];
  decode_q6_k_sub(wb, sub, h, q);
  const __m256i s01 =
      _mm256_add_epi16(_mm256_maddubs_epi16(q[0], _mm256_set1_epi32(load_i32(qa))),
                       _mm256_maddubs_epi16(q[1], _mm256_set1_epi32(load_i32(qa + 4))));
  const __m256i s23 =
      _mm256_add_epi16(_mm256_maddubs_epi16(q[2], _mm256_set1_epi32(load_i32(qa + 8))),
                       _mm256_maddubs_epi16(q[3], _mm256_set1_epi32(load_i32(qa + 12))));
  const __m256i dot = _mm256_add_epi32(
      _mm256_set1_epi32(starts[sub]),
      _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones)));
  const __m256i scale = _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[sub] + kHalfRows * h)));
  return _mm256_add_epi32(sum, _mm256_mullo_epi32(dot, scale));
}

// Q6_K: rows r < R of the token tile against both halves of one group, sub-block by sub-block
// (16 elements, 4 vectors of levels). Two vpmaddubsw pair sums add up exactly in int16 (at most
// 2 * 2 * 63 * 127), vpmaddwd by ones, the sum starts from -32 * the activations' sub-block sum
// and is scaled by the sub-block scales with vpmulld. Vector by vector, each vector (decoded here,
// or loaded from decoded when kDecoded: half h of block b's sub-block sub at decoded + 64 (h nb +
// b) + 4 sub) serving the R rows and each activation broadcast both halves, as group_tile. `vela
// bench matmul -t 1` on a Zen 3, two alternations, against a half of 4 rows at a time: 1.4-1.5x at
// 2 tokens, 1.25x at 4, 1.05-1.1x at 8-16, the same from 32 on. A lone row (R = 1, not decoded)
// goes to lone_row_k instead.
template <int R, bool kDecoded>
void group_tile_q6_k(const BlockQ6_Kx16* wg, int64_t nb, const __m256i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* starts, float* y, int64_t y_stride) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_Kx16& wb = wg[b];
    const BlockQ8_K* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
    const auto start = [&](int r, int sub) { return starts[size_t((r * nb + b) * 16 + sub)]; };
    __m256i sum[2][R];  // each (half, row)'s sub-block sums times their scales
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r) sum[h][r] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < 16; ++sub) {
      __m256i scale[2];
      VELA_UNROLL
      for (int h = 0; h < 2; ++h)
        scale[h] = _mm256_cvtepi8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[sub] + kHalfRows * h)));
      if constexpr (!kDecoded) prefetch_ahead_slice<BlockQ6_Kx16, 16>(&wb, sub);
      __m256i dot[2][R];
      VELA_UNROLL
      for (int r = 0; r < R; ++r) dot[0][r] = dot[1][r] = _mm256_set1_epi32(start(r, sub));
      VELA_UNROLL
      for (int v0 = 0; v0 < 4; v0 += 2) {
        __m256i s16[2][R];
        both_halves_pair_sums<R, 2>(
            [&](int h, int i) {
              return kDecoded ? _mm256_load_si256(decoded + 64 * (h * nb + b) + 4 * sub + v0 + i)
                              : decode_q6_k_vector(wb, sub, h, v0 + i);
            },
            [&](int r, int i) { return a[r]->qs + 16 * sub + 4 * (v0 + i); }, s16);
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) VELA_UNROLL
        for (int r = 0; r < R; ++r)
          dot[h][r] = _mm256_add_epi32(dot[h][r], _mm256_madd_epi16(s16[h][r], ones));
      }
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) VELA_UNROLL
      for (int r = 0; r < R; ++r)
        sum[h][r] = _mm256_add_epi32(sum[h][r], _mm256_mullo_epi32(dot[h][r], scale[h]));
    }
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r)
      acc[h][r] = finish_half_block_q6_k(wb, h, sum[h][r], *a[r], acc[h][r]);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// Vector v (elements 4v .. 4v + 3 of the sub-block) of sub-block sub of rows 8h .. 8h + 7 of an
// IQ4_XS block, decoded: the signed levels (-127..113), looked up from the nibbles by vpshufb.
inline __m256i decode_iq4_xs_vector(const BlockIQ4_XSx16& wb, int sub, int h, int v) {
  const __m256i raw = loadu256(wb.qs[sub][v % 4][kHalfRows * h]);
  const __m256i nibbles =
      _mm256_and_si256(v < 4 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Levels)));
  return _mm256_shuffle_epi8(table, nibbles);
}

inline void decode_iq4_xs_sub(const BlockIQ4_XSx16& wb, int sub, int h, __m256i w[8]) {
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) w[v] = decode_iq4_xs_vector(wb, sub, h, v);
}

// Half h's sub-block scales (ls - 32) in both 16-bit halves of each row's lane, for vpmaddwd.
inline __m256i iq4_xs_scale_pairs(const BlockIQ4_XSx16& wb, int sub, int h) {
  const __m256i s32 = _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[sub] + kHalfRows * h)));
  return _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(s32, 16));
}

// The exact pair sums of signed levels w (|w| in w_abs) against one broadcast activation dword x,
// as Q8_0's: vpmaddubsw of |w| against x with w's sign, each pair at most 2 * 127 * 127 (the
// activations stay within +-127, so vpsignb never negates -128).
inline __m256i iq4_xs_pair_sums(__m256i w_abs, __m256i w, __m256i x) {
  return _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
}

// A lone row's sub-block sub of rows 8h .. 8h + 7 of an IQ4_XS block against activation block a:
// sum plus each vector's pair sums times the sub-block scale by vpmaddwd (at most 2 * 32 * 2 * 127
// * 127 per vector), exact in int32.
inline __m256i lone_step_iq4_xs(const BlockIQ4_XSx16& wb, int sub, int h, const BlockQ8_K& a,
                                __m256i sum) {
  const int8_t* qa = a.qs + 32 * sub;
  const __m256i scale = iq4_xs_scale_pairs(wb, sub, h);
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) {
    const __m256i w = decode_iq4_xs_vector(wb, sub, h, v);
    const __m256i s16 =
        iq4_xs_pair_sums(_mm256_abs_epi8(w), w, _mm256_set1_epi32(load_i32(qa + 4 * v)));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, scale));
  }
  return sum;
}

// IQ4_XS: rows r < R of the token tile against both halves of one group, sub-block by sub-block
// and vector by vector: each vector of signed levels (decoded here, or loaded from decoded when
// kDecoded: half h of block b's sub-block sub at decoded + 64 (h nb + b) + 8 sub) and its |w|
// serve the R rows, each activation broadcast both halves. Every vector's pair sums go through
// vpmaddwd by the sub-block scale on their own (two could overflow int16), then the reference's
// float step per super-block, as Q6_K's. No activation sums: the levels are signed here.
template <int R, bool kDecoded>
void group_tile_iq4_xs(const BlockIQ4_XSx16* wg, int64_t nb, const __m256i* decoded,
                       const uint8_t* act, size_t act_stride, const int32_t* /*starts*/, float* y,
                       int64_t y_stride) {
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XSx16& wb = wg[b];
    const BlockQ8_K* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
    __m256i sum[2][R];  // each (half, row)'s scaled sub-block sums
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r) sum[h][r] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < 8; ++sub) {
      if constexpr (!kDecoded) prefetch_ahead_slice<BlockIQ4_XSx16, 8>(&wb, sub);
      const __m256i scale[2] = {iq4_xs_scale_pairs(wb, sub, 0), iq4_xs_scale_pairs(wb, sub, 1)};
      VELA_UNROLL
      for (int v = 0; v < 8; ++v) {
        __m256i w[2], w_abs[2];
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) {
          w[h] = kDecoded ? _mm256_load_si256(decoded + 64 * (h * nb + b) + 8 * sub + v)
                          : decode_iq4_xs_vector(wb, sub, h, v);
          w_abs[h] = _mm256_abs_epi8(w[h]);
        }
        VELA_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m256i x = _mm256_set1_epi32(load_i32(a[r]->qs + 32 * sub + 4 * v));
          VELA_UNROLL
          for (int h = 0; h < 2; ++h)
            sum[h][r] = _mm256_add_epi32(
                sum[h][r], _mm256_madd_epi16(iq4_xs_pair_sums(w_abs[h], w[h], x), scale[h]));
        }
      }
    }
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r)
      acc[h][r] = finish_half_block_q6_k(wb, h, sum[h][r], *a[r], acc[h][r]);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// Vector v of sub-block pair sub (v < 4: elements 4v .. 4v + 3 of sub-block 2 sub, else 4(v - 4)
// .. of sub-block 2 sub + 1) of rows 8h .. 8h + 7 of a Q3_K block, decoded from its low-plane
// vector (ql[2 sub + v / 4]'s rows) and high plane (qh[sub]'s): q = level + 4 (0..7), unsigned for
// vpmaddubsw. The 16-bit shifts carry bits across bytes only into the bits the masks drop.
inline __m256i decode_q3_k_vector(__m256i low, __m256i high, int v) {
  const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(low, 2 * (v % 4)), _mm256_set1_epi8(3));
  const __m256i at2 = v <= 2 ? _mm256_slli_epi16(high, 2 - v) : _mm256_srli_epi16(high, v - 2);
  return _mm256_or_si256(lo, _mm256_and_si256(at2, _mm256_set1_epi8(4)));
}
inline __m256i decode_q3_k_vector(const BlockQ3_Kx16& wb, int sub, int h, int v) {
  return decode_q3_k_vector(loadu256(wb.ql[2 * sub + v / 4][kHalfRows * h]),
                            loadu256(wb.qh[sub][kHalfRows * h]), v);
}

inline void decode_q3_k_sub(const BlockQ3_Kx16& wb, int sub, int h, __m256i w[8]) {
  const __m256i low[2] = {loadu256(wb.ql[2 * sub][kHalfRows * h]),
                          loadu256(wb.ql[2 * sub + 1][kHalfRows * h])};
  const __m256i high = loadu256(wb.qh[sub][kHalfRows * h]);
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) w[v] = decode_q3_k_vector(low[v / 4], high, v);
}

// Half h's scales (s - 32) of 16-element sub-block j in both 16-bit halves of each row's lane.
inline __m256i q3_k_scale_pairs(const BlockQ3_Kx16& wb, int j, int h) {
  const __m256i s32 = _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[j] + kHalfRows * h)));
  return _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(s32, 16));
}

// A 16-element sub-block's start, -4 * its activation sum, in the low 16 bits of every lane.
inline __m256i q3_k_start(int32_t start) {
  return _mm256_set1_epi32(int32_t(uint16_t(start)));
}

// One 16-element sub-block of rows 8h .. 8h + 7 (its 4 vectors of q, w) against the activations'
// 4 broadcast dwords x, added to sum: the 4 vpmaddubsw pair sums (each at most 2 * 7 * 128) and
// the start (|-4 * sum| at most 4 * 16 * 128) add up exactly in int16 (at most 15360), then one
// vpmaddwd by the sub-block scale pairs gives scale * (the lane's dot - 4 * activation sum).
inline __m256i q3_k_sub_sum(const __m256i* w, const __m256i* x, __m256i start, __m256i scale,
                            __m256i sum) {
  const __m256i s01 =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[0], x[0]), _mm256_maddubs_epi16(w[1], x[1]));
  const __m256i s23 =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[2], x[2]), _mm256_maddubs_epi16(w[3], x[3]));
  const __m256i s16 = _mm256_add_epi16(_mm256_add_epi16(s01, s23), start);
  return _mm256_add_epi32(sum, _mm256_madd_epi16(s16, scale));
}

// A lone row's sub-block pair sub of rows 8h .. 8h + 7 of a Q3_K block against activation block
// a (starts: its 16 start sums): sum plus both sub-blocks' scaled sums.
inline __m256i lone_step_q3_k(const BlockQ3_Kx16& wb, int sub, int h, const BlockQ8_K& a,
                              const int32_t* starts, __m256i sum) {
  VELA_UNROLL
  for (int k = 0; k < 2; ++k) {
    const int j = 2 * sub + k;
    __m256i w[4], x[4];
    VELA_UNROLL
    for (int v = 0; v < 4; ++v) {
      w[v] = decode_q3_k_vector(wb, sub, h, 4 * k + v);
      x[v] = _mm256_set1_epi32(load_i32(a.qs + 16 * j + 4 * v));
    }
    sum = q3_k_sub_sum(w, x, q3_k_start(starts[j]), q3_k_scale_pairs(wb, j, h), sum);
  }
  return sum;
}

// Q3_K: rows r < R of the token tile against both halves of one group, 16-element sub-block by
// sub-block: its 4 vectors of q per half (decoded here into a local copy, or read from decoded
// when kDecoded: half h of block b's sub-block pair sub at decoded + 64 (h nb + b) + 8 sub) serve
// the R rows, each row's 4 activation dwords broadcast once for both halves (q3_k_sub_sum), then
// the reference's float step per super-block, as Q6_K's.
template <int R, bool kDecoded>
void group_tile_q3_k(const BlockQ3_Kx16* wg, int64_t nb, const __m256i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* starts, float* y, int64_t y_stride) {
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_Kx16& wb = wg[b];
    const BlockQ8_K* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
    __m256i sum[2][R];
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r) sum[h][r] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < 8; ++sub) {
      if constexpr (!kDecoded) prefetch_ahead_slice<BlockQ3_Kx16, 8>(&wb, sub);
      __m256i local[2][8];
      const __m256i* w[2];
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        if constexpr (kDecoded) {
          w[h] = decoded + 64 * (h * nb + b) + 8 * sub;
        } else {
          decode_q3_k_sub(wb, sub, h, local[h]);
          w[h] = local[h];
        }
      }
      VELA_UNROLL
      for (int k = 0; k < 2; ++k) {
        const int j = 2 * sub + k;
        const __m256i scale[2] = {q3_k_scale_pairs(wb, j, 0), q3_k_scale_pairs(wb, j, 1)};
        VELA_UNROLL
        for (int r = 0; r < R; ++r) {
          __m256i x[4];
          VELA_UNROLL
          for (int v = 0; v < 4; ++v) x[v] = _mm256_set1_epi32(load_i32(a[r]->qs + 16 * j + 4 * v));
          const __m256i start = q3_k_start(starts[(r * nb + b) * 16 + j]);
          VELA_UNROLL
          for (int h = 0; h < 2; ++h)
            sum[h][r] = q3_k_sub_sum(w[h] + 4 * k, x, start, scale[h], sum[h][r]);
        }
      }
    }
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r)
      acc[h][r] = finish_half_block_q6_k(wb, h, sum[h][r], *a[r], acc[h][r]);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// The K formats' kernels: their block type and GGML type, sub-blocks per block and decoded
// vectors per sub-block, largest token tile, activation sums per block, decoder and tile.
template <class PackedBlock, GgmlType kGgmlType>  // Q4_K, Q5_K
struct Q4KKernel {
  using Packed = PackedBlock;
  static constexpr GgmlType kType = kGgmlType;
  static constexpr int kSubs = 8, kSubVectors = 8, kMaxR = 4, kSumsPerBlock = 4;
  static constexpr int64_t kDecodeFrom =
      std::is_same_v<Packed, BlockQ5_Kx16> ? kQ5_KDecodeOnceMinTokens : kQ4_KDecodeOnceMinTokens;
  static void decode_sub(const Packed& wb, int sub, int h, __m256i* out) {
    decode_q4_k_sub(wb, sub, h, out);
  }
  template <int R, bool kDecoded, class... Args>
  static void tile(Args... args) {
    group_tile_q4_k<Packed, R, kDecoded>(args...);
  }
  static constexpr int kLoneSteps = 4;  // sub-block pairs per block
  static __m256i lone_step(const Packed& wb, int step, int h, const BlockQ8_K& a,
                           const int32_t* /*block_sums*/, __m256i dots) {
    return lone_step_q4_k(wb, step, h, a, dots);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i dots, const BlockQ8_K& a,
                            const int32_t* block_sums, __m256 acc) {
    return finish_half_block_q4_k(k_scales(wb), h, dots, a, block_sums, acc);
  }
};

struct Q6KKernel {
  using Packed = BlockQ6_Kx16;
  static constexpr GgmlType kType = GgmlType::Q6_K;
  static constexpr int kSubs = 16, kSubVectors = 4, kMaxR = 4, kSumsPerBlock = 16;
  static constexpr int64_t kDecodeFrom = kQ6_KDecodeOnceMinTokens;
  static void decode_sub(const Packed& wb, int sub, int h, __m256i* out) {
    decode_q6_k_sub(wb, sub, h, out);
  }
  template <int R, bool kDecoded, class... Args>
  static void tile(Args... args) {
    group_tile_q6_k<R, kDecoded>(args...);
  }
  static constexpr int kLoneSteps = 16;  // sub-blocks per block
  static __m256i lone_step(const Packed& wb, int step, int h, const BlockQ8_K& a,
                           const int32_t* block_sums, __m256i sum) {
    return lone_step_q6_k(wb, step, h, a, block_sums, sum);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                            const int32_t* /*block_sums*/, __m256 acc) {
    return finish_half_block_q6_k(wb, h, sum, a, acc);
  }
};

// IQ4_XS's activation sums (the AVX-512 kernel's starts) go unused: its levels are signed here.
struct IQ4XSKernel {
  using Packed = BlockIQ4_XSx16;
  static constexpr GgmlType kType = GgmlType::IQ4_XS;
  static constexpr int kSubs = 8, kSubVectors = 8, kMaxR = 4, kSumsPerBlock = 8;
  static constexpr int64_t kDecodeFrom = kIQ4_XSDecodeOnceMinTokens;
  static void decode_sub(const Packed& wb, int sub, int h, __m256i* out) {
    decode_iq4_xs_sub(wb, sub, h, out);
  }
  template <int R, bool kDecoded, class... Args>
  static void tile(Args... args) {
    group_tile_iq4_xs<R, kDecoded>(args...);
  }
  static constexpr int kLoneSteps = 8;  // sub-blocks per block
  static __m256i lone_step(const Packed& wb, int step, int h, const BlockQ8_K& a,
                           const int32_t* /*block_sums*/, __m256i sum) {
    return lone_step_iq4_xs(wb, step, h, a, sum);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                            const int32_t* /*block_sums*/, __m256 acc) {
    return finish_half_block_q6_k(wb, h, sum, a, acc);
  }
};

// Q3_K: q = level + 4 unsigned, the -4 through the activation sums (starts), as on AVX-512.
struct Q3KKernel {
  using Packed = BlockQ3_Kx16;
  static constexpr GgmlType kType = GgmlType::Q3_K;
  static constexpr int kSubs = 8, kSubVectors = 8, kMaxR = 4, kSumsPerBlock = 16;
  static constexpr int64_t kDecodeFrom = kQ3_KDecodeOnceMinTokens;
  static void decode_sub(const Packed& wb, int sub, int h, __m256i* out) {
    decode_q3_k_sub(wb, sub, h, out);
  }
  template <int R, bool kDecoded, class... Args>
  static void tile(Args... args) {
    group_tile_q3_k<R, kDecoded>(args...);
  }
  static constexpr int kLoneSteps = 8;  // sub-block pairs per block
  static __m256i lone_step(const Packed& wb, int step, int h, const BlockQ8_K& a,
                           const int32_t* block_sums, __m256i sum) {
    return lone_step_q3_k(wb, step, h, a, block_sums, sum);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                            const int32_t* /*block_sums*/, __m256 acc) {
    return finish_half_block_q6_k(wb, h, sum, a, acc);
  }
};

}  // namespace
}  // namespace avx2

PackedGemmFn packed_gemm_k_avx2(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q4_K:
      return avx2::gemm_k<avx2::Q4KKernel<BlockQ4_Kx16, GgmlType::Q4_K>>;
    case GgmlType::Q5_K:
      return avx2::gemm_k<avx2::Q4KKernel<BlockQ5_Kx16, GgmlType::Q5_K>>;
    case GgmlType::Q6_K:
      return avx2::gemm_k<avx2::Q6KKernel>;
    case GgmlType::IQ4_XS:
      return avx2::gemm_k<avx2::IQ4XSKernel>;
    case GgmlType::Q3_K:
      return avx2::gemm_k<avx2::Q3KKernel>;
    case GgmlType::Q2_K:
      return packed_gemm_q2_k_avx2();
    case GgmlType::TQ2_0:
      return packed_gemm_tq2_0_avx2();
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

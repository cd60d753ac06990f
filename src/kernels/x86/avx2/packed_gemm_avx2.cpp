// AVX2 kernels for 16-row interleaved Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights
// (packed_gemm.h), for CPUs without AVX-512. A packed block's vector j holds 4 weights of each of
// the 16 rows; its 32-byte halves are rows 0-7 and 8-15, so with one broadcast activation dword,
// vpmaddubsw gives each row's two pair sums (at most 2 * 15 * 127, no saturation), eight of them
// add up exactly in int16 (at most 30480), and one vpmaddwd by ones makes each row's exact block
// sum. Then the reference's float chain, so results are bit-identical to the scalar reference and
// to the AVX-512 kernels (batch invariance holds on every kernel level). Q8_0 (below) takes its
// signed levels apart instead.
#include <array>
#include <type_traits>
#include <vector>

#include "kernels/packed/nibble_format.h"
#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/thread_buffer.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "quant/blocks.h"

namespace vela::kernels {
namespace avx2 {
namespace {

constexpr int kHalfRows = 8;  // rows per 256-bit half of a packed vector

// The weight stream's lines kPrefetchBytes ahead of a packed block.
template <class Packed>
inline void prefetch_ahead(const Packed* block) {
  prefetch_weights<sizeof(Packed)>(block);
}

// Slice `part` of kParts of those lines. The K blocks are 36-53 lines, and fetching all of them at
// a block's start, then computing on it for some 100 ns, had a lone row read memory 1.2-1.5x
// slower than one slice per sub-block does, issued as the sub-block starts: a burst that size
// overruns the core's outstanding-miss slots (`vela bench matmul --tokens 1 -t 1` on a Zen 3,
// three alternations, medians: Q4_K 1.31x, Q5_K 1.47x, Q6_K 1.22x; tg of Q4_K_M 1.13-1.37x and
// Q5_K_M 1.19-1.25x with -t 2). The slices' bounds come from a table: computing them took some 15
// instructions per slice, a quarter of the Q6_K lone row's loop (the table: 1.07x for Q4_K, Q5_K
// and Q6_K in L3, the same from memory; the same lines in the same order). Slices of one size
// instead (the last reaching into the next block, or taking the remainder) were 0.4-0.9x from
// memory.
template <class Packed, int kParts>
inline void prefetch_ahead_slice(const Packed* block, int part) {
  constexpr int kLines = int((sizeof(Packed) + 63) / 64);
  // Byte offset of slice p's first line, p <= kParts: line kLines * p / kParts.
  static constexpr auto kStart = [] {
    std::array<int16_t, kParts + 1> start{};
    for (int p = 0; p <= kParts; ++p) start[size_t(p)] = int16_t(64 * (kLines * p / kParts));
    return start;
  }();
  const char* ahead = reinterpret_cast<const char*>(block) + kPrefetchBytes;
  const char* end = ahead + kStart[size_t(part) + 1];
  for (const char* line = ahead + kStart[size_t(part)]; line < end; line += 64)
    _mm_prefetch(line, _MM_HINT_T0);
}

// fn(std::integral_constant<int, R>, t) for the token tiles of n_act rows: kMaxR rows (4 or 2)
// at a time, then 2 and 1 for the rest.
template <int kMaxR, class Fn>
void for_token_tiles(int64_t n_act, Fn&& fn) {
  int64_t t = 0;
  if constexpr (kMaxR == 4)
    for (; t + 4 <= n_act; t += 4) fn(std::integral_constant<int, 4>{}, t);
  for (; t + 2 <= n_act; t += 2) fn(std::integral_constant<int, 2>{}, t);
  if (t < n_act) fn(std::integral_constant<int, 1>{}, t);
}

// Every tile takes both 8-row halves of a group and goes vector by vector (group_tile and its
// kin), each vector of levels decoded just before its vpmaddubsw. From these many tokens on, the
// formats whose decode costs most decode each group once instead, into a per-thread buffer that
// the group's tiles load (for_group_tiles). `vela bench matmul -t 1` on a Zen 3, two
// alternations, decoded once against on the fly: Q5_0 1.0-1.15x at 32-512 tokens, 0.85-0.9x at
// 16 (Q5_1 alike, noisier); Q4_K 0.75-0.9x at 8-16, 1.1-1.25x at 512; Q5_K 0.5-0.8x at 2-8,
// 1.2-1.45x from 64; Q6_K 0.8-0.9x at 16, 1.05-1.25x from 32. 4-bit nibbles (2 operations per
// vector) and Q8_0 never gained from it.
constexpr int64_t kQ5DecodeOnceMinTokens = 32;  // Q5_0, Q5_1
constexpr int64_t kQ4_KDecodeOnceMinTokens = 32;
constexpr int64_t kQ5_KDecodeOnceMinTokens = 16;
constexpr int64_t kQ6_KDecodeOnceMinTokens = 32;

// Every (group, token tile) of a call: fn(g, std::integral_constant<int, R>, t) with tiles of
// kMaxR rows (4 or 2), then 2 and 1 for the rest.
template <int kMaxR, class Fn>
void for_group_tiles(const PackedGemmArgs& p, Fn&& fn) {
  for (int64_t g = 0; g < p.n_groups; ++g)
    for_token_tiles<kMaxR>(p.n_act, [&](auto rows, int64_t t) { fn(g, rows, t); });
}

// The same, fn(std::bool_constant<D>, g, std::integral_constant<int, R>, t, decoded). From
// kDecodeFrom tokens on (D true), each group is decoded once first: decode(block, h, out) writes
// kVectors vectors of a block's rows 8h .. 8h + 7, and decoded holds them for every block (half h
// of block b at decoded + kVectors (h nb + b)). Below it (D false, decoded null), each tile
// decodes its blocks itself.
template <int kVectors, int kMaxR, class Packed, int64_t kDecodeFrom, class Decode, class Fn>
void for_group_tiles(const PackedGemmArgs& p, int64_t nb, Decode&& decode, Fn&& fn) {
  if (p.n_act < kDecodeFrom) {
    for_group_tiles<kMaxR>(p, [&](int64_t g, auto rows, int64_t t) {
      fn(std::false_type{}, g, rows, t, static_cast<const __m256i*>(nullptr));
    });
    return;
  }
  __m256i* decoded = thread_buffer<__m256i>(size_t(nb) * 2 * kVectors);
  const auto* w = static_cast<const Packed*>(p.w);
  for (int64_t g = 0; g < p.n_groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      prefetch_ahead(w + g * nb + b);
      for (int h = 0; h < 2; ++h) decode(w[g * nb + b], h, decoded + kVectors * (h * nb + b));
    }
    for_token_tiles<kMaxR>(p.n_act, [&](auto rows, int64_t t) {
      fn(std::true_type{}, g, rows, t, static_cast<const __m256i*>(decoded));
    });
  }
}

// Vector v's 5th bits from a PackedHighBits plane (rows 8h .. 8h + 7 of it): bit v of each plane
// byte, shifted to bit 4 (bits that cross into a neighbouring byte of the 16-bit lane land
// outside bit 4 and are masked off).
inline __m256i high_bits_of(__m256i plane, int v) {
  const __m256i at4 = v <= 4 ? _mm256_slli_epi16(plane, 4 - v) : _mm256_srli_epi16(plane, v - 4);
  return _mm256_and_si256(at4, _mm256_set1_epi8(0x10));
}

// The 5th bits of rows 8h .. 8h + 7 (plane_rows: their bytes of a plane) joined to the 8 vectors
// of levels w.
inline void join_high_bits(const uint8_t (*plane_rows)[4], __m256i w[8]) {
  const __m256i plane = loadu256(plane_rows);
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) w[v] = _mm256_or_si256(w[v], high_bits_of(plane, v));
}

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

// The block scales of rows 8h .. 8h + 7.
template <class Packed>
inline __m256 half_scales(const Packed& blk, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.d + kHalfRows * h)));
}

// The activation blocks Packed meets (Q8_0 and Q4_0 / Q5_0: Q8_0; Q4_1 / Q5_1: Q8_1), and
// whether its kernel takes the activations' start sums (Q4_0 / Q5_0, whose levels carry a bias).
template <class Packed>
using ActOf = typename NibbleFormat<Packed>::Act;
template <class Packed>
constexpr bool kTakesStarts =
    !std::is_same_v<Packed, BlockQ8_0x16> && !NibbleFormat<Packed>::kAffine;

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

// One vector of packed nibbles, raw, as two vectors of levels (low nibbles, then high; with
// kHighBit, their 5th bits from bit v_lo of plane_lo and bit v_hi of plane_hi), each decoded just
// before its vpmaddubsw against the 4 activation quants at q_lo or q_hi. The pair sums start s_lo
// and s_hi (first) or are added to them with vpaddsw (see group_tile).
template <bool kHighBit>
inline void nibble_pair_products(__m256i raw, __m256i plane_lo, int v_lo, __m256i plane_hi,
                                 int v_hi, const int8_t* q_lo, const int8_t* q_hi, bool first,
                                 __m256i& s_lo, __m256i& s_hi) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256i lo = _mm256_and_si256(raw, low);
  __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
  if constexpr (kHighBit) {
    lo = _mm256_or_si256(lo, high_bits_of(plane_lo, v_lo));
    hi = _mm256_or_si256(hi, high_bits_of(plane_hi, v_hi));
  }
  const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_set1_epi32(load_i32(q_lo)));
  const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_set1_epi32(load_i32(q_hi)));
  s_lo = first ? p_lo : _mm256_adds_epi16(s_lo, p_lo);
  s_hi = first ? p_hi : _mm256_adds_epi16(s_hi, p_hi);
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
// to negate -128.)
inline __m256i decode_q8_0_vector(const BlockQ8_0x16& blk, int h, int v) {
  return _mm256_xor_si256(loadu256(blk.qs[v][kHalfRows * h]), _mm256_set1_epi8(char(0x80)));
}

// The exact sums of one vector of levels w (|w| in w_abs) against one broadcast activation dword.
inline __m256i q8_0_products(__m256i w_abs, __m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w)),
                           _mm256_set1_epi16(1));
}

// acc plus one activation block a against rows 8h .. 8h + 7 of a block (a lone row), each vector
// decoded just before its products, as the nibble formats' half_block_row_streamed.
inline __m256 half_block_row_streamed(const BlockQ8_0x16& blk, int h, __m256 dw, const BlockQ8_0& a,
                                      int32_t /*start*/, __m256 acc) {
  __m256i isum = _mm256_setzero_si256();
  VELA_UNROLL
  for (int v = 0; v < 8; ++v) {
    const __m256i w = decode_q8_0_vector(blk, h, v);
    isum = _mm256_add_epi32(
        isum, q8_0_products(_mm256_abs_epi8(w), w, _mm256_set1_epi32(load_i32(a.qs + 4 * v))));
  }
  return finish_half_block(isum, blk, h, dw, a, 0, acc);
}

// The tiles' inner loop: the int16 pair sums s16[h][r] of kTerms vectors of levels of both halves
// against R rows' activations, vector by vector. levels(h, i) gives half h's vector i, quants(r,
// i) row r's 4 activation quants for it; so each vector serves the R rows and each broadcast both
// halves. The sums are added with vpaddsw, which never saturates within the callers' bounds and
// so gives vpaddw's sums, because GCC may reorder vpaddw: it regrouped the sums and kept every
// product live (46 stack accesses per block with 2 rows).
template <int R, int kTerms, class Levels, class Quants>
inline void both_halves_pair_sums(Levels&& levels, Quants&& quants, __m256i s16[2][R]) {
  VELA_UNROLL
  for (int i = 0; i < kTerms; ++i) {
    const __m256i w[2] = {levels(0, i), levels(1, i)};
    VELA_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256i x = _mm256_set1_epi32(load_i32(quants(r, i)));
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const __m256i products = _mm256_maddubs_epi16(w[h], x);
        s16[h][r] = i == 0 ? products : _mm256_adds_epi16(s16[h][r], products);
      }
    }
  }
}

// Q8_0: rows r < R of the token tile at act against both halves of one group of nb blocks, vector
// by vector, as group_tile: each vector is decoded (and its |w| taken) once for the R rows, each
// activation broadcast serves both halves. Never decoded once: `vela bench matmul --type Q8_0
// -t 1` on a Zen 3, two alternations, against a half of 4 rows at a time that decoded |w| and w
// once from 16 tokens: 1.65x at 2 tokens, 1.3x at 4-8, 1.25x at 16, 1.1x at 32, 1.04x at 64-512.
template <int R>
void group_tile_q8_0(const BlockQ8_0x16* wg, int64_t nb, const uint8_t* act, size_t act_stride,
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
        w[h] = decode_q8_0_vector(wg[b], h, v);
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
constexpr bool kReloadBroadcasts =
    std::is_same_v<Packed, BlockQ8_0x16> || NibbleFormat<Packed>::kHighBit;

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
        acc[i][h] = half_block_row_streamed(blk, h, half_scales(blk, h), *ab, start, acc[i][h]);
      }
    }
  }
  VELA_UNROLL
  for (int i = 0; i < S; ++i)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + i * y_apart + kHalfRows * h, acc[i][h]);
}

// Q8_0 and the nibble formats (Packed: BlockQ8_0x16, BlockQ4_0x16, ...; kType its GGML type).
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
  if constexpr (std::is_same_v<Packed, BlockQ8_0x16>) {
    for_group_tiles<4>(p, [&](int64_t g, auto rows, int64_t t) {
      group_tile_q8_0<decltype(rows)::value>(w + g * nb, nb, p.act + size_t(t) * p.act_stride,
                                             p.act_stride, p.y + t * p.y_stride + g * kPackedRows,
                                             p.y_stride);
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

// One activation row against S groups of Q4_K or Q5_K blocks, group i's nb blocks at
// wg + i * apart and its 16 outputs at y + i * y_apart, walked in lockstep (for_lone_group_pairs):
// block by block, sub-block pair by pair, both halves of each (lone_sub_pair_q4_k), so that each
// stream's bytes are read in order, a slice of its lines fetched ahead per step.
// - Both halves per sub-block pair, against a half at a time (`vela bench matmul --tokens 1` on a
//   Zen 3, medians): in L3 (--rows 2048 --working-set-mib 8 -t 1, three alternations) Q4_K 1.04x,
//   Q5_K 1.10x; from memory with -t 2 (four alternations) Q4_K 1.08x, Q5_K 1.08x.
// - Two streams against one (S = 2 against 1, all K formats): `vela bench -t 2 -p 0 -n 64 -r 3`,
//   median decode step as a share of the read bandwidth, three alternations on a Zen 3: Q4_K_M
//   72-82% -> 86-92%, Q5_K_M 74-79% -> 86-90%; `vela bench matmul --tokens 1 -t 1` from memory
//   Q4_K 1.0-1.3x, Q6_K 1.1-1.2x, in L3 the same.
template <class Packed, int S>
void lone_row_q4_k(const Packed* wg, int64_t apart, int64_t nb, const uint8_t* act,
                   const int32_t* pairs, float* y, int64_t y_apart) {
  constexpr int kInt16Terms = std::is_same_v<Packed, BlockQ5_Kx16> ? 4 : 8;
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  __m256 acc[S][2];
  VELA_UNROLL
  for (int i = 0; i < S; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i dots[S][2];  // each (group, half)'s sub-block sums times their scales
    VELA_UNROLL
    for (int i = 0; i < S; ++i) dots[i][0] = dots[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      VELA_UNROLL
      for (int i = 0; i < S; ++i) {
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) {
          prefetch_ahead_slice<Packed, 8>(wg + i * apart + b, 2 * p + h);
          // Opaque, so that each (group, half) loads its own activation broadcasts: GCC otherwise
          // broadcast them once for all four and spilled them (49 stack accesses per sub-block
          // pair of both streams, 4 with this).
          const int8_t* q = a[b].qs + 64 * p;
          asm volatile("" : "+r"(q));
          dots[i][h] =
              lone_sub_pair_q4_k<Packed, kInt16Terms>(wg[i * apart + b], p, h, q, dots[i][h]);
        }
      }
    }
    VELA_UNROLL
    for (int i = 0; i < S; ++i) {
      VELA_UNROLL
      for (int h = 0; h < 2; ++h)
        acc[i][h] = finish_half_block_q4_k(k_scales(wg[i * apart + b]), h, dots[i][h], a[b],
                                           pairs + 4 * b, acc[i][h]);
    }
  }
  VELA_UNROLL
  for (int i = 0; i < S; ++i)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + i * y_apart + kHalfRows * h, acc[i][h]);
}

// Q4_K and Q5_K (Packed: BlockQ4_Kx16, BlockQ5_Kx16): rows r < R of the token tile against both
// halves of one group, each block read once for both.
// - A lone row (R = 1, not decoded) is lone_row_q4_k's single stream.
// - Token tiles go sub-block by sub-block and vector by vector: each vector of levels (decoded
//   here, or loaded from decoded when kDecoded: half h of block b's sub-block sub at
//   decoded + 64 (h nb + b) + 8 sub) serves the R rows, and each activation broadcast both
//   halves, as the nibble formats' group_tile. Pair sums by vpmaddubsw add up exactly in int16
//   (4-bit levels: all 8, at most 8 * 2 * 15 * 127; 5-bit: 4 at a time, at most 4 * 2 * 31 * 127)
//   in both_halves_pair_sums, and one vpmaddwd by the sub-block scale (in both 16-bit halves
//   of each row's lane) adds and scales them.
//   `vela bench matmul -t 1` on a Zen 3, two alternations, against a half of 2 rows at a time
//   (vpmaddwd by ones, then vpmulld): Q4_K 1.6x at 2 tokens, 1.8x at 4, 1.35-1.55x at 8-16,
//   1.25x at 32-512; Q5_K 2.2x at 2, 1.8x at 4, 1.4x at 8, 1.1-1.2x at 16-512.
// Then the mins by vpmaddwd with the activation sums and the reference's float steps.
template <class Packed, int R, bool kDecoded>
void group_tile_q4_k(const Packed* wg, int64_t nb, const __m256i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* pairs, float* y, int64_t y_stride) {
  if constexpr (R == 1 && !kDecoded) {
    lone_row_q4_k<Packed, 1>(wg, 0, nb, act, pairs, y, 0);
    return;
  }
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

// The reference's float steps for half h of a Q6_K block against activation block a: acc plus
// d * a.d * the block's scaled sub-block sums.
inline __m256 finish_half_block_q6_k(const BlockQ6_Kx16& wb, int h, __m256i sum, const BlockQ8_K& a,
                                     __m256 acc) {
  const __m256 dw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d + kHalfRows * h)));
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a.d)), _mm256_cvtepi32_ps(sum), acc);
}

// One activation row against S groups of Q6_K blocks, as lone_row_q4_k: sub-block by sub-block,
// both halves of each (its 4 vectors of levels decoded in turn), so that each stream's bytes are
// read in order (against a half at a time: in L3 1.05x, from memory with -t 1 1.22x). Two
// vpmaddubsw pair sums add up exactly in int16 (at most 2 * 2 * 63 * 127), vpmaddwd by ones, the
// sum starts from -32 * the activations' sub-block sum (starts) and is scaled by the sub-block
// scales with vpmulld.
template <int S>
void lone_row_q6_k(const BlockQ6_Kx16* wg, int64_t apart, int64_t nb, const uint8_t* act,
                   const int32_t* starts, float* y, int64_t y_apart) {
  const __m256i ones = _mm256_set1_epi16(1);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  __m256 acc[S][2];
  VELA_UNROLL
  for (int i = 0; i < S; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i sum[S][2];  // each (group, half)'s sub-block sums times their scales
    VELA_UNROLL
    for (int i = 0; i < S; ++i) sum[i][0] = sum[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < 16; ++sub) {
      const int8_t* qa = a[b].qs + 16 * sub;
      VELA_UNROLL
      for (int i = 0; i < S; ++i) {
        const BlockQ6_Kx16& wb = wg[i * apart + b];
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) {
          prefetch_ahead_slice<BlockQ6_Kx16, 32>(&wb, 2 * sub + h);
          __m256i q[4];
          decode_q6_k_sub(wb, sub, h, q);
          const __m256i s01 =
              _mm256_add_epi16(_mm256_maddubs_epi16(q[0], _mm256_set1_epi32(load_i32(qa))),
                               _mm256_maddubs_epi16(q[1], _mm256_set1_epi32(load_i32(qa + 4))));
          const __m256i s23 =
              _mm256_add_epi16(_mm256_maddubs_epi16(q[2], _mm256_set1_epi32(load_i32(qa + 8))),
                               _mm256_maddubs_epi16(q[3], _mm256_set1_epi32(load_i32(qa + 12))));
          const __m256i dot = _mm256_add_epi32(
              _mm256_set1_epi32(starts[b * 16 + sub]),
              _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones)));
          const __m256i scale = _mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scale[sub] + kHalfRows * h)));
          sum[i][h] = _mm256_add_epi32(sum[i][h], _mm256_mullo_epi32(dot, scale));
        }
      }
    }
    VELA_UNROLL
    for (int i = 0; i < S; ++i) {
      VELA_UNROLL
      for (int h = 0; h < 2; ++h)
        acc[i][h] = finish_half_block_q6_k(wg[i * apart + b], h, sum[i][h], a[b], acc[i][h]);
    }
  }
  VELA_UNROLL
  for (int i = 0; i < S; ++i)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + i * y_apart + kHalfRows * h, acc[i][h]);
}

// Q6_K: rows r < R of the token tile against both halves of one group, sub-block by sub-block
// (16 elements, 4 vectors of levels). Two vpmaddubsw pair sums add up exactly in int16 (at most
// 2 * 2 * 63 * 127), vpmaddwd by ones, the sum starts from -32 * the activations' sub-block sum
// and is scaled by the sub-block scales with vpmulld.
// - A lone row (R = 1, not decoded) is lone_row_q6_k's single stream.
// - Token tiles go vector by vector, each vector (decoded here, or loaded from decoded when
//   kDecoded: half h of block b's sub-block sub at decoded + 64 (h nb + b) + 4 sub) serving the R
//   rows and each activation broadcast both halves, as group_tile. `vela bench matmul -t 1` on a
//   Zen 3, two alternations, against a half of 4 rows at a time: 1.4-1.5x at 2 tokens, 1.25x at
//   4, 1.05-1.1x at 8-16, the same from 32 on.
template <int R, bool kDecoded>
void group_tile_q6_k(const BlockQ6_Kx16* wg, int64_t nb, const __m256i* decoded, const uint8_t* act,
                     size_t act_stride, const int32_t* starts, float* y, int64_t y_stride) {
  if constexpr (R == 1 && !kDecoded) {
    lone_row_q6_k<1>(wg, 0, nb, act, starts, y, 0);
    return;
  }
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
  template <int S, class... Args>
  static void lone(Args... args) {
    lone_row_q4_k<Packed, S>(args...);
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
  template <int S, class... Args>
  static void lone(Args... args) {
    lone_row_q6_k<S>(args...);
  }
};

// Q4_K, Q5_K and Q6_K (K: Q4KKernel, Q6KKernel): every tile takes both halves of a group; a lone
// token reads each group once, more tokens go through for_group_tiles.
template <class K>
void gemm_k(const PackedGemmArgs& p) {
  using Packed = typename K::Packed;
  const int64_t nb = p.n_cols / kPackedSuperK;
  const int32_t* sums = packed_act_sums(K::kType, p);
  const auto* w = static_cast<const Packed*>(p.w);
  if (p.n_act == 1) {
    for_lone_group_pairs(p.n_groups, [&](auto streams, int64_t g, int64_t apart) {
      K::template lone<decltype(streams)::value>(w + g * nb, apart * nb, nb, p.act, sums,
                                                 p.y + g * kPackedRows, apart * kPackedRows);
    });
    return;
  }
  for_group_tiles<K::kSubs * K::kSubVectors, K::kMaxR, Packed, K::kDecodeFrom>(
      p, nb,
      [](const Packed& wb, int h, __m256i* out) {
        for (int sub = 0; sub < K::kSubs; ++sub)
          K::decode_sub(wb, sub, h, out + K::kSubVectors * sub);
      },
      [&](auto decoded_t, int64_t g, auto rows, int64_t t, const __m256i* decoded) {
        K::template tile<decltype(rows)::value, decltype(decoded_t)::value>(
            w + g * nb, nb, decoded, p.act + size_t(t) * p.act_stride, p.act_stride,
            sums + t * nb * K::kSumsPerBlock, p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
      });
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
    case GgmlType::Q4_K:
      return avx2::gemm_k<avx2::Q4KKernel<BlockQ4_Kx16, GgmlType::Q4_K>>;
    case GgmlType::Q5_K:
      return avx2::gemm_k<avx2::Q4KKernel<BlockQ5_Kx16, GgmlType::Q5_K>>;
    case GgmlType::Q6_K:
      return avx2::gemm_k<avx2::Q6KKernel>;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

#pragma once
// Internal to the AVX2 int8 packed kernels (packed_gemm_avx2.cpp: Q8_0 and the nibble formats;
// packed_gemm_k_avx2.cpp: Q4_K, Q5_K, Q6_K, IQ4_XS, Q3_K; packed_gemm_q2_k_avx2.cpp: Q2_K, TQ2_0):
// the 8-row halves of a 16-row group, the weight prefetch, the walk over (group, token tile) pairs
// with its decode-once thresholds, 5th bits, the inner loops that pair vectors of levels with
// activation broadcasts, and the K types' driver (gemm_k, lone_row_k) over a kernel description.
// Thread-safety: pure functions; disjoint outputs may be computed concurrently.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/thread_buffer.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/prefetch_slices.h"
#include "quant/blocks.h"

namespace vela::kernels {

// Q4_K, Q5_K, Q6_K, IQ4_XS, Q3_K (packed_gemm_k_avx2.cpp), Q2_K and TQ2_0 (through
// packed_gemm_q2_k_avx2() / packed_gemm_tq2_0_avx2()); else null.
PackedGemmFn packed_gemm_k_avx2(GgmlType w_type);
PackedGemmFn packed_gemm_q2_k_avx2();   // packed_gemm_q2_k_avx2.cpp
PackedGemmFn packed_gemm_tq2_0_avx2();  // packed_gemm_q2_k_avx2.cpp

namespace avx2 {

constexpr int kHalfRows = 8;  // rows per 256-bit half of a packed vector

// The weight stream's lines kPrefetchBytes ahead of a packed block.
template <class Packed>
[[gnu::always_inline]] inline void prefetch_ahead(const Packed* block) {
  prefetch_weights<sizeof(Packed)>(block);
}

// Slice `part` of kParts of those lines (prefetch_slices.h). Requested as each sub-block starts
// rather than all at a block's start: `vela bench matmul --tokens 1 -t 1` on a Zen 3, three
// alternations, medians: Q4_K 1.31x, Q5_K 1.47x, Q6_K 1.22x; tg of Q4_K_M 1.13-1.37x and Q5_K_M
// 1.19-1.25x with -t 2.
template <class Packed, int kParts>
[[gnu::always_inline]] inline void prefetch_ahead_slice(const Packed* block, int part) {
  prefetch_slice<kPrefetchBytes, Packed, kParts>(block, part);
}

// fn(std::integral_constant<int, R>, t) for the token tiles of n_act rows: kMaxR rows (4 or 2)
// at a time, then 3 at once (kMaxR 4), or 2 and 1, for the rest. Three rows as one tile read the
// weights once, where 2 + 1 read them twice: `vela bench matmul --tokens 1,3,4 -t 2` on a Zen 3,
// three tokens against one went 1.63x -> 1.2x (Q4_K) and 2.12x -> 1.3x (Q6_K).
template <int kMaxR, class Fn>
void for_token_tiles(int64_t n_act, Fn&& fn) {
  int64_t t = 0;
  if constexpr (kMaxR == 4) {
    for (; t + 4 <= n_act; t += 4) fn(std::integral_constant<int, 4>{}, t);
    if (n_act - t == 3) return fn(std::integral_constant<int, 3>{}, t);
  }
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
// IQ4_XS (a vpshufb per vector beside the nibble's two operations): as Q4_K; not measured.
constexpr int64_t kIQ4_XSDecodeOnceMinTokens = 32;
// Q3_K (five operations per vector from its two bit planes): as Q4_K; not measured.
constexpr int64_t kQ3_KDecodeOnceMinTokens = 32;
// Q2_K (a shift and a mask per vector, 4 vectors per load): as Q4_K; against decoding every tile's
// blocks, `vela bench matmul --type Q2_K -t 1` on a Zen 5, three alternations: 0.85-1.06x at 32
// and 0.82-1.03x at 512 tokens, even within the noise.
constexpr int64_t kQ2_KDecodeOnceMinTokens = 32;

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

// One activation row against S groups of K blocks (K: Q4KKernel, Q6KKernel, ...), group i's nb
// blocks at wg + i * apart and its 16 outputs at y + i * y_apart, walked in lockstep
// (for_lone_group_pairs) block by block and step by step (K::lone_step: a sub-block pair of Q4_K /
// Q5_K, a sub-block of Q6_K), both halves of each step, so that each stream's bytes are read in
// order, a slice of its lines fetched ahead per step. sums: the activation sums, K::kSumsPerBlock
// per block.
// - Both halves per step, against a half at a time (`vela bench matmul --tokens 1` on a Zen 3,
//   medians): in L3 (--rows 2048 --working-set-mib 8 -t 1, three alternations) Q4_K 1.04x, Q5_K
//   1.10x, Q6_K 1.05x; from memory with -t 2 (four alternations) Q4_K 1.08x, Q5_K 1.08x, Q6_K with
//   -t 1 1.22x.
// - Two streams against one (S = 2 against 1): `vela bench -t 2 -p 0 -n 64 -r 3`, median decode
//   step as a share of the read bandwidth, three alternations on a Zen 3: Q4_K_M 72-82% ->
//   86-92%, Q5_K_M 74-79% -> 86-90%; `vela bench matmul --tokens 1 -t 1` from memory Q4_K
//   1.0-1.3x, Q6_K 1.1-1.2x, in L3 the same.
template <class K, int S>
void lone_row_k(const typename K::Packed* wg, int64_t apart, int64_t nb, const uint8_t* act,
                const int32_t* sums, float* y, int64_t y_apart) {
  using Packed = typename K::Packed;
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  __m256 acc[S][2];
  VELA_UNROLL
  for (int i = 0; i < S; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int32_t* block_sums = sums + b * K::kSumsPerBlock;
    __m256i dots[S][2];  // each (group, half)'s scaled sums
    VELA_UNROLL
    for (int i = 0; i < S; ++i) dots[i][0] = dots[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int step = 0; step < K::kLoneSteps; ++step) {
      VELA_UNROLL
      for (int i = 0; i < S; ++i) {
        VELA_UNROLL
        for (int h = 0; h < 2; ++h) {
          const Packed& wb = wg[i * apart + b];
          prefetch_ahead_slice<Packed, 2 * K::kLoneSteps>(&wb, 2 * step + h);
          dots[i][h] = K::lone_step(wb, step, h, a[b], block_sums, dots[i][h]);
        }
      }
    }
    VELA_UNROLL
    for (int i = 0; i < S; ++i) {
      VELA_UNROLL
      for (int h = 0; h < 2; ++h)
        acc[i][h] = K::finish_half(wg[i * apart + b], h, dots[i][h], a[b], block_sums, acc[i][h]);
    }
  }
  VELA_UNROLL
  for (int i = 0; i < S; ++i)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + i * y_apart + kHalfRows * h, acc[i][h]);
}

// The K types (K: a kernel description, as packed_gemm_k_avx2.cpp's Q4KKernel): every tile takes
// both halves of a group; a lone token reads each group once, more tokens go through
// for_group_tiles.
template <class K>
void gemm_k(const PackedGemmArgs& p) {
  using Packed = typename K::Packed;
  const int64_t nb = p.n_cols / kPackedSuperK;
  const int32_t* sums = packed_act_sums(K::kType, p);
  const auto* w = static_cast<const Packed*>(p.w);
  if (p.n_act == 1) {
    for_lone_group_pairs(p.n_groups, [&](auto streams, int64_t g, int64_t apart) {
      lone_row_k<K, decltype(streams)::value>(w + g * nb, apart * nb, nb, p.act, sums,
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
        constexpr int R = decltype(rows)::value;
        constexpr bool kDecoded = decltype(decoded_t)::value;
        const uint8_t* act = p.act + size_t(t) * p.act_stride;
        const int32_t* tile_sums = sums + t * nb * K::kSumsPerBlock;
        float* y = p.y + t * p.y_stride + g * kPackedRows;
        if constexpr (R == 1 && !kDecoded)  // a tile's last row: one stream
          lone_row_k<K, 1>(w + g * nb, 0, nb, act, tile_sums, y, 0);
        else
          K::template tile<R, kDecoded>(w + g * nb, nb, decoded, act, p.act_stride, tile_sums, y,
                                        p.y_stride);
      });
}

}  // namespace avx2
}  // namespace vela::kernels

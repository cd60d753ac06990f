#pragma once
// Internal helpers of the AVX-512 kernels; include only from files compiled with the -mavx512*
// flags, or for the emulated library with VELA_AVX512_EMULATED (src/kernels/CMakeLists.txt).
// All loads are unaligned-safe: blocks are packed at odd strides (18, 34, 210 ... bytes).
#if defined(VELA_AVX512_EMULATED)
#include "kernels/x86/avx512/avx512_emulation.h"
#else
#include <immintrin.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/thread_buffer.h"

// GCC 12's AVX-512 headers initialize their "undefined" operands from themselves, which
// -W(maybe-)uninitialized reports wherever such an intrinsic is inlined (GCC bug 105593, fixed
// in 13). Silenced for the kernel files that include this header.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace vela::kernels::avx512 {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

// Software prefetch distance for the weight stream. A single-row matrix x vector is bound by
// memory latency as much as bandwidth: the hardware prefetcher alone left one core at ~26-33
// GB/s; requesting the weights 8 KiB ahead brings it to ~35-40 GB/s (the core's DRAM limit on
// the development machine). Rows of a matrix are contiguous, so running past a row's end
// prefetches the next row; past the matrix it is a harmless hint.
constexpr size_t kPrefetchBytes = 8192;

// Prefetches the cache lines of the kBytes weight bytes at p, kPrefetchBytes ahead.
template <size_t kBytes>
[[gnu::always_inline]] inline void prefetch_weights(const void* p) {
  const char* ahead = static_cast<const char*>(p) + kPrefetchBytes;
  for (size_t off = 0; off < kBytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
}

// acc + sum over each group of 4 bytes of u[i] * s[i] (u unsigned, s signed), per int32 lane.
// Without VNNI: vpmaddubsw then vpmaddwd by ones. vpmaddubsw saturates its int16 pair sums, which
// the operands used here never reach: u <= 128 with |s| <= 127 gives at most 2 * 128 * 127.
template <bool kVnni>
inline __m512i dot_u8s8(__m512i acc, __m512i u, __m512i s) {
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(acc, u, s);
  } else {
    const __m512i pairs = _mm512_maddubs_epi16(u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
}

// acc + sum over each pair of int16 lanes of x[i] * y[i], per int32 lane.
template <bool kVnni>
inline __m512i dot_i16(__m512i acc, __m512i x, __m512i y) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(acc, x, y);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
  }
}

// acc + per int32 lane: sum of 4 products u[i] * s[i], each int16 pair sum weighted by the
// int16 scale in `scales` (the K types' sub-block scales, repeated across a sub-block).
template <bool kVnni>
inline __m512i scaled_dot_u8s8(__m512i acc, __m512i u, __m512i s, __m512i scales) {
  return dot_i16<kVnni>(acc, _mm512_maddubs_epi16(u, s), scales);
}

// Sum of the 8 lanes. (Written out: GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized.)
inline float hsum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// exp(x) for x <= 0: x = k ln2 + r with |r| <= ln2 / 2, a degree-7 Taylor polynomial of e^r
// (truncation < 1e-8 relative), scaled by 2^k with vscalefps, which rounds into the subnormal
// range as std::exp does. Below -104 (under half the smallest subnormal) the result is 0.
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);  // ln2, high part (exact k*)
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);      // ln2, low part
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

// v[0..15] (16 rows of 16 floats) transposed in place: lane j of v[i] := lane i of v[j].
inline void transpose16(__m512 v[16]) {
  __m512 t[16];
  // Rows 2i, 2i + 1 interleaved within each 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3].
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // Rows 4i .. 4i + 3: v[4i + j]'s 128-bit lane L holds their element 4L + j.
  const auto pd = [](__m512 x) { return _mm512_castps_pd(x); };
  for (int i = 0; i < 4; ++i) {
    v[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
    v[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
    v[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
    v[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
  }
  // The 4 x 4 transpose of 128-bit lanes across the row quads.
  for (int j = 0; j < 4; ++j) {
    const __m512 ab_lo = _mm512_shuffle_f32x4(v[j], v[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 ab_hi = _mm512_shuffle_f32x4(v[j], v[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 cd_lo = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 cd_hi = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    t[j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, _MM_SHUFFLE(2, 0, 2, 0));
    t[4 + j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, _MM_SHUFFLE(3, 1, 3, 1));
    t[8 + j] = _mm512_shuffle_f32x4(ab_hi, cd_hi, _MM_SHUFFLE(2, 0, 2, 0));
    t[12 + j] = _mm512_shuffle_f32x4(ab_hi, cd_hi, _MM_SHUFFLE(3, 1, 3, 1));
  }
  for (int i = 0; i < 16; ++i) v[i] = t[i];
}

// The same for 16 rows of 16 int32 (the shuffles move bits, whatever they hold).
inline void transpose16(__m512i v[16]) {
  __m512 f[16];
  for (int i = 0; i < 16; ++i) f[i] = _mm512_castsi512_ps(v[i]);
  transpose16(f);
  for (int i = 0; i < 16; ++i) v[i] = _mm512_castps_si512(f[i]);
}

// Sum of the 16 lanes.
inline float hsum(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum(_mm256_add_ps(lo, hi));
}

// hsum of 16 vectors at once, each bit-identical to hsum(__m512) of it: the same pairs of lanes
// are added in the same tree (lanes 8 apart, then 4, 2, 1), only with two vectors' partial sums
// sharing each register. Vector v[hsum16_slot(i)]'s sum is lane i of the result.
inline __m512 hsum16(const __m512 v[16]) {
  __m512 s8[8], s4[4], s2[2];
  // 16 lanes -> 8: [a0 a1 | b0 b1] + [a2 a3 | b2 b3] (128-bit quarters).
  for (int i = 0; i < 8; ++i)
    s8[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // 8 -> 4: one quarter per vector, [a b c d].
  for (int i = 0; i < 4; ++i)
    s4[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s8[2 * i], s8[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(s8[2 * i], s8[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // 4 -> 2: within each quarter, lanes 0 + 2 and 1 + 3 (hsum's movehl step).
  for (int i = 0; i < 2; ++i)
    s2[i] = _mm512_add_ps(_mm512_shuffle_ps(s4[2 * i], s4[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(s4[2 * i], s4[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // 2 -> 1: lanes 0 + 1 (hsum's movehdup step).
  return _mm512_add_ps(_mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The input slot of hsum16 whose sum lands in lane i: lane 4k + m holds slot k + 4m.
constexpr int hsum16_slot(int i) {
  return i / 4 + 4 * (i % 4);
}

// Runs tile(std::integral_constant<int, R>, first_row) over n_rows rows in tiles of R = 8, then
// the rest in one tile of 1-4 rows or two of 2-4 (5 = 3 + 2, 6 = 4 + 2, 7 = 4 + 3): each tile
// decodes the weights again and a lone row waits on its dot products' latency, so a speculative
// verification of 3 tokens is one tile, not 2 + 1 (`vela bench matmul --type Q6_K --tokens 3`,
// Zen 5: 1.34-1.42x the cost of one token with 2 + 1).
template <class Tile>
inline void for_row_tiles(int64_t n_rows, Tile&& tile) {
  int64_t r = 0;
  for (; r + 8 <= n_rows; r += 8) tile(std::integral_constant<int, 8>{}, r);
  const auto rest = [&](auto rows) {
    tile(rows, r);
    r += decltype(rows)::value;
  };
  switch (n_rows - r) {
    case 7:
      rest(std::integral_constant<int, 4>{});
      rest(std::integral_constant<int, 3>{});
      break;
    case 6:
      rest(std::integral_constant<int, 4>{});
      rest(std::integral_constant<int, 2>{});
      break;
    case 5:
      rest(std::integral_constant<int, 3>{});
      rest(std::integral_constant<int, 2>{});
      break;
    case 4:
      rest(std::integral_constant<int, 4>{});
      break;
    case 3:
      rest(std::integral_constant<int, 3>{});
      break;
    case 2:
      rest(std::integral_constant<int, 2>{});
      break;
    case 1:
      rest(std::integral_constant<int, 1>{});
      break;
    default:
      break;
  }
}

}  // namespace vela::kernels::avx512

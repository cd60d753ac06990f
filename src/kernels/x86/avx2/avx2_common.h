#pragma once
// Internal helpers shared by the AVX2 kernel files (include only from files compiled with
// -mavx2 -mfma -mf16c). Every helper is a fixed sequence of operations, so a kernel that calls
// the same helpers for each activation row gets the same float results whether it runs for one
// row (vec_dot) or for a tile of rows (vec_dot_rows).
// The helpers have internal linkage (unnamed namespace) on purpose: a file compiled with other
// ISA flags (e.g. -mavx512f) that includes this header gets its own copies, so the linker can
// never substitute an AVX-512-encoded copy into the AVX2 kernels (an ODR merge of inline
// functions would), which would fault on AVX2-only CPUs.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

// Fully unrolls the loops over a tile's rows and over fixed sub-block counts: their per-row
// accumulator arrays must live in registers, which GCC at -O2 (unlike -O3) does not otherwise
// arrange (measured 2-3x slower).
#define VELA_UNROLL _Pragma("GCC unroll 16")

namespace vela::kernels::avx2 {
namespace {  // NOLINT(build/namespaces): see above

// How far ahead of a packed kernel's weight stream its lines are fetched (as the AVX-512 kernels
// do: the hardware prefetcher alone falls behind once a block takes a few dozen cycles).
constexpr size_t kPrefetchBytes = 8192;

// Fetches the kBytes weight bytes at p, kPrefetchBytes ahead, a cache line at a time.
template <size_t kBytes>
[[gnu::always_inline]] inline void prefetch_weights(const void* p) {
  const char* ahead = static_cast<const char*>(p) + kPrefetchBytes;
  for (size_t line = 0; line < kBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
}

// fp16 bits -> f32 (exact, F16C; same value as util/half.h's fp16_to_fp32).
inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

// Sum of the 8 lanes, always in the same order ((lo + hi) pairs, then pairs of those).
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// v[0..7] (8 rows of 8 floats) transposed in place: lane j of v[i] := lane i of v[j].
inline void transpose8(__m256 v[8]) {
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {  // rows 2i, 2i + 1 interleaved within each 128-bit half
    t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // rows 4i .. 4i + 3: v[4i + j]'s half H holds element 4H + j
    v[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    v[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    v[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    v[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {  // the halves across the two row quads
    t[j] = _mm256_permute2f128_ps(v[j], v[4 + j], 0x20);
    t[4 + j] = _mm256_permute2f128_ps(v[j], v[4 + j], 0x31);
  }
  for (int i = 0; i < 8; ++i) v[i] = t[i];
}

// The same for 8 rows of 8 int32 (the shuffles move bits, whatever they hold).
inline void transpose8(__m256i v[8]) {
  __m256 f[8];
  for (int i = 0; i < 8; ++i) f[i] = _mm256_castsi256_ps(v[i]);
  transpose8(f);
  for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(f[i]);
}

// Sum of the 8 int32 lanes.
inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i loadu256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 16 bytes of packed nibbles -> 32 bytes: byte j < 16 is the low nibble of qs[j], byte j + 16
// its high nibble (the element order of Q4_0/Q4_1/Q5_0/Q5_1).
inline __m256i unpack_nibbles_32(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, byte j = 0xFF where bit j is set, else 0.
inline __m256i bits_to_byte_mask(uint32_t bits) {
  // Byte j takes byte j / 8 of `bits` (shuffle within each 128-bit half; the word is in both),
  // then keeps only its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)), _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                                       0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline int32_t load_i32(const void* p) {
  return int32_t(load_u32(p));
}

// Sums of 4 adjacent products of unsigned bytes u (each <= 128) and signed bytes s
// (each > -128): 8 int32. maddubs' int16 pair sums stay below 2 * 128 * 127 < 2^15, so they
// never saturate.
inline __m256i dot_u8_i8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Same for two signed operands: w_abs = |w| (precomputed, shared by all activation rows), and
// the activation takes w's sign (w = 0 zeroes it). The activation must not be -128, which our
// quantizers never produce (they map to [-127, 127]).
inline __m256i dot_i8_i8(__m256i w_abs, __m256i w, __m256i a) {
  return dot_u8_i8(w_abs, _mm256_sign_epi8(a, w));
}

// Runs Kernel::dot<k>(n, w_row, act_rows[k], out[k]) over n_act activation rows (act: row t at
// act + t * act_stride) in tiles of kTile rows, writing out[t * out_stride]. Each row's result
// does not depend on the tile it is computed in, so vec_dot_rows equals vec_dot bit for bit.
template <class Kernel, int kTile>
struct RowTiles {
  template <int k>
  static void tile(int64_t n, const void* w, const uint8_t* act, size_t act_stride, float* out,
                   int64_t out_stride) {
    const uint8_t* rows[k];
    float sums[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) rows[t] = act + size_t(t) * act_stride;
    Kernel::template dot<k>(n, w, rows, sums);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) out[t * out_stride] = sums[t];
  }

  // Dispatches a remainder of `rem` < kTile rows to the matching tile size.
  template <int k>
  static void remainder(int64_t n, const void* w, const uint8_t* act, size_t act_stride, int rem,
                        float* out, int64_t out_stride) {
    if constexpr (k > 0) {
      if (rem == k) return tile<k>(n, w, act, act_stride, out, out_stride);
      remainder<k - 1>(n, w, act, act_stride, rem, out, out_stride);
    }
  }

  static void rows(int64_t n, const void* w, const uint8_t* act, size_t act_stride, int64_t n_act,
                   float* out, int64_t out_stride) {
    int64_t t = 0;
    for (; t + kTile <= n_act; t += kTile) {
      tile<kTile>(n, w, act + size_t(t) * act_stride, act_stride, out + t * out_stride, out_stride);
    }
    remainder<kTile - 1>(n, w, act + size_t(t) * act_stride, act_stride, int(n_act - t),
                         out + t * out_stride, out_stride);
  }

  static float one(int64_t n, const void* w, const void* act) {
    const uint8_t* rows[1] = {static_cast<const uint8_t*>(act)};
    float sum;
    Kernel::template dot<1>(n, w, rows, &sum);
    return sum;
  }
};

// exp(x) for x <= 0, the AVX-512 kernels' method (avx512_util.h: exp_nonpositive): x = k ln2 + r,
// a degree-7 Taylor polynomial of e^r, times 2^k. Without vscalefps, 2^k is applied as
// 2^max(k, -125) (exact: the product stays a normal float) times 2^(k - that), so the result is
// rounded once, as std::exp's, subnormal results included. Below -104 it is 0.
inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-104.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);  // ln2, high part (exact k*)
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);      // ln2, low part
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256 k1 = _mm256_max_ps(k, _mm256_set1_ps(-125.0f));
  const auto pow2 = [](__m256 e) {  // 2^e for integral e in [-126, 127]
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(e), _mm256_set1_epi32(127)), 23));
  };
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2(k1)), pow2(_mm256_sub_ps(k, k1)));
}

}  // namespace
}  // namespace vela::kernels::avx2

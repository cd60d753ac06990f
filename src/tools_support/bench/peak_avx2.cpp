// Compiled with AVX2 + FMA flags; called only when cpu_features() reports them.
#include <immintrin.h>

#include "tools_support/bench/peak_kernels.h"

namespace vela::bench {
namespace {

float hsum(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}

// Unsigned: the sums are only kept alive, and may wrap.
uint64_t hsum64(__m256i v) {
  alignas(32) uint64_t x[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(x), v);
  return x[0] + x[1] + x[2] + x[3];
}

}  // namespace

uint64_t fp32_fma_loop_avx2(uint64_t iters, float* sink) {
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  __m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f),
         a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f),
         a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f),
         a9 = _mm256_set1_ps(1.0f);
  for (uint64_t i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, m, c);
    a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c);
    a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c);
    a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
  }
  *sink =
      hsum(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                       _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
                         _mm256_add_ps(a8, a9)));
  return iters * 10 * 8 * 2;
}

uint64_t int8_dot_loop_avx2(uint64_t iters, int32_t* sink) {
  // The AVX2 int8 dot: u8 x s8 -> pairs summed to i16 (maddubs), pairs of i16 -> i32 (madd).
  // x changes every iteration so the products cannot be hoisted; the chains are independent.
  const __m256i one8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
  const __m256i y0 = _mm256_set1_epi8(-2), y1 = _mm256_set1_epi8(3), y2 = _mm256_set1_epi8(-4),
                y3 = _mm256_set1_epi8(5), y4 = _mm256_set1_epi8(-6), y5 = _mm256_set1_epi8(7);
  __m256i x = _mm256_set1_epi8(3);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  for (uint64_t i = 0; i < iters; ++i) {
    x = _mm256_add_epi8(x, one8);
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y0), ones));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y1), ones));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y2), ones));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y3), ones));
    a4 = _mm256_add_epi32(a4, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y4), ones));
    a5 = _mm256_add_epi32(a5, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y5), ones));
  }
  const __m256i s =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                       _mm256_add_epi32(a4, a5));
  *sink = int32_t(uint32_t(_mm256_extract_epi32(s, 0)) + uint32_t(_mm256_extract_epi32(s, 7)));
  return iters * 6 * 32 * 2;
}

uint64_t read_sum_avx2(const uint8_t* data, size_t bytes) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < bytes; i += 128) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 32)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 64)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 96)));
  }
  return hsum64(_mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
}

}  // namespace vela::bench

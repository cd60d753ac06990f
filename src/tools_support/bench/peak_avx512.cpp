// Compiled with AVX-512 (F, BW, VNNI, BF16) flags; each loop is called only when cpu_features()
// reports what it uses.
#include <immintrin.h>

#include "tools_support/bench/peak_kernels.h"

namespace vela::bench {
namespace {

// Horizontal sums through memory (GCC 12 warns inside its own _mm512_reduce_* helpers).
float hsum(__m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}

// Unsigned: the sums are only kept alive, and may wrap.
uint64_t hsum64(__m512i v) {
  alignas(64) uint64_t x[8];
  _mm512_store_si512(x, v);
  uint64_t s = 0;
  for (uint64_t e : x) s += e;
  return s;
}

}  // namespace

uint64_t fp32_fma_loop_avx512(uint64_t iters, float* sink) {
  // 12 independent chains cover the FMA latency (4 cycles) times two FMA ports.
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
  __m512 a0 = _mm512_set1_ps(0.1f), a1 = _mm512_set1_ps(0.2f), a2 = _mm512_set1_ps(0.3f),
         a3 = _mm512_set1_ps(0.4f), a4 = _mm512_set1_ps(0.5f), a5 = _mm512_set1_ps(0.6f),
         a6 = _mm512_set1_ps(0.7f), a7 = _mm512_set1_ps(0.8f), a8 = _mm512_set1_ps(0.9f),
         a9 = _mm512_set1_ps(1.0f), a10 = _mm512_set1_ps(1.1f), a11 = _mm512_set1_ps(1.2f);
  for (uint64_t i = 0; i < iters; ++i) {
    a0 = _mm512_fmadd_ps(a0, m, c);
    a1 = _mm512_fmadd_ps(a1, m, c);
    a2 = _mm512_fmadd_ps(a2, m, c);
    a3 = _mm512_fmadd_ps(a3, m, c);
    a4 = _mm512_fmadd_ps(a4, m, c);
    a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c);
    a7 = _mm512_fmadd_ps(a7, m, c);
    a8 = _mm512_fmadd_ps(a8, m, c);
    a9 = _mm512_fmadd_ps(a9, m, c);
    a10 = _mm512_fmadd_ps(a10, m, c);
    a11 = _mm512_fmadd_ps(a11, m, c);
  }
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                    _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  *sink = hsum(s);
  return iters * 12 * 16 * 2;
}

uint64_t bf16_dot_loop_avx512(uint64_t iters, float* sink) {
  // As the fp32 loop: 12 chains; each vdpbf16ps adds two bf16 products per f32 lane.
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3F80), y = (__m512bh)_mm512_set1_epi16(0x3A83);
  __m512 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_ps(0.1f * float(k));
  for (uint64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) a[k] = _mm512_dpbf16_ps(a[k], x, y);
  }
  __m512 s = a[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, a[k]);
  *sink = hsum(s);
  return iters * 12 * 16 * 4;
}

uint64_t int8_dot_loop_avx512_vnni(uint64_t iters, int32_t* sink) {
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
          a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
  for (uint64_t i = 0; i < iters; ++i) {
    a0 = _mm512_dpbusd_epi32(a0, x, y);
    a1 = _mm512_dpbusd_epi32(a1, x, y);
    a2 = _mm512_dpbusd_epi32(a2, x, y);
    a3 = _mm512_dpbusd_epi32(a3, x, y);
    a4 = _mm512_dpbusd_epi32(a4, x, y);
    a5 = _mm512_dpbusd_epi32(a5, x, y);
    a6 = _mm512_dpbusd_epi32(a6, x, y);
    a7 = _mm512_dpbusd_epi32(a7, x, y);
    a8 = _mm512_dpbusd_epi32(a8, x, y);
    a9 = _mm512_dpbusd_epi32(a9, x, y);
    a10 = _mm512_dpbusd_epi32(a10, x, y);
    a11 = _mm512_dpbusd_epi32(a11, x, y);
  }
  __m512i s =
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                       _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
  s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
  *sink = int32_t(uint32_t(hsum64(s)));
  return iters * 12 * 64 * 2;
}

uint64_t read_sum_avx512(const uint8_t* data, size_t bytes) {
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < bytes; i += 256) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(data + i));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(data + i + 64));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(data + i + 128));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(data + i + 192));
  }
  return hsum64(_mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
}

}  // namespace vela::bench

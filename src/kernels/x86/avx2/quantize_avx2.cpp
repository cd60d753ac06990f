// AVX2 activation conversions, bit-identical to the scalar quantizers in quant/quantize.cpp and
// quant/quantize_k.cpp (kernel_table.h requires it: which table runs must not change what a
// matmul quantizes). Each step mirrors the scalar one exactly:
//  * absolute maxima ignore NaN as std::max(amax, |x|) and `|x| > amax` do (vmaxps returns its
//    second operand when either is NaN, so the running maximum goes second);
//  * scales are computed from that maximum with the same scalar float operations;
//  * x * inv_d is rounded with the same "add 1.5 * 2^23, keep the low mantissa bits" trick as
//    quant/rounding.h, the product first rounded to float (see product_barrier), and the int
//    result truncated to int8 by wrapping, as the scalar int8_t() conversion does.
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks.h"
#include "util/half.h"

namespace vela::kernels::avx2 {

namespace {

// Keeps the compiler from fusing the multiply before it with the rounding add after it into one
// FMA (C++ allows contraction, and GCC does it for these intrinsics): the scalar code rounds the
// product to float first.
inline __m256 product_barrier(__m256 v) {
  __asm__("" : "+x"(v));
  return v;
}

inline __m256 abs_ps(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

// max over |x[i]| for i < count (a multiple of 8), NaN ignored, starting from 0.
inline float abs_max(const float* x, int count) {
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < count; i += 8) m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), m);
  __m128 h = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
  h = _mm_max_ps(_mm_movehl_ps(h, h), h);
  h = _mm_max_ss(_mm_movehdup_ps(h), h);
  return _mm_cvtss_f32(h);
}

// quant_detail::round_nearest_even(x * scale) per lane, as int32.
inline __m256i round_scaled(const float* x, __m256 scale) {
  const __m256 product = product_barrier(_mm256_mul_ps(_mm256_loadu_ps(x), scale));
  const __m256i bits = _mm256_castps_si256(_mm256_add_ps(product, _mm256_set1_ps(12582912.0f)));
  return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                          _mm256_set1_epi32(0x00400000));
}

// int32 -> the int8 value int8_t(v) has (two's complement wrap), still as int32.
inline __m256i wrap_to_i8(__m256i v) {
  return _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24);
}

// Stores the low byte of each of 4 x 8 int32 (what int8_t() keeps) as 32 bytes, in order.
inline void store_bytes(const __m256i v[4], int8_t* dst) {
  const __m256i byte = _mm256_set1_epi32(0xff);
  // packus keeps values as they are once masked to 0..255; it interleaves 128-bit halves, which
  // the final permute undoes.
  const __m256i p01 =
      _mm256_packus_epi32(_mm256_and_si256(v[0], byte), _mm256_and_si256(v[1], byte));
  const __m256i p23 =
      _mm256_packus_epi32(_mm256_and_si256(v[2], byte), _mm256_and_si256(v[3], byte));
  const __m256i packed = _mm256_packus_epi16(p01, p23);
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(dst),
      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// One 32-element block of quantize_row_q8_0_activations / _q8_1_activations: writes qs and
// returns the amax and the sum of the stored quants.
inline float quantize_block_32(const float* src, int8_t* qs, int* sum) {
  const float amax = abs_max(src, 32);
  const float inv_d = amax != 0.0f ? 127.0f / amax : 0.0f;
  const __m256 scale = _mm256_set1_ps(inv_d);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = wrap_to_i8(round_scaled(src + 8 * k, scale));
  store_bytes(q, qs);
  *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  return amax;
}

}  // namespace

void quantize_row_q8_0_activations(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, src += kQK8_0) {
    int sum;
    const float amax = quantize_block_32(src, blocks[b].qs, &sum);
    blocks[b].d = fp32_to_fp16(amax / 127.0f);
  }
}

void quantize_row_q8_1_activations(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQK8_1; ++b, src += kQK8_1) {
    int sum;
    const float amax = quantize_block_32(src, blocks[b].qs, &sum);
    const float d = amax / 127.0f;
    blocks[b].d = fp32_to_fp16(d);
    blocks[b].s = fp32_to_fp16(float(sum) * d);
  }
}

void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ8_K& blk = blocks[b];
    const float amax = abs_max(src, kQK_K);
    if (amax == 0.0f) {
      blk.d = 0.0f;
      std::memset(blk.qs, 0, sizeof(blk.qs));
      std::memset(blk.bsums, 0, sizeof(blk.bsums));
      continue;
    }
    // The scalar code keeps the first element reaching the maximum magnitude (its sign matters).
    float max = 0.0f;
    const __m256 amax_v = _mm256_set1_ps(amax);
    for (int i = 0; i < kQK_K; i += 8) {
      const int hits =
          _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(src + i)), amax_v, _CMP_EQ_OQ));
      if (hits != 0) {
        max = src[i + __builtin_ctz(unsigned(hits))];
        break;
      }
    }
    const float inv_d = -127.0f / max;
    const __m256 scale = _mm256_set1_ps(inv_d);
    const __m256i limit = _mm256_set1_epi32(127);
    const __m256i ones_u8 = _mm256_set1_epi8(1);
    __m256i sums16[8];  // per 32 elements: 4-element sums, 8 int32
    for (int c = 0; c < 8; ++c) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_min_epi32(round_scaled(src + 32 * c + 8 * k, scale), limit);
      }
      store_bytes(q, blk.qs + 32 * c);
      sums16[c] = dot_u8_i8(ones_u8, loadu256(blk.qs + 32 * c));
    }
    // hadd twice turns 4-element sums into 16-element ones: for chunks c0..c3 the result holds
    // [c0 lo, c1 lo, c2 lo, c3 lo | c0 hi, c1 hi, c2 hi, c3 hi] (lo/hi: elements 0-15/16-31).
    const __m256i s0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(sums16[0], sums16[1]),
                                            _mm256_hadd_epi32(sums16[2], sums16[3]));
    const __m256i s4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(sums16[4], sums16[5]),
                                            _mm256_hadd_epi32(sums16[6], sums16[7]));
    // |sum| <= 16 * 128 fits int16; packs gives [c0..c7 lo | c0..c7 hi], interleave to bsums order.
    const __m256i packed = _mm256_packs_epi32(s0123, s4567);
    const __m128i lo = _mm256_castsi256_si128(packed);
    const __m128i hi = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(blk.bsums), _mm_unpacklo_epi16(lo, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(blk.bsums + 8), _mm_unpackhi_epi16(lo, hi));
    blk.d = 1.0f / inv_d;
  }
}

void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf_bits = _mm256_set1_epi32(0x7f800000);
  const __m256i one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    const __m256i x = loadu256(src + i);
    // NaN: keep the top half and make it quiet; otherwise round to nearest even.
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf_bits);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(64));
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                          _mm256_and_si256(_mm256_srli_epi32(x, 16), one));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
    // Values fit 16 bits, so unsigned saturation keeps them; select the 4 + 4 packed words.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) out[i] = fp32_to_bf16(src[i]);
}

}  // namespace vela::kernels::avx2

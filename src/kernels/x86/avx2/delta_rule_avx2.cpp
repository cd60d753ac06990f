// AVX2 delta rule step (kernels/delta_rule_kernels.h): as the AVX-512 one, 8 lanes at a time; a
// d_k that is not a multiple of 8 ends in scalar elements.
#include "kernels/delta_rule_kernels.h"
#include "kernels/x86/avx2/avx2_common.h"

namespace vela::kernels {
namespace avx2 {
namespace {

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float decay,
                     float beta, float scale, float* out, int32_t d_k, int32_t d_v) {
  const int32_t whole = d_k / 8 * 8;
  const __m256 vdecay = _mm256_set1_ps(decay);
  for (int32_t j = 0; j < d_v; ++j) {
    float* row = state + int64_t(j) * d_k;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int32_t i = 0;
    for (; i + 16 <= whole; i += 16) {
      const __m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay);
      const __m256 r1 = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8), vdecay);
      _mm256_storeu_ps(row + i, r0);
      _mm256_storeu_ps(row + i + 8, r1);
      acc0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(k + i), acc0);
      acc1 = _mm256_fmadd_ps(r1, _mm256_loadu_ps(k + i + 8), acc1);
    }
    for (; i < whole; i += 8) {
      const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay);
      _mm256_storeu_ps(row + i, r);
      acc0 = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i), acc0);
    }
    float dot_k = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < d_k; ++i) {
      row[i] *= decay;
      dot_k += row[i] * k[i];
    }
    const float delta = (v[j] - dot_k) * beta;
    const __m256 vdelta = _mm256_set1_ps(delta);
    acc0 = _mm256_setzero_ps();
    acc1 = _mm256_setzero_ps();
    i = 0;
    for (; i + 16 <= whole; i += 16) {
      const __m256 r0 = _mm256_fmadd_ps(vdelta, _mm256_loadu_ps(k + i), _mm256_loadu_ps(row + i));
      const __m256 r1 =
          _mm256_fmadd_ps(vdelta, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(row + i + 8));
      _mm256_storeu_ps(row + i, r0);
      _mm256_storeu_ps(row + i + 8, r1);
      acc0 = _mm256_fmadd_ps(r0, _mm256_loadu_ps(q + i), acc0);
      acc1 = _mm256_fmadd_ps(r1, _mm256_loadu_ps(q + i + 8), acc1);
    }
    for (; i < whole; i += 8) {
      const __m256 r = _mm256_fmadd_ps(vdelta, _mm256_loadu_ps(k + i), _mm256_loadu_ps(row + i));
      _mm256_storeu_ps(row + i, r);
      acc0 = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc0);
    }
    float dot_q = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < d_k; ++i) {
      row[i] += delta * k[i];
      dot_q += row[i] * q[i];
    }
    out[j] = dot_q * scale;
  }
}

// Streaming stores from the first 32-byte boundary of dst; plain ones before it and in the tail.
void save_state(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 31) != 0; ++i) dst[i] = src[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();
}

}  // namespace
}  // namespace avx2

const DeltaRuleKernels& delta_rule_kernels_avx2() {
  static const DeltaRuleKernels table = {
      avx2::delta_rule_step, avx2::save_state,
      delta_rule_steps_by_token<avx2::delta_rule_step, avx2::save_state>};
  return table;
}

}  // namespace vela::kernels

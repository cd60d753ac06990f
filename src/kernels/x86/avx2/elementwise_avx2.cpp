// AVX2 element-wise kernels (kernels/elementwise.h), the AVX-512 kernels' steps on 8 lanes: SiLU
// as g * sigmoid(g) with the exp of a non-positive argument only (e = exp(-|g|), sigmoid(g) =
// 1 / (1 + e) for g >= 0 and e / (1 + e) below, so no exp overflows), GELU's tanh from
// exp(-2|u|). The row's tail is one masked load and store.
#include "kernels/elementwise.h"
#include "kernels/x86/avx2/avx2_common.h"

namespace vela::kernels {
namespace avx2 {
namespace {

inline __m256 abs8(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

inline __m256 silu_mul8(__m256 g, __m256 up) {
  const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_setzero_ps(), abs8(g)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 negative = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 numerator = _mm256_blendv_ps(one, e, negative);
  const __m256 sigmoid = _mm256_div_ps(numerator, _mm256_add_ps(one, e));
  return _mm256_mul_ps(_mm256_mul_ps(g, sigmoid), up);
}

// tanh(u) = sign(u) (1 - e) / (1 + e) with e = exp(-2 |u|) <= 1.
inline __m256 gelu_tanh_mul8(__m256 x, __m256 up) {
  const __m256 u = _mm256_mul_ps(
      _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), x),
      _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), _mm256_mul_ps(x, x), _mm256_set1_ps(1.0f)));
  const __m256 e = exp_nonpositive(_mm256_mul_ps(_mm256_set1_ps(-2.0f), abs8(u)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t_abs = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  const __m256 t = _mm256_or_ps(t_abs, _mm256_and_ps(u, _mm256_set1_ps(-0.0f)));
  const __m256 half_x = _mm256_mul_ps(_mm256_set1_ps(0.5f), x);
  return _mm256_mul_ps(_mm256_mul_ps(half_x, _mm256_add_ps(one, t)), up);
}

template <__m256 (*Op)(__m256, __m256)>
void apply_gated(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(gate + i, Op(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {  // lanes below n - i are on; the others load 0 and are not stored
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n - i)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(gate + i, m,
                        Op(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  apply_gated<silu_mul8>(gate, up, n);
}
void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  apply_gated<gelu_tanh_mul8>(gate, up, n);
}

}  // namespace
}  // namespace avx2

const ElementwiseKernels& elementwise_kernels_avx2() {
  static const ElementwiseKernels table = {avx2::silu_mul, avx2::gelu_tanh_mul};
  return table;
}

}  // namespace vela::kernels

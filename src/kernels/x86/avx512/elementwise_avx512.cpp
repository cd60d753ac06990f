// AVX-512 element-wise kernels (kernels/elementwise.h). SiLU as g * sigmoid(g) with the exp of a
// non-positive argument only: e = exp(-|g|), sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e)
// below, so no exp overflows; GELU's tanh likewise from exp(-2|u|).
#include "kernels/elementwise.h"
#include "kernels/x86/avx512/avx512_util.h"

namespace vela::kernels {
namespace avx512 {
namespace {

inline __m512 silu_mul16(__m512 g, __m512 up) {
  const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __mmask16 negative = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_mov_ps(one, negative, e);
  const __m512 sigmoid = _mm512_div_ps(numerator, _mm512_add_ps(one, e));
  return _mm512_mul_ps(_mm512_mul_ps(g, sigmoid), up);
}

// tanh(u) = sign(u) (1 - e) / (1 + e) with e = exp(-2 |u|) <= 1.
inline __m512 gelu_tanh_mul16(__m512 x, __m512 up) {
  const __m512 u = _mm512_mul_ps(
      _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), x),
      _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), _mm512_mul_ps(x, x), _mm512_set1_ps(1.0f)));
  const __m512 abs_u = _mm512_abs_ps(u);
  const __m512 e = exp_nonpositive(_mm512_mul_ps(_mm512_set1_ps(-2.0f), abs_u));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t_abs = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 sign = _mm512_and_ps(u, _mm512_set1_ps(-0.0f));
  const __m512 t = _mm512_or_ps(t_abs, sign);
  const __m512 half_x = _mm512_mul_ps(_mm512_set1_ps(0.5f), x);
  return _mm512_mul_ps(_mm512_mul_ps(half_x, _mm512_add_ps(one, t)), up);
}

template <__m512 (*Op)(__m512, __m512)>
void apply_gated(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(gate + i, Op(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(gate + i, m,
                          Op(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  apply_gated<silu_mul16>(gate, up, n);
}
void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  apply_gated<gelu_tanh_mul16>(gate, up, n);
}

}  // namespace
}  // namespace avx512

const ElementwiseKernels& elementwise_kernels_avx512() {
  static const ElementwiseKernels table = {avx512::silu_mul, avx512::gelu_tanh_mul};
  return table;
}

}  // namespace vela::kernels

// AVX-512 delta rule step (kernels/delta_rule_kernels.h). A row of the state is read twice from
// L1 (decay and the dot with k, then the update and the dot with q); each dot product keeps two
// accumulators so consecutive FMAs do not wait on each other, and rows are independent, so the
// core overlaps one row's horizontal sums with the next row's loads. A d_k that is not a multiple
// of 16 ends in a masked vector.
#include "kernels/delta_rule_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"

namespace vela::kernels {
namespace avx512 {
namespace {

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float decay,
                     float beta, float scale, float* out, int32_t d_k, int32_t d_v) {
  const int32_t whole = d_k / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (d_k - whole)) - 1u);
  const __m512 vdecay = _mm512_set1_ps(decay);
  for (int32_t j = 0; j < d_v; ++j) {
    float* row = state + int64_t(j) * d_k;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int32_t i = 0;
    for (; i + 32 <= whole; i += 32) {
      const __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(row + i), vdecay);
      const __m512 r1 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 16), vdecay);
      _mm512_storeu_ps(row + i, r0);
      _mm512_storeu_ps(row + i + 16, r1);
      acc0 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(k + i), acc0);
      acc1 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(k + i + 16), acc1);
    }
    for (; i < whole; i += 16) {
      const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + i), vdecay);
      _mm512_storeu_ps(row + i, r);
      acc0 = _mm512_fmadd_ps(r, _mm512_loadu_ps(k + i), acc0);
    }
    if (tail) {
      const __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, row + i), vdecay);
      _mm512_mask_storeu_ps(row + i, tail, r);
      acc1 = _mm512_fmadd_ps(r, _mm512_maskz_loadu_ps(tail, k + i), acc1);
    }
    const float delta = (v[j] - _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1))) * beta;
    const __m512 vdelta = _mm512_set1_ps(delta);
    acc0 = _mm512_setzero_ps();
    acc1 = _mm512_setzero_ps();
    i = 0;
    for (; i + 32 <= whole; i += 32) {
      const __m512 r0 = _mm512_fmadd_ps(vdelta, _mm512_loadu_ps(k + i), _mm512_loadu_ps(row + i));
      const __m512 r1 =
          _mm512_fmadd_ps(vdelta, _mm512_loadu_ps(k + i + 16), _mm512_loadu_ps(row + i + 16));
      _mm512_storeu_ps(row + i, r0);
      _mm512_storeu_ps(row + i + 16, r1);
      acc0 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(q + i), acc0);
      acc1 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(q + i + 16), acc1);
    }
    for (; i < whole; i += 16) {
      const __m512 r = _mm512_fmadd_ps(vdelta, _mm512_loadu_ps(k + i), _mm512_loadu_ps(row + i));
      _mm512_storeu_ps(row + i, r);
      acc0 = _mm512_fmadd_ps(r, _mm512_loadu_ps(q + i), acc0);
    }
    if (tail) {
      const __m512 r = _mm512_fmadd_ps(vdelta, _mm512_maskz_loadu_ps(tail, k + i),
                                       _mm512_maskz_loadu_ps(tail, row + i));
      _mm512_mask_storeu_ps(row + i, tail, r);
      acc1 = _mm512_fmadd_ps(r, _mm512_maskz_loadu_ps(tail, q + i), acc1);
    }
    out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * scale;
  }
}

// Streaming stores from the first 64-byte boundary of dst; plain ones before it and in the tail.
void save_state(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 63) != 0; ++i) dst[i] = src[i];
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();
}

// A row of d_k = 16 * NV values (NV even) in NV registers across the run: the arithmetic of
// delta_rule_step in its order (even vectors into acc0, odd ones into acc1, as its 32-wide loop),
// so the results are the same bit for bit; the row is read and written once, and each saved
// state is streamed from the registers.
template <int NV>
void delta_rule_steps_in_registers(float* state, const DeltaRuleToken* tokens, int32_t n_tokens,
                                   float scale, int32_t d_v) {
  constexpr int32_t d_k = 16 * NV;
  bool aligned_saves = true;
  for (int32_t t = 0; t < n_tokens; ++t)
    if (tokens[t].save != nullptr && (reinterpret_cast<uintptr_t>(tokens[t].save) & 63) != 0)
      aligned_saves = false;
  for (int32_t j = 0; j < d_v; ++j) {
    float* row = state + int64_t(j) * d_k;
    __m512 r[NV];
    for (int m = 0; m < NV; ++m) r[m] = _mm512_loadu_ps(row + 16 * m);
    for (int32_t t = 0; t < n_tokens; ++t) {
      const DeltaRuleToken& x = tokens[t];
      const __m512 vdecay = _mm512_set1_ps(x.decay);
      __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
      for (int m = 0; m < NV; m += 2) {
        r[m] = _mm512_mul_ps(r[m], vdecay);
        r[m + 1] = _mm512_mul_ps(r[m + 1], vdecay);
        acc0 = _mm512_fmadd_ps(r[m], _mm512_loadu_ps(x.k + 16 * m), acc0);
        acc1 = _mm512_fmadd_ps(r[m + 1], _mm512_loadu_ps(x.k + 16 * m + 16), acc1);
      }
      const float delta = (x.v[j] - _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1))) * x.beta;
      const __m512 vdelta = _mm512_set1_ps(delta);
      acc0 = _mm512_setzero_ps();
      acc1 = _mm512_setzero_ps();
      for (int m = 0; m < NV; m += 2) {
        r[m] = _mm512_fmadd_ps(vdelta, _mm512_loadu_ps(x.k + 16 * m), r[m]);
        r[m + 1] = _mm512_fmadd_ps(vdelta, _mm512_loadu_ps(x.k + 16 * m + 16), r[m + 1]);
        acc0 = _mm512_fmadd_ps(r[m], _mm512_loadu_ps(x.q + 16 * m), acc0);
        acc1 = _mm512_fmadd_ps(r[m + 1], _mm512_loadu_ps(x.q + 16 * m + 16), acc1);
      }
      x.out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * scale;
      if (x.save != nullptr) {
        float* saved = x.save + int64_t(j) * d_k;
        for (int m = 0; m < NV; ++m) {
          if (aligned_saves)
            _mm512_stream_ps(saved + 16 * m, r[m]);
          else
            _mm512_storeu_ps(saved + 16 * m, r[m]);
        }
      }
    }
    for (int m = 0; m < NV; ++m) _mm512_storeu_ps(row + 16 * m, r[m]);
  }
  _mm_sfence();
}

void delta_rule_steps(float* state, const DeltaRuleToken* tokens, int32_t n_tokens, float scale,
                      int32_t d_k, int32_t d_v) {
  switch (d_k) {
    case 32:
      return delta_rule_steps_in_registers<2>(state, tokens, n_tokens, scale, d_v);
    case 64:
      return delta_rule_steps_in_registers<4>(state, tokens, n_tokens, scale, d_v);
    case 128:
      return delta_rule_steps_in_registers<8>(state, tokens, n_tokens, scale, d_v);
    default:
      return delta_rule_steps_by_token<delta_rule_step, save_state>(state, tokens, n_tokens, scale,
                                                                    d_k, d_v);
  }
}

}  // namespace
}  // namespace avx512

const DeltaRuleKernels& delta_rule_kernels_avx512() {
  static const DeltaRuleKernels table = {avx512::delta_rule_step, avx512::save_state,
                                         avx512::delta_rule_steps};
  return table;
}

}  // namespace vela::kernels

// AVX2 attention row kernels (kernels/attention_kernels.h): 8 values per step, a row's last
// n % 8 values in scalar code (head dims are almost always multiples of 8, and AVX2 has no
// masked 16-bit loads). No util/half.h or std:: templates here: an out-of-line copy compiled
// with AVX2 flags could be the one the linker keeps for every other file. Stored values convert
// exactly to f32 (f16 by vcvtph2ps, bf16 by a 16-bit shift, q8_0 as int8 * scale), so only the
// summation order differs from the scalar reference.
#include "kernels/attention_kernels.h"
#include "kernels/attention_rows_generic.h"
#include "kernels/x86/avx2/avx2_common.h"

namespace vela::kernels {
namespace avx2 {
namespace {

constexpr int kQ8Block = 32;
constexpr int kQ8BlockBytes = 34;

// Loaders of 8 row values starting at element i, as f32, and of one value for the tail.
struct F32Row {
  static __m256 load(const void* row, int i) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  }
  static float at(const void* row, int i) { return static_cast<const float*>(row)[i]; }
};

struct F16Row {
  static __m256 load(const void* row, int i) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
  }
  static float at(const void* row, int i) {
    return half_to_float(static_cast<const uint16_t*>(row)[i]);
  }
};

struct BF16Row {
  static __m256 load(const void* row, int i) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float at(const void* row, int i) {
    return _mm_cvtss_f32(_mm_castsi128_ps(
        _mm_cvtsi32_si128(int(uint32_t(static_cast<const uint16_t*>(row)[i]) << 16))));
  }
};

// Two accumulators over 16-value steps hide the FMA latency.
template <class Row>
float dot(const float* q, const void* k_row, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Row::load(k_row, i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), Row::load(k_row, i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Row::load(k_row, i), acc0);
    i += 8;
  }
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += q[i] * Row::at(k_row, i);
  return sum;
}

template <class Row>
void axpy(float w, const void* v_row, float* acc, int n) {
  const __m256 wv = _mm256_set1_ps(w);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, Row::load(v_row, i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += w * Row::at(v_row, i);
}

// Multi-row forms for rows of 16 * kPairs values (head sizes 32 and 64): the stored row is
// converted once into registers for every query row; each row's result is the single-row
// kernel's (the same chains in the same order). Other lengths loop over the single-row kernels.
template <class Row, int kPairs>
void dot_rows_held(const float* q, int64_t q_stride, int n_rows, const void* k_row, float scale,
                   float* out, int64_t out_stride) {
  __m256 k[2 * kPairs];
  for (int i = 0; i < 2 * kPairs; ++i) k[i] = Row::load(k_row, 8 * i);
  for (int r = 0; r < n_rows; ++r) {
    const float* qr = q + r * q_stride;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int p = 0; p < kPairs; ++p) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + 16 * p), k[2 * p], acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + 16 * p + 8), k[2 * p + 1], acc1);
    }
    out[r * out_stride] = hsum(_mm256_add_ps(acc0, acc1)) * scale;
  }
}

template <class Row>
void dot_rows(const float* q, int64_t q_stride, int n_rows, const void* k_row, int n, float scale,
              float* out, int64_t out_stride) {
  if (n == 32) return dot_rows_held<Row, 2>(q, q_stride, n_rows, k_row, scale, out, out_stride);
  if (n == 64) return dot_rows_held<Row, 4>(q, q_stride, n_rows, k_row, scale, out, out_stride);
  dot_rows_loop<dot<Row>>(q, q_stride, n_rows, k_row, n, scale, out, out_stride);
}

template <class Row, int kVecs>
void axpy_rows_held(const float* w, int64_t w_stride, int n_rows, const void* const* v_rows,
                    int n_pos, float* acc, int64_t acc_stride) {
  for (int p = 0; p < n_pos; ++p) {
    __m256 v[kVecs];
    for (int i = 0; i < kVecs; ++i) v[i] = Row::load(v_rows[p], 8 * i);
    for (int r = 0; r < n_rows; ++r) {
      const __m256 wv = _mm256_set1_ps(w[r * w_stride + p]);
      float* a = acc + r * acc_stride;
      for (int i = 0; i < kVecs; ++i)
        _mm256_storeu_ps(a + 8 * i, _mm256_fmadd_ps(wv, v[i], _mm256_loadu_ps(a + 8 * i)));
    }
  }
}

template <class Row>
void axpy_rows(const float* w, int64_t w_stride, int n_rows, const void* const* v_rows, int n_pos,
               float* acc, int64_t acc_stride, int n) {
  if (n == 32) return axpy_rows_held<Row, 4>(w, w_stride, n_rows, v_rows, n_pos, acc, acc_stride);
  if (n == 64) return axpy_rows_held<Row, 8>(w, w_stride, n_rows, v_rows, n_pos, acc, acc_stride);
  axpy_rows_loop<axpy<Row>>(w, w_stride, n_rows, v_rows, n_pos, acc, acc_stride, n);
}

// q8_0 values j..j+7 of the block at p (j + 8 <= the block's length) times its scale (exact).
inline __m256 load_q8_8(const uint8_t* p, int j, __m256 d) {
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + j));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
}

inline float q8_scale(const uint8_t* p) {
  return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

float dot_q8_0(const float* q, const void* k_row, int n) {
  const auto* p = static_cast<const uint8_t*>(k_row);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float tail = 0.0f;
  for (int i0 = 0; i0 < n; i0 += kQ8Block, p += kQ8BlockBytes) {
    const float ds = q8_scale(p);
    const __m256 d = _mm256_set1_ps(ds);
    const int len = (n - i0 < kQ8Block ? n - i0 : kQ8Block);
    int j = 0;
    for (; j + 16 <= len; j += 16) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i0 + j), load_q8_8(p, j, d), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i0 + j + 8), load_q8_8(p, j + 8, d), acc1);
    }
    if (j + 8 <= len) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i0 + j), load_q8_8(p, j, d), acc0);
      j += 8;
    }
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    for (; j < len; ++j) tail += q[i0 + j] * (float(qs[j]) * ds);
  }
  return hsum(_mm256_add_ps(acc0, acc1)) + tail;
}

void axpy_q8_0(float w, const void* v_row, float* acc, int n) {
  const auto* p = static_cast<const uint8_t*>(v_row);
  const __m256 wv = _mm256_set1_ps(w);
  for (int i0 = 0; i0 < n; i0 += kQ8Block, p += kQ8BlockBytes) {
    const float ds = q8_scale(p);
    const __m256 d = _mm256_set1_ps(ds);
    const int len = (n - i0 < kQ8Block ? n - i0 : kQ8Block);
    float* a = acc + i0;
    int j = 0;
    for (; j + 8 <= len; j += 8)
      _mm256_storeu_ps(a + j, _mm256_fmadd_ps(wv, load_q8_8(p, j, d), _mm256_loadu_ps(a + j)));
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    for (; j < len; ++j) a[j] += w * (float(qs[j]) * ds);
  }
}

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

// The AVX-512 softmax's steps on 8 lanes: max, exp(x - max) with the lane sums added in double
// at the end (as the reference sums in double), then the normalisation and the optional f16
// rounding. The row's tail goes through a stack copy padded with -inf (exp gives 0 there).
void softmax(float* x, int n, bool round_f16) {
  const int full = n / 8 * 8;
  alignas(32) float tail[8];
  for (int j = 0; j < 8; ++j) tail[j] = full + j < n ? x[full + j] : -__builtin_inff();
  __m256 m = _mm256_load_ps(tail);
  for (int i = 0; i < full; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float max_score = lanes[0];
  for (float l : lanes) max_score = l > max_score ? l : max_score;
  const __m256 vmax = _mm256_set1_ps(max_score);
  __m256 sum = _mm256_setzero_ps();
  for (int i = 0; i < full; i += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 e_tail = exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(tail), vmax));
  _mm256_store_ps(tail, e_tail);
  sum = _mm256_add_ps(sum, e_tail);
  _mm256_store_ps(lanes, sum);
  double total = 0.0;
  for (float l : lanes) total += double(l);
  const __m256 inv_sum = _mm256_set1_ps(float(1.0 / total));
  const auto normalize = [&](__m256 e) {
    const __m256 w = _mm256_mul_ps(e, inv_sum);
    return round_f16 ? _mm256_cvtph_ps(_mm256_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT)) : w;
  };
  for (int i = 0; i < full; i += 8) _mm256_storeu_ps(x + i, normalize(_mm256_loadu_ps(x + i)));
  _mm256_store_ps(tail, normalize(_mm256_load_ps(tail)));
  for (int j = 0; full + j < n; ++j) x[full + j] = tail[j];
}

// F16C both ways (round to nearest even, as the reference), 8 at a time; the tail through a
// stack copy so nothing past the row is read or written.
void round_f16(const float* x, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                              _MM_FROUND_TO_NEAREST_INT)));
  if (i < n) {
    float tmp[8] = {};
    for (int j = 0; j < n - i; ++j) tmp[j] = x[i + j];
    _mm256_storeu_ps(
        tmp, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(tmp), _MM_FROUND_TO_NEAREST_INT)));
    for (int j = 0; j < n - i; ++j) out[i + j] = tmp[j];
  }
}

}  // namespace
}  // namespace avx2

const AttentionRowKernels& attention_row_kernels_avx2() {
  using namespace avx2;  // NOLINT(build/namespaces): the kernels of this file
  static const AttentionRowKernels table = {
      {dot<F32Row>, dot<F16Row>, dot<BF16Row>, dot_q8_0},
      {axpy<F32Row>, axpy<F16Row>, axpy<BF16Row>, axpy_q8_0},
      {dot_rows_each_position<dot_rows<F32Row>>, dot_rows_each_position<dot_rows<F16Row>>,
       dot_rows_each_position<dot_rows<BF16Row>>, dot_rows_each_position<dot_rows_loop<dot_q8_0>>},
      {axpy_rows<F32Row>, axpy_rows<F16Row>, axpy_rows<BF16Row>, axpy_rows_loop<axpy_q8_0>},
      softmax,
      round_f16};
  return table;
}

}  // namespace vela::kernels

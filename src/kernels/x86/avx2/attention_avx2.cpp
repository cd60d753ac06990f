// AVX2 attention row kernels (kernels/attention_kernels.h): 8 values per step, a row's last
// n % 8 values in scalar code (head dims are almost always multiples of 8, and AVX2 has no
// masked 16-bit loads). No util/half.h or std:: templates here: an out-of-line copy compiled
// with AVX2 flags could be the one the linker keeps for every other file. Stored values convert
// exactly to f32 (f16 by vcvtph2ps, bf16 by a 16-bit shift, q8_0 as int8 * scale), so only the
// summation order differs from the scalar reference.
#include <type_traits>

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

// One FMA chain over the elements in order: sum = fma(q[i], k[i], sum) for i = 0 .. n - 1. The
// multi-row kernel (dot_rows) runs the same chain in each vector lane, one lane per position.
template <class Row>
float dot(const float* q, const void* k_row, int n) {
  __m128 sum = _mm_setzero_ps();
  for (int i = 0; i < n; ++i)
    sum = _mm_fmadd_ss(_mm_set_ss(q[i]), _mm_set_ss(Row::at(k_row, i)), sum);
  return _mm_cvtss_f32(sum);
}

template <class Row>
void axpy(float w, const void* v_row, float* acc, int n) {
  const __m256 wv = _mm256_set1_ps(w);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, Row::load(v_row, i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += w * Row::at(v_row, i);
}

// Rows of a multiple of 8 values, up to this length, go through the multi-row kernels'
// converted copies (on the stack, 144 KiB at most: latent attention's 576-value rows included);
// other lengths loop over the single-row kernels (the same results).
constexpr int kMaxCopiedRow = 576;

inline bool copies_rows(int n) {
  return n % 8 == 0 && n <= kMaxCopiedRow;
}

// Scores of R rows x the positions of V vectors of kt (element i of position p at
// kt[i * kAttnMaxPositions + p]), the first p0 of them in out already: each lane runs dot's chain
// for one score. out[r * out_stride + p] for p0 <= p < n_pos.
template <int R, int V>
void score_tile(const float* q, int64_t q_stride, const float* kt, int n, int p0, int n_pos,
                float scale, float* out, int64_t out_stride) {
  __m256 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int i = 0; i < n; ++i) {
    __m256 k[V];
    for (int v = 0; v < V; ++v) k[v] = _mm256_load_ps(kt + i * kAttnMaxPositions + p0 + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 qv = _mm256_set1_ps(q[r * q_stride + i]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(qv, k[v], acc[r][v]);
    }
  }
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const int first = p0 + 8 * v, left = n_pos - first;
      const __m256 s = _mm256_mul_ps(acc[r][v], vscale);
      if (left >= 8) {
        _mm256_storeu_ps(out + r * out_stride + first, s);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, s);
        for (int j = 0; j < left; ++j) out[r * out_stride + first + j] = tmp[j];
      }
    }
}

// Scores of n_rows rows against n_pos stored rows (AttnDotRowsFn): the stored rows converted and
// transposed once into kt, then tiles of up to 4 rows x 2 vectors of 8 positions.
template <class Row>
void dot_rows(const float* q, int64_t q_stride, int n_rows, const void* const* k_rows, int n_pos,
              int n, float scale, float* out, int64_t out_stride) {
  if (!copies_rows(n))
    return dot_rows_each_position<dot_rows_loop<dot<Row>>>(q, q_stride, n_rows, k_rows, n_pos, n,
                                                           scale, out, out_stride);
  alignas(32) float kt[kMaxCopiedRow * kAttnMaxPositions];
  for (int p0 = 0; p0 < n_pos; p0 += 8)
    for (int c = 0; c < n; c += 8) {
      __m256 v[8];
      for (int p = 0; p < 8; ++p)
        v[p] = p0 + p < n_pos ? Row::load(k_rows[p0 + p], c) : _mm256_setzero_ps();
      transpose8(v);
      for (int i = 0; i < 8; ++i) _mm256_store_ps(kt + (c + i) * kAttnMaxPositions + p0, v[i]);
    }
  for (int p0 = 0; p0 < n_pos; p0 += 16) {
    const auto tiles = [&](auto vecs) {
      constexpr int V = decltype(vecs)::value;
      int r = 0;
      for (; r + 4 <= n_rows; r += 4)
        score_tile<4, V>(q + r * q_stride, q_stride, kt, n, p0, n_pos, scale, out + r * out_stride,
                         out_stride);
      for (; r < n_rows; ++r)
        score_tile<1, V>(q + r * q_stride, q_stride, kt, n, p0, n_pos, scale, out + r * out_stride,
                         out_stride);
    };
    if (n_pos - p0 > 8)
      tiles(std::integral_constant<int, 2>{});
    else
      tiles(std::integral_constant<int, 1>{});
  }
}

// Weighted V rows of R rows x 16 elements from i0 (AttnAxpyRowsFn; vf: the n_pos stored rows as
// f32, n floats apart): the accumulators stay in registers over all the positions, axpy's FMA
// per element and position, positions in order.
template <int R>
void axpy_tile(const float* w, int64_t w_stride, const float* vf, int n, int n_pos, float* acc,
               int64_t acc_stride, int i0) {
  __m256 a[R][2];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 2; ++c) a[r][c] = _mm256_loadu_ps(acc + r * acc_stride + i0 + 8 * c);
  for (int p = 0; p < n_pos; ++p) {
    const __m256 v0 = _mm256_load_ps(vf + p * n + i0), v1 = _mm256_load_ps(vf + p * n + i0 + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_set1_ps(w[r * w_stride + p]);
      a[r][0] = _mm256_fmadd_ps(wv, v0, a[r][0]);
      a[r][1] = _mm256_fmadd_ps(wv, v1, a[r][1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 2; ++c) _mm256_storeu_ps(acc + r * acc_stride + i0 + 8 * c, a[r][c]);
}

template <class Row>
void axpy_rows(const float* w, int64_t w_stride, int n_rows, const void* const* v_rows, int n_pos,
               float* acc, int64_t acc_stride, int n) {
  if (!copies_rows(n) || n % 16 != 0)
    return axpy_rows_loop<axpy<Row>>(w, w_stride, n_rows, v_rows, n_pos, acc, acc_stride, n);
  alignas(32) float vf[kMaxCopiedRow * kAttnMaxPositions];
  for (int p = 0; p < n_pos; ++p)
    for (int i = 0; i < n; i += 8) _mm256_store_ps(vf + p * n + i, Row::load(v_rows[p], i));
  for (int i0 = 0; i0 < n; i0 += 16) {
    int r = 0;
    for (; r + 4 <= n_rows; r += 4)
      axpy_tile<4>(w + r * w_stride, w_stride, vf, n, n_pos, acc + r * acc_stride, acc_stride, i0);
    for (; r < n_rows; ++r)
      axpy_tile<1>(w + r * w_stride, w_stride, vf, n, n_pos, acc + r * acc_stride, acc_stride, i0);
  }
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

// The softmax's max and exp steps against a running maximum, 8 at a time, the lane sums added in
// double; the tail through a stack copy padded with -inf (exp gives 0 there).
double softmax_step(float* x, int n, float* running_max) {
  const int full = n / 8 * 8;
  __m256 m = _mm256_set1_ps(*running_max);
  for (int i = 0; i < full; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float max_score = lanes[0];
  for (float l : lanes) max_score = l > max_score ? l : max_score;
  for (int j = full; j < n; ++j) max_score = x[j] > max_score ? x[j] : max_score;
  *running_max = max_score;
  const __m256 s = _mm256_set1_ps(max_score);
  __m256 sum = _mm256_setzero_ps();
  for (int i = 0; i < full; i += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (full < n) {
    alignas(32) float tail[8];
    for (int j = 0; j < 8; ++j) tail[j] = full + j < n ? x[full + j] : -__builtin_inff();
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(tail), s));
    _mm256_store_ps(tail, e);
    sum = _mm256_add_ps(sum, e);
    for (int j = 0; full + j < n; ++j) x[full + j] = tail[j];
  }
  _mm256_store_ps(lanes, sum);
  double total = 0.0;
  for (float l : lanes) total += double(l);
  return total;
}

// The AVX-512 softmax on 8 lanes: softmax_step from -inf, then the normalisation and the
// optional f16 rounding, the row's tail through a stack copy.
void softmax(float* x, int n, bool round_f16) {
  float max_score = -__builtin_inff();
  const double total = softmax_step(x, n, &max_score);
  const __m256 inv_sum = _mm256_set1_ps(float(1.0 / total));
  const auto normalize = [&](__m256 e) {
    const __m256 w = _mm256_mul_ps(e, inv_sum);
    return round_f16 ? _mm256_cvtph_ps(_mm256_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT)) : w;
  };
  const int full = n / 8 * 8;
  for (int i = 0; i < full; i += 8) _mm256_storeu_ps(x + i, normalize(_mm256_loadu_ps(x + i)));
  if (full < n) {
    alignas(32) float tail[8] = {};
    for (int j = 0; full + j < n; ++j) tail[j] = x[full + j];
    _mm256_store_ps(tail, normalize(_mm256_load_ps(tail)));
    for (int j = 0; full + j < n; ++j) x[full + j] = tail[j];
  }
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
      {dot_rows<F32Row>, dot_rows<F16Row>, dot_rows<BF16Row>,
       dot_rows_each_position<dot_rows_loop<dot_q8_0>>},
      {axpy_rows<F32Row>, axpy_rows<F16Row>, axpy_rows<BF16Row>, axpy_rows_loop<axpy_q8_0>},
      softmax,
      round_f16,
      softmax_step};
  return table;
}

}  // namespace vela::kernels

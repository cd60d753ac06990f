// AVX-512 attention row kernels (kernels/attention_kernels.h): 16 values per step, the row's
// tail through masked loads (which never touch the masked-off bytes, so no read passes the row).
// No std:: templates here: an out-of-line copy compiled with AVX-512 flags could be the one the
// linker keeps for every other file. Stored values convert exactly to f32 (f16 by vcvtph2ps, bf16
// by a 16-bit shift, q8_0 as int8 * scale), so only the summation order differs from the scalar
// reference.
#include <type_traits>

#include "kernels/attention_kernels.h"
#include "kernels/attention_rows_generic.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/x86/avx512/avx512_util.h"

namespace vela::kernels {
namespace avx512 {
namespace {

constexpr int kQ8Block = 32;
constexpr int kQ8BlockBytes = 34;

inline __mmask16 tail_mask(int len) {
  return static_cast<__mmask16>((1u << len) - 1u);
}

// Loaders of 16 row values starting at element i, as f32; `Tail` variants load the first len
// (< 16) of them and zero the rest.
struct F32Row {
  static __m512 load(const void* row, int i) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  }
  static __m512 load_tail(const void* row, int i, int len) {
    return _mm512_maskz_loadu_ps(tail_mask(len), static_cast<const float*>(row) + i);
  }
};

struct F16Row {
  static __m512 load(const void* row, int i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i)));
  }
  static __m512 load_tail(const void* row, int i, int len) {
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(tail_mask(len), static_cast<const uint16_t*>(row) + i));
  }
};

struct BF16Row {
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const void* row, int i) {
    return widen(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i)));
  }
  static __m512 load_tail(const void* row, int i, int len) {
    return widen(_mm256_maskz_loadu_epi16(tail_mask(len), static_cast<const uint16_t*>(row) + i));
  }
};

template <class Row>
void axpy(float w, const void* v_row, float* acc, int n) {
  const __m512 wv = _mm512_set1_ps(w);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(wv, Row::load(v_row, i), _mm512_loadu_ps(acc + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, acc + i);
    _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(wv, Row::load_tail(v_row, i, n - i), a));
  }
}

// The softmax's max and exp steps against a running maximum, the 16 lane sums added in double
// (as the reference sums in double).
double softmax_step(float* x, int n, float* running_max) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = _mm512_set1_ps(*running_max);
  int i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  if (i < n) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(neg_inf, tail_mask(n - i), x + i));
  *running_max = _mm512_reduce_max_ps(m);
  const __m512 s = _mm512_set1_ps(*running_max);
  __m512 sum = _mm512_setzero_ps();
  for (i = 0; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask(n - i);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), s));
    _mm512_mask_storeu_ps(x + i, t, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(t, e));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  double total = 0.0;
  for (float l : lanes) total += double(l);
  return total;
}

void softmax(float* x, int n, bool round_f16) {
  float max_score = -__builtin_inff();
  const double total = softmax_step(x, n, &max_score);
  const __m512 inv_sum = _mm512_set1_ps(float(1.0 / total));
  for (int i = 0; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask(n - i);
    __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + i), inv_sum);
    if (round_f16)
      w = _mm512_cvtph_ps(_mm512_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm512_mask_storeu_ps(x + i, t, w);
  }
}

// vcvtps2ph / vcvtph2ps (round to nearest even, as the reference), the tail masked.
void round_f16(const float* x, float* out, int n) {
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
  }
}

// q8_0: per block, the 32 int8 values as two f32 vectors times the block scale (exact).
struct Q8Block {
  __m512 lo, hi;  // values 0-15, 16-31 (zero past the block's length)
};

inline Q8Block load_q8_block(const uint8_t* p, int len) {
  const __m512 d = _mm512_set1_ps(half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))));
  const __m256i q = len == kQ8Block
                        ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2))
                        : _mm256_maskz_loadu_epi8(static_cast<__mmask32>((1ull << len) - 1), p + 2);
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
  const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  return {_mm512_mul_ps(lo, d), _mm512_mul_ps(hi, d)};
}

void axpy_q8_0(float w, const void* v_row, float* acc, int n) {
  const auto* p = static_cast<const uint8_t*>(v_row);
  const __m512 wv = _mm512_set1_ps(w);
  int i = 0;
  for (; i + kQ8Block <= n; i += kQ8Block, p += kQ8BlockBytes) {
    const Q8Block v = load_q8_block(p, kQ8Block);
    _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(wv, v.lo, _mm512_loadu_ps(acc + i)));
    _mm512_storeu_ps(acc + i + 16, _mm512_fmadd_ps(wv, v.hi, _mm512_loadu_ps(acc + i + 16)));
  }
  if (i < n) {
    const int len = n - i;
    const Q8Block v = load_q8_block(p, len);
    const __mmask16 m0 = tail_mask((len < 16 ? len : 16));
    _mm512_mask_storeu_ps(acc + i, m0,
                          _mm512_fmadd_ps(wv, v.lo, _mm512_maskz_loadu_ps(m0, acc + i)));
    if (len > 16) {
      const __mmask16 m1 = tail_mask(len - 16);
      _mm512_mask_storeu_ps(acc + i + 16, m1,
                            _mm512_fmadd_ps(wv, v.hi, _mm512_maskz_loadu_ps(m1, acc + i + 16)));
    }
  }
}

// q8_0 rows for the register-held kernels: values i .. i + 15 (i a multiple of 16) of the row,
// block i / 32's low or high half times its scale, exactly as load_q8_block gives dot_q8_0 and
// axpy_q8_0 (chunk i to chain 0, i + 16 to chain 1 there too), so results are bit-identical.
struct Q8Row {
  static __m512 load(const void* row, int i) {
    const auto* p = static_cast<const uint8_t*>(row) + (i / kQ8Block) * kQ8BlockBytes;
    const __m512 d = _mm512_set1_ps(half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + i % kQ8Block));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
  }
  // The first len (< 16) of values i .. i + 15, the rest zero: never reads past a short last block.
  static __m512 load_tail(const void* row, int i, int len) {
    const auto* p = static_cast<const uint8_t*>(row) + (i / kQ8Block) * kQ8BlockBytes;
    const __m512 d = _mm512_set1_ps(half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))));
    const __m128i q = _mm_maskz_loadu_epi8(tail_mask(len), p + 2 + i % kQ8Block);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
  }
};

// Values i .. i + 15 of a stored row as f32, zero past n.
template <class Row>
inline __m512 load_chunk(const void* row, int i, int n) {
  return n - i >= 16 ? Row::load(row, i) : Row::load_tail(row, i, n - i);
}

// One FMA chain over the elements in order: sum = fma(q[i], k[i], sum) for i = 0 .. n - 1. The
// multi-row kernel (dot_rows) runs the same chain in each vector lane, one lane per position.
template <class Row>
float dot(const float* q, const void* k_row, int n) {
  __m128 sum = _mm_setzero_ps();
  alignas(64) float k[16];
  for (int i0 = 0; i0 < n; i0 += 16) {
    _mm512_store_ps(k, load_chunk<Row>(k_row, i0, n));
    for (int i = 0; i < 16 && i0 + i < n; ++i)
      sum = _mm_fmadd_ss(_mm_set_ss(q[i0 + i]), _mm_set_ss(k[i]), sum);
  }
  return _mm_cvtss_f32(sum);
}

// Scores of R rows (q, q_stride apart) x the positions of V vectors of kt (the stored rows
// transposed: element i of position p at kt[i * kAttnMaxPositions + p]), n elements each: per
// element, one broadcast query value meets each vector of 16 positions in an FMA, so every lane
// runs dot's chain for one score. out[r * out_stride + p] for p < n_pos.
template <int R, int V>
void score_tile(const float* q, int64_t q_stride, const float* kt, int n, int n_pos, float scale,
                float* out, int64_t out_stride) {
  __m512 acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int i = 0; i < n; ++i) {
    __m512 k[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) k[v] = _mm512_load_ps(kt + i * kAttnMaxPositions + 16 * v);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 qv = _mm512_set1_ps(q[r * q_stride + i]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(qv, k[v], acc[r][v]);
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const int left = n_pos - 16 * v;
      _mm512_mask_storeu_ps(out + r * out_stride + 16 * v, tail_mask(left < 16 ? left : 16),
                            _mm512_mul_ps(acc[r][v], vscale));
    }
}

// Rows up to this length go through dot_rows' transposed copy (on the stack, 144 KiB at most):
// latent attention's rows of 512 + 64 values included, whose scores through the single-row
// kernel (the same chain, one scalar FMA after another) took 93% of a deepseek3-mini prefill.
// Longer ones take that kernel per score.
constexpr int kMaxTransposedRow = 576;

// Scores of n_rows rows against n_pos stored rows (AttnDotRowsFn): the stored rows converted and
// transposed once into kt, then tiles of up to 4 rows x 4 vectors of 16 positions (16
// independent chains keep both FMA ports busy; no horizontal sums, and each row's scores are
// stored together).
template <class Row>
void dot_rows(const float* q, int64_t q_stride, int n_rows, const void* const* k_rows, int n_pos,
              int n, float scale, float* out, int64_t out_stride) {
  if (n > kMaxTransposedRow)
    return dot_rows_each_position<dot_rows_loop<dot<Row>>>(q, q_stride, n_rows, k_rows, n_pos, n,
                                                           scale, out, out_stride);
  const int n_chunks = (n + 15) / 16;
  alignas(64) float kt[kMaxTransposedRow * kAttnMaxPositions];
  for (int p0 = 0; p0 < n_pos; p0 += 16)
    for (int c = 0; c < n_chunks; ++c) {
      __m512 v[16];
      for (int p = 0; p < 16; ++p)
        v[p] = p0 + p < n_pos ? load_chunk<Row>(k_rows[p0 + p], 16 * c, n) : _mm512_setzero_ps();
      transpose16(v);
      for (int i = 0; i < 16; ++i)
        _mm512_store_ps(kt + (16 * c + i) * kAttnMaxPositions + p0, v[i]);
    }
  with_tile_count<kAttnMaxPositions / 16>((n_pos + 15) / 16, [&](auto vecs) {
    constexpr int V = decltype(vecs)::value;
    int r = 0;
    for (; r + 4 <= n_rows; r += 4)
      score_tile<4, V>(q + r * q_stride, q_stride, kt, n, n_pos, scale, out + r * out_stride,
                       out_stride);
    if (r < n_rows)
      with_tile_count<3>(n_rows - r, [&](auto rows) {
        score_tile<decltype(rows)::value, V>(q + r * q_stride, q_stride, kt, n, n_pos, scale,
                                             out + r * out_stride, out_stride);
      });
  });
}

// Weighted V rows (AttnAxpyRowsFn): the n_pos stored rows converted once into vf, then tiles of
// up to 4 rows x 4 vectors of 16 elements whose accumulators stay in registers over all the
// positions (axpy's FMA per element and position, positions in order), each vector of vf read
// once per tile for its 4 rows.
template <int R, int C>
void axpy_tile(const float* w, int64_t w_stride, const float* vf, int row_floats, int n_pos,
               float* acc, int64_t acc_stride, int i0, int n) {
  __m512 a[R][C];
  __mmask16 m[C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    const int left = n - (i0 + 16 * c);
    m[c] = tail_mask(left < 16 ? left : 16);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      a[r][c] = _mm512_maskz_loadu_ps(m[c], acc + r * acc_stride + i0 + 16 * c);
  for (int p = 0; p < n_pos; ++p) {
    __m512 v[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) v[c] = _mm512_load_ps(vf + p * row_floats + i0 + 16 * c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = _mm512_set1_ps(w[r * w_stride + p]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a[r][c] = _mm512_fmadd_ps(wv, v[c], a[r][c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_ps(acc + r * acc_stride + i0 + 16 * c, m[c], a[r][c]);
}

template <class Row, AttnAxpyFn kAxpy>
void axpy_rows(const float* w, int64_t w_stride, int n_rows, const void* const* v_rows, int n_pos,
               float* acc, int64_t acc_stride, int n) {
  if (n > kMaxTransposedRow)
    return axpy_rows_loop<kAxpy>(w, w_stride, n_rows, v_rows, n_pos, acc, acc_stride, n);
  const int row_floats = (n + 15) / 16 * 16;
  alignas(64) float vf[kMaxTransposedRow * kAttnMaxPositions];
  for (int p = 0; p < n_pos; ++p)
    for (int i = 0; i < n; i += 16)
      _mm512_store_ps(vf + p * row_floats + i, load_chunk<Row>(v_rows[p], i, n));
  for (int i0 = 0; i0 < n; i0 += 64)
    with_tile_count<4>(((n - i0 < 64 ? n - i0 : 64) + 15) / 16, [&](auto chunks) {
      constexpr int C = decltype(chunks)::value;
      int r = 0;
      for (; r + 4 <= n_rows; r += 4)
        axpy_tile<4, C>(w + r * w_stride, w_stride, vf, row_floats, n_pos, acc + r * acc_stride,
                        acc_stride, i0, n);
      if (r < n_rows)
        with_tile_count<3>(n_rows - r, [&](auto rows) {
          axpy_tile<decltype(rows)::value, C>(w + r * w_stride, w_stride, vf, row_floats, n_pos,
                                              acc + r * acc_stride, acc_stride, i0, n);
        });
    });
}

}  // namespace
}  // namespace avx512

const AttentionRowKernels& attention_row_kernels_avx512() {
  using namespace avx512;  // NOLINT(build/namespaces): the kernels of this file
  static const AttentionRowKernels table = {
      {dot<F32Row>, dot<F16Row>, dot<BF16Row>, dot<Q8Row>},
      {axpy<F32Row>, axpy<F16Row>, axpy<BF16Row>, axpy_q8_0},
      {dot_rows<F32Row>, dot_rows<F16Row>, dot_rows<BF16Row>, dot_rows<Q8Row>},
      {axpy_rows<F32Row, axpy<F32Row>>, axpy_rows<F16Row, axpy<F16Row>>,
       axpy_rows<BF16Row, axpy<BF16Row>>, axpy_rows<Q8Row, axpy_q8_0>},
      softmax,
      round_f16,
      softmax_step};
  return table;
}

}  // namespace vela::kernels

// AVX2 dot products of float weights (F32, F16, BF16) with float activations.
// Each activation row keeps four 8-lane FMA accumulators (enough independent chains to hide the
// FMA latency in the single-row case); in a tile, one 8-element weight vector is converted at a
// time and used for every row, so a tile of 3 rows needs 12 accumulators plus 2 temporaries.
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/kernels_avx2.h"

namespace vela::kernels::avx2 {

namespace {

struct LoadF32 {
  using Elem = float;
  static __m256 load(const Elem* p) { return _mm256_loadu_ps(p); }
};

struct LoadF16 {
  using Elem = uint16_t;
  static __m256 load(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

struct LoadBF16 {
  using Elem = uint16_t;
  static __m256 load(const Elem* p) {
    // bf16 is the top half of an f32.
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

// Loads the last `count` (< 8) elements zero-padded to a full vector.
template <class Load>
__m256 load_tail(const typename Load::Elem* p, int64_t count) {
  typename Load::Elem buf[8] = {};
  std::memcpy(buf, p, size_t(count) * sizeof(buf[0]));
  return Load::load(buf);
}

template <class LoadW, class LoadA>
struct FloatDot {
  using WElem = typename LoadW::Elem;
  using AElem = typename LoadA::Elem;

  // sums[t] = sum_i w[i] * act[t][i] for t < k; w: [n] WElem, act[t]: [n] AElem.
  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const WElem*>(w_row);
    const AElem* a[k];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) a[t] = reinterpret_cast<const AElem*>(act[t]);
    __m256 acc[k][4];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      VELA_UNROLL
      for (int c = 0; c < 4; ++c) acc[t][c] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      VELA_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m256 wv = LoadW::load(w + i + 8 * c);
        VELA_UNROLL
        for (int t = 0; t < k; ++t) {
          acc[t][c] = _mm256_fmadd_ps(wv, LoadA::load(a[t] + i + 8 * c), acc[t][c]);
        }
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = LoadW::load(w + i);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) acc[t][0] = _mm256_fmadd_ps(wv, LoadA::load(a[t] + i), acc[t][0]);
    }
    if (i < n) {
      const __m256 wv = load_tail<LoadW>(w + i, n - i);
      VELA_UNROLL
      for (int t = 0; t < k; ++t) {
        acc[t][0] = _mm256_fmadd_ps(wv, load_tail<LoadA>(a[t] + i, n - i), acc[t][0]);
      }
    }
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      sums[t] = hsum(
          _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
    }
  }
};

constexpr int kFloatTile = 3;
using F32Rows = RowTiles<FloatDot<LoadF32, LoadF32>, kFloatTile>;
using F16Rows = RowTiles<FloatDot<LoadF16, LoadF32>, kFloatTile>;
using BF16Rows = RowTiles<FloatDot<LoadBF16, LoadBF16>, kFloatTile>;

}  // namespace

float vec_dot_f32_f32(int64_t n, const void* w, const void* a) {
  return F32Rows::one(n, w, a);
}
float vec_dot_f16_f32(int64_t n, const void* w, const void* a) {
  return F16Rows::one(n, w, a);
}
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a) {
  return BF16Rows::one(n, w, a);
}

void vec_dot_rows_f32_f32(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                          int64_t n_act, float* out, int64_t out_stride) {
  F32Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_f16_f32(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                          int64_t n_act, float* out, int64_t out_stride) {
  F16Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_bf16_bf16(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  BF16Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

}  // namespace vela::kernels::avx2

// AVX2 kernels for F32 and F16 weights in 16-row groups (packed_blocks.h) against f32 activation
// rows (packed_gemm.h): the AVX-512 kernel's outer product per column on two 8-row halves of a
// group, so every output is the same lane-wise fma chain over the columns in order, bit for bit
// the reference (ref/packed_gemm_ref.cpp). A tile of one group x 6 tokens (12 accumulators, 2
// weight vectors and a broadcast: 15 of 16 registers) loads each weight vector once for 6 tokens;
// one or two tokens (decode) take two groups, for four independent chains.
// Thread-safety: pure functions; disjoint outputs may be computed concurrently.
#include <type_traits>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/x86/avx2/avx2_common.h"

namespace vela::kernels {

namespace avx2 {
namespace {

constexpr int kHalf = 8;  // rows per vector

template <class Elem>
inline __m256 load_rows(const Elem* p) {
  if constexpr (std::is_same_v<Elem, float>)
    return _mm256_loadu_ps(p);
  else
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Groups g < G (group_elems apart from w) x tokens j < T, all columns.
template <class Elem, int G, int T>
void tile(const Elem* w, int64_t group_elems, int64_t n_cols, const uint8_t* act, size_t act_stride,
          float* y, int64_t y_stride) {
  __m256 acc[G][2][T];
  VELA_UNROLL
  for (int g = 0; g < G; ++g) VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int j = 0; j < T; ++j) acc[g][h][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < n_cols; ++k) {
    __m256 wv[G][2];
    VELA_UNROLL
    for (int g = 0; g < G; ++g) VELA_UNROLL
    for (int h = 0; h < 2; ++h)
      wv[g][h] = load_rows(w + g * group_elems + k * kPackedRows + h * kHalf);
    VELA_UNROLL
    for (int j = 0; j < T; ++j) {
      const __m256 a =
          _mm256_set1_ps(reinterpret_cast<const float*>(act + size_t(j) * act_stride)[k]);
      VELA_UNROLL
      for (int g = 0; g < G; ++g) VELA_UNROLL
      for (int h = 0; h < 2; ++h) acc[g][h][j] = _mm256_fmadd_ps(wv[g][h], a, acc[g][h][j]);
    }
  }
  VELA_UNROLL
  for (int g = 0; g < G; ++g) VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int j = 0; j < T; ++j)
    _mm256_storeu_ps(y + j * y_stride + g * kPackedRows + h * kHalf, acc[g][h][j]);
}

template <class Elem>
void gemm(const PackedGemmArgs& p) {
  const auto* w = static_cast<const Elem*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  const auto run = [&](auto groups, auto tokens, int64_t g, int64_t t) {
    tile<Elem, decltype(groups)::value, decltype(tokens)::value>(
        w + g * group_elems, group_elems, p.n_cols, p.act + size_t(t) * p.act_stride, p.act_stride,
        p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
  };
  if (p.n_act <= 2)
    for_float_tiles<2, 2>(p.n_groups, p.n_act, run);
  else
    for_float_tiles<1, 6>(p.n_groups, p.n_act, run);
}

}  // namespace
}  // namespace avx2

PackedGemmFn packed_gemm_float_avx2(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::F32:
      return avx2::gemm<float>;
    case GgmlType::F16:
      return avx2::gemm<uint16_t>;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

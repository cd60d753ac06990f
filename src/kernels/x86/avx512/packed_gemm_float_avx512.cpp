// AVX-512 kernels for F32, F16 and BF16 weights in 16-row groups (packed_blocks.h) against f32
// (F32, F16) or BF16 (BF16) activation rows (packed_gemm.h). One vector holds one column of a
// group's 16 rows, so each output is one vector lane whose sum runs over the columns in order
// (the reference, ref/packed_gemm_ref.cpp, bit for bit): an outer product per column, no
// horizontal sums, and a tile of kGroups groups x kTokens tokens loads each weight vector once for
// kTokens tokens and broadcasts each activation once for kGroups groups. BF16 runs either on
// vdpbf16ps or, widened to f32, on FMA (Bf16Kernel); both give the reference's floats.
// Thread-safety: pure functions; disjoint outputs may be computed concurrently.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_features.h"
#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/flush_subnormals.h"

namespace vela::kernels {

namespace avx512 {
namespace {

// 4 groups x 6 tokens = 24 accumulators, + 4 weight vectors and 1 broadcast: 29 of 32 registers.
// Four groups also give a lone token (decode) four independent chains.
constexpr int kGroups = 4;
constexpr int kTokens = 6;

// How a tile step meets weights and activations: kCols columns per step in kParts parts, each
// part one weight vector per group (load) against one broadcast activation per token
// (broadcast), combined into the accumulators.

// F32 and F16: one column of 16 rows per step, widened to f32, against one f32 activation.
template <class WeightElem>
struct FloatColumns {
  using Elem = WeightElem;
  static constexpr int64_t kCols = 1;  // columns per step
  static constexpr int kParts = 1;
  static __m512 load(const Elem* p, int /*part*/) {
    if constexpr (std::is_same_v<Elem, float>)
      return _mm512_loadu_ps(p);
    else
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 broadcast(const uint8_t* act_row, int64_t k, int /*part*/) {
    return _mm512_set1_ps(reinterpret_cast<const float*>(act_row)[k]);
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};

// BF16 by vdpbf16ps: a column pair of 16 rows per step against one activation pair.
struct Bf16ColumnPairs {
  using Elem = uint16_t;
  static constexpr int64_t kCols = kBf16PackedPair;
  static constexpr int kParts = 1;
  static __m512 load(const Elem* p, int /*part*/) {
    return _mm512_castsi512_ps(_mm512_loadu_si512(p));
  }
  static __m512 broadcast(const uint8_t* act_row, int64_t k, int /*part*/) {
    return _mm512_castsi512_ps(_mm512_set1_epi32(load_i32(act_row + 2 * k)));
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)a);
  }
};

// BF16 widened to f32 for FMA: a column pair per step in two parts, column k + 1 first (its bf16
// is the high half of each 32-bit lane, so masking widens it) and then column k (shifted up), as
// vdpbf16ps adds them. The activations are the BF16 rows already widened to f32 (packed_act.h);
// run under DAZ/FTZ, each FMA rounds and flushes as vdpbf16ps does.
struct Bf16WidenedPairs {
  using Elem = uint16_t;
  static constexpr int64_t kCols = kBf16PackedPair;
  static constexpr int kParts = 2;
  static __m512 load(const Elem* p, int part) {
    const __m512i pair = _mm512_loadu_si512(p);
    return _mm512_castsi512_ps(part == 0 ? _mm512_and_si512(pair, _mm512_set1_epi32(-65536))
                                         : _mm512_slli_epi32(pair, 16));
  }
  static __m512 broadcast(const uint8_t* act_row, int64_t k, int part) {
    return _mm512_set1_ps(reinterpret_cast<const float*>(act_row)[k + 1 - part]);
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};

// Columns [begin, end) of a row: a block of them at a time keeps a group block's weights and a
// token tile's activations in cache. The partial sums wait in y between blocks (exact f32), so
// each output's chain is the same as over the whole row at once.
struct ColumnBlock {
  int64_t begin = 0, end = 0;
};

// Weight bytes of a group block per column block: a quarter of a 1 MiB L2 (measured on
// TinyLlama's FFN down matrix: 5-25% faster than whole rows for F16, 20-30% for F32).
constexpr int64_t kBlockWeightBytes = 256 * 1024;

// Groups g < G (group_elems apart from w) x tokens j < T (act_stride apart from act), columns
// cols, added to y[j * y_stride + 16 g + n] (which holds the sum over the columns before
// cols.begin). kPrefetch: the first token tile of a group block, which
// brings the weights from memory (a lone token's four streams leave the hardware prefetcher
// behind: measured 1.7x slower decode without it); the token tiles after it find them in cache.
template <class C, int G, int T, bool kPrefetch>
void tile(const typename C::Elem* w, int64_t group_elems, ColumnBlock cols, const uint8_t* act,
          size_t act_stride, float* y, int64_t y_stride) {
  __m512 acc[G][T];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j)
      acc[g][j] = cols.begin > 0 ? _mm512_loadu_ps(y + j * y_stride + g * kPackedRows)
                                 : _mm512_setzero_ps();
  for (int64_t k = cols.begin; k < cols.end; k += C::kCols) {
    __m512 wv[G];
    constexpr int64_t kStepBytes = int64_t(sizeof(typename C::Elem)) * kPackedRows * C::kCols;
    if constexpr (kPrefetch) {
      if (k / C::kCols % (64 / kStepBytes) == 0)
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          _mm_prefetch(
              reinterpret_cast<const char*>(w + g * group_elems + k * kPackedRows) + kPrefetchBytes,
              _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int part = 0; part < C::kParts; ++part) {
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) wv[g] = C::load(w + g * group_elems + k * kPackedRows, part);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) {
        const __m512 a = C::broadcast(act + size_t(j) * act_stride, k, part);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) acc[g][j] = C::combine(wv[g], a, acc[g][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) _mm512_storeu_ps(y + j * y_stride + g * kPackedRows, acc[g][j]);
}

template <class C>
void gemm_tiles(const PackedGemmArgs& p) {
  const auto* w = static_cast<const typename C::Elem*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  constexpr int64_t kBlockCols =
      kBlockWeightBytes / (kGroups * kPackedRows * int64_t(sizeof(typename C::Elem)));
  static_assert(kBlockCols % C::kCols == 0);
  for (int64_t k = 0; k < p.n_cols; k += kBlockCols) {
    const ColumnBlock cols{k, std::min(p.n_cols, k + kBlockCols)};
    for_float_tiles<kGroups, kTokens>(
        p.n_groups, p.n_act, [&](auto groups, auto tokens, int64_t g, int64_t t) {
          constexpr int G = decltype(groups)::value, T = decltype(tokens)::value;
          const auto run = t == 0 ? tile<C, G, T, true> : tile<C, G, T, false>;
          run(w + g * group_elems, group_elems, cols, p.act + size_t(t) * p.act_stride,
              p.act_stride, p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
        });
  }
}

template <class C>
void gemm(const PackedGemmArgs& p) {
  gemm_tiles<C>(p);
}

template <>
void gemm<Bf16WidenedPairs>(const PackedGemmArgs& p) {
  PackedGemmArgs widened = p;
  widened.act = reinterpret_cast<const uint8_t*>(widened_bf16_act(p));
  widened.act_stride = size_t(p.n_cols) * sizeof(float);
  const FlushSubnormals flush;
  gemm_tiles<Bf16WidenedPairs>(widened);
}

}  // namespace
}  // namespace avx512

PackedGemmFn packed_gemm_float_avx512(GgmlType w_type, Bf16Kernel bf16) {
  switch (w_type) {
    case GgmlType::F32:
      return avx512::gemm<avx512::FloatColumns<float>>;
    case GgmlType::F16:
      return avx512::gemm<avx512::FloatColumns<uint16_t>>;
    case GgmlType::BF16:
      if (bf16 == Bf16Kernel::kWidenedFma) return avx512::gemm<avx512::Bf16WidenedPairs>;
      return cpu_features().avx512_bf16 ? avx512::gemm<avx512::Bf16ColumnPairs> : nullptr;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

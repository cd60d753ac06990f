// AVX-512 kernels for F32, F16 and BF16 weights in 16-row groups (packed_blocks.h) against f32
// (F32, F16) or BF16 (BF16) activation rows (packed_gemm.h), read through their token-tile
// interleaved view (packed_act.h). One vector holds one column of a group's 16 rows, so each
// output is one vector lane whose sum runs over the columns in order (the reference,
// ref/packed_gemm_ref.cpp, bit for bit): an outer product per column, no horizontal sums. A tile
// of G groups x T tokens loads each weight vector once for T tokens and broadcasts each
// activation once for G groups: 2 x 7..12 for prompts, where fewer weight vectors per
// multiply-add leave the FMA ports more room (vcvtph2ps takes both on Intel cores), and 4 x 1..6
// for a few tokens, four independent chains for a lone one. F16 weights against 128 tokens or
// more are widened to f32 a block at a time first. BF16 runs either on vdpbf16ps or, widened to
// f32, on FMA (Bf16Kernel); both give the reference's floats.
// Thread-safety: pure functions; disjoint outputs may be computed concurrently.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

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

// Tiles of a token tile (kFloatActTile = 12 tokens) of more than kFewTokens tokens: 2 groups x up
// to 12 tokens = 24 accumulators, + 2 weight vectors and a broadcast; of fewer: 4 groups x up to
// 6 tokens, + 4 weight vectors and a broadcast (29 of 32 registers).
constexpr int kFewTokens = 6;
constexpr int kGroupsForFew = 4;
constexpr int kGroupsForMany = 2;
static_assert(kFloatActTile == 12, "tile sizes below assume 12-token activation tiles");

// How a tile step meets weights and activations: kCols columns per step in kParts parts, each
// part one weight vector per group (load) against one broadcast activation per token
// (broadcast), combined into the accumulators.

// F32 and F16: one column of 16 rows per step, widened to f32, against one f32 activation.
template <class WeightElem>
struct FloatColumns {
  using Elem = WeightElem;
  static constexpr GgmlType kType = std::is_same_v<Elem, float> ? GgmlType::F32 : GgmlType::F16;
  static constexpr int64_t kCols = 1;  // columns per step
  static constexpr int kParts = 1;
  static __m512 load(const Elem* p, int /*part*/) {
    if constexpr (std::is_same_v<Elem, float>)
      return _mm512_loadu_ps(p);
    else
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static constexpr int64_t kActStepBytes = sizeof(float);  // one f32 activation
  static __m512 broadcast(const uint8_t* step, int /*part*/) {
    return _mm512_set1_ps(*reinterpret_cast<const float*>(step));
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};

// BF16 by vdpbf16ps: a column pair of 16 rows per step against one activation pair.
struct Bf16ColumnPairs {
  using Elem = uint16_t;
  static constexpr GgmlType kType = GgmlType::BF16;
  static constexpr int64_t kCols = kBf16PackedPair;
  static constexpr int kParts = 1;
  static __m512 load(const Elem* p, int /*part*/) {
    return _mm512_castsi512_ps(_mm512_loadu_si512(p));
  }
  static constexpr int64_t kActStepBytes = 2 * sizeof(uint16_t);  // one bf16 pair
  static __m512 broadcast(const uint8_t* step, int /*part*/) {
    return _mm512_castsi512_ps(_mm512_set1_epi32(load_i32(step)));
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)a);
  }
};

// BF16 widened to f32 for FMA: a column pair per step in two parts, column k + 1 first (its bf16
// is the high half of each 32-bit lane, so masking widens it) and then column k (shifted up), as
// vdpbf16ps adds them. The activations are the BF16 rows widened to f32 (packed_act.h);
// run under DAZ/FTZ, each FMA rounds and flushes as vdpbf16ps does.
struct Bf16WidenedPairs {
  using Elem = uint16_t;
  static constexpr GgmlType kType = GgmlType::BF16;
  static constexpr int64_t kCols = kBf16PackedPair;
  static constexpr int kParts = 2;
  static __m512 load(const Elem* p, int part) {
    const __m512i pair = _mm512_loadu_si512(p);
    return _mm512_castsi512_ps(part == 0 ? _mm512_and_si512(pair, _mm512_set1_epi32(-65536))
                                         : _mm512_slli_epi32(pair, 16));
  }
  static constexpr int64_t kActStepBytes = 2 * sizeof(float);  // a widened pair
  static __m512 broadcast(const uint8_t* step, int part) {
    return _mm512_set1_ps(reinterpret_cast<const float*>(step)[1 - part]);
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

// Groups g < G (group_elems apart from w, which points at column cols.begin) x tokens j < T of an
// activation tile of n_tile tokens
// (act: the tile's interleaved view, packed_act.h), columns cols, added to
// y[j * y_stride + 16 g + n] (which holds the sum over the columns before cols.begin). kPrefetch:
// the first token tile of a group block, which brings the weights from memory (a lone token's
// four streams leave the hardware prefetcher behind: measured 1.7x slower decode without it); the
// token tiles after it find them in cache.
template <class C, int G, int T, bool kPrefetch>
void tile(const typename C::Elem* w, int64_t group_elems, ColumnBlock cols, const uint8_t* act,
          int64_t n_tile, float* y, int64_t y_stride) {
  __m512 acc[G][T];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int j = 0; j < T; ++j)
      acc[g][j] = cols.begin > 0 ? _mm512_loadu_ps(y + j * y_stride + g * kPackedRows)
                                 : _mm512_setzero_ps();
  const int64_t step_stride = n_tile * C::kActStepBytes;  // bytes from one column step to the next
  const uint8_t* step = act + cols.begin / C::kCols * step_stride;
  for (int64_t k = cols.begin; k < cols.end; k += C::kCols, step += step_stride) {
    __m512 wv[G];
    constexpr int64_t kStepBytes = int64_t(sizeof(typename C::Elem)) * kPackedRows * C::kCols;
    if constexpr (kPrefetch) {
      if (k / C::kCols % (64 / kStepBytes) == 0)
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          _mm_prefetch(
              reinterpret_cast<const char*>(w + g * group_elems + (k - cols.begin) * kPackedRows) +
                  kPrefetchBytes,
              _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int part = 0; part < C::kParts; ++part) {
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
        wv[g] = C::load(w + g * group_elems + (k - cols.begin) * kPackedRows, part);
#pragma GCC unroll 16
      for (int j = 0; j < T; ++j) {
        const __m512 a = C::broadcast(step + j * C::kActStepBytes, part);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) acc[g][j] = C::combine(wv[g], a, acc[g][j]);
      }
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int j = 0; j < T; ++j) _mm512_storeu_ps(y + j * y_stride + g * kPackedRows, acc[g][j]);
}

// The tiles of groups [g, g + n_groups) (n_groups <= kGroupsForFew; w: group g at column
// cols.begin, the next group_elems apart) x one activation tile of n_tile tokens at act (t its
// first token).
template <class C>
void group_block_tiles(const typename C::Elem* w, int64_t group_elems, const PackedGemmArgs& p,
                       ColumnBlock cols, int64_t g, int n_groups, int64_t t, const uint8_t* act,
                       int64_t n_tile) {
  const auto run = [&](auto groups, auto tokens, int64_t g0) {
    constexpr int G = decltype(groups)::value, T = decltype(tokens)::value;
    const auto fn = t == 0 ? tile<C, G, T, true> : tile<C, G, T, false>;
    fn(w + (g0 - g) * group_elems, group_elems, cols, act, n_tile,
       p.y + t * p.y_stride + g0 * kPackedRows, p.y_stride);
  };
  if (n_tile <= kFewTokens) {
    with_tile_count<kGroupsForFew>(n_groups, [&](auto groups) {
      with_tile_count<kFewTokens>(int(n_tile), [&](auto tokens) { run(groups, tokens, g); });
    });
    return;
  }
  for (int64_t g0 = g; g0 < g + n_groups; g0 += kGroupsForMany)
    with_tile_count<kGroupsForMany>(
        int(std::min<int64_t>(kGroupsForMany, g + n_groups - g0)), [&](auto groups) {
          with_tile_count<kFloatActTile - kFewTokens>(int(n_tile - kFewTokens), [&](auto extra) {
            run(groups, std::integral_constant<int, kFewTokens + decltype(extra)::value>{}, g0);
          });
        });
}

// Columns per block for weights of Elem: kBlockWeightBytes per group block.
template <class Elem>
constexpr int64_t kBlockCols = kBlockWeightBytes /
                               (kGroupsForFew * kPackedRows * int64_t(sizeof(Elem)));

// All outputs, the activations in their interleaved view at act, the columns in blocks of
// block_cols. block_weights(cols, g, n_groups) returns the weights of groups [g, g + n_groups) at
// column cols.begin as C::Elem and the elements from one group to the next.
template <class C, class BlockWeights>
void gemm_tiles(const PackedGemmArgs& p, const uint8_t* act, int64_t block_cols,
                BlockWeights&& block_weights) {
  const int64_t act_column_bytes = C::kActStepBytes / C::kCols;
  for (int64_t k = 0; k < p.n_cols; k += block_cols) {
    const ColumnBlock cols{k, std::min(p.n_cols, k + block_cols)};
    for (int64_t g = 0; g < p.n_groups; g += kGroupsForFew) {
      const int n_groups = int(std::min<int64_t>(kGroupsForFew, p.n_groups - g));
      const auto [w, group_elems] = block_weights(cols, g, n_groups);
      for (int64_t t = 0; t < p.n_act; t += kFloatActTile)
        group_block_tiles<C>(w, group_elems, p, cols, g, n_groups, t,
                             act + t * p.n_cols * act_column_bytes,
                             std::min(kFloatActTile, p.n_act - t));
    }
  }
}

// The weights in place.
template <class C>
void gemm_tiles(const PackedGemmArgs& p, const uint8_t* act) {
  using Elem = typename C::Elem;
  static_assert(kBlockCols<Elem> % C::kCols == 0);
  const auto* w = static_cast<const Elem*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  gemm_tiles<C>(p, act, kBlockCols<Elem>, [&](ColumnBlock cols, int64_t g, int /*n_groups*/) {
    return std::pair(w + g * group_elems + cols.begin * kPackedRows, group_elems);
  });
}

// F16 weights against at least kWidenOnceMinTokens tokens: each block of a group block is widened
// to f32 once, into a buffer the token tiles then share, so that the F32 tile runs without a
// vcvtph2ps per weight vector and tile (it takes both FMA ports on Intel cores: 1.1x at 512
// tokens). Fewer tokens do not repay writing and reading the wider copy (measured: 0.6x at 16,
// even at 128). f16 widens exactly, so the floats are the same.
constexpr int64_t kWidenOnceMinTokens = 128;

void gemm_tiles_f16_widened_once(const PackedGemmArgs& p, const uint8_t* act) {
  constexpr int64_t kCols = kBlockCols<float>;
  float* block = thread_buffer<float>(size_t(kGroupsForFew * kPackedRows * kCols));
  const auto* w = static_cast<const uint16_t*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  gemm_tiles<FloatColumns<float>>(p, act, kCols, [&](ColumnBlock cols, int64_t g, int n_groups) {
    const int64_t block_group_elems = kPackedRows * (cols.end - cols.begin);
    for (int i = 0; i < n_groups; ++i) {
      const uint16_t* src = w + (g + i) * group_elems + cols.begin * kPackedRows;
      float* dst = block + i * block_group_elems;
      for (int64_t e = 0; e < block_group_elems; e += kPackedRows)
        _mm512_storeu_ps(
            dst + e,
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + e))));
    }
    return std::pair<const float*, int64_t>(block, block_group_elems);
  });
}

// The activations' interleaved view: the prepared one, or this thread's copy.
template <class C>
const uint8_t* interleaved_act(const PackedGemmArgs& p, Bf16Kernel bf16) {
  return static_cast<const uint8_t*>(
      packed_act_view(interleaved_float_act_prep(C::kType, bf16), p));
}

template <class C>
void gemm(const PackedGemmArgs& p) {
  const uint8_t* act = interleaved_act<C>(p, Bf16Kernel::kDot);
  if constexpr (std::is_same_v<C, FloatColumns<uint16_t>>) {
    if (p.n_act >= kWidenOnceMinTokens) return gemm_tiles_f16_widened_once(p, act);
  }
  gemm_tiles<C>(p, act);
}

template <>
void gemm<Bf16WidenedPairs>(const PackedGemmArgs& p) {
  const uint8_t* act = interleaved_act<Bf16WidenedPairs>(p, Bf16Kernel::kWidenedFma);
  const FlushSubnormals flush;
  gemm_tiles<Bf16WidenedPairs>(p, act);
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

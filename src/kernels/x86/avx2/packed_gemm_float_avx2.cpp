// AVX2 kernels for F32, F16 and BF16 weights in 16-row groups (packed_blocks.h) against f32
// activation rows (BF16: its BF16 rows widened, packed_act.h) (packed_gemm.h): the AVX-512
// kernel's outer product per column on two 8-row halves of a group, so every output is the same
// lane-wise fma chain over the columns in order, bit for bit the reference
// (ref/packed_gemm_ref.cpp). BF16 weights are widened in registers, the odd column of each pair
// first, under DAZ/FTZ, which is how vdpbf16ps adds them. A tile of one group x 6 tokens (12
// accumulators, 2 weight vectors and a broadcast: 15 of 16 registers) loads each weight vector
// once for 6 tokens; one or two tokens (decode) take two groups, for four independent chains.
// F16 and BF16 weights against 128 tokens or more are widened to f32 a group at a time first.
// Thread-safety: pure functions; disjoint outputs may be computed concurrently.
#include <algorithm>
#include <type_traits>

#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/thread_buffer.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/flush_subnormals.h"

namespace vela::kernels {

namespace avx2 {
namespace {

constexpr int kHalf = 8;            // rows per vector
constexpr int64_t kTileTokens = 6;  // tokens per tile of more than two

// How a tile step reads kCols columns of weights in kParts parts: one 8-row vector per part
// (load) against the activation of column act_col(k, part).
template <class WeightElem>
struct FloatColumns {  // F32 and F16: one column, widened to f32
  using Elem = WeightElem;
  static constexpr int64_t kCols = 1;
  static constexpr int kParts = 1;
  static __m256 load(const Elem* p, int /*part*/) {
    if constexpr (std::is_same_v<Elem, float>)
      return _mm256_loadu_ps(p);
    else
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static int64_t act_col(int64_t k, int /*part*/) { return k; }
};

// BF16: a column pair whose 32-bit lanes hold (column k, column k + 1) of a row; column k + 1
// (the high half, masked) first, then column k (shifted up).
struct Bf16WidenedPairs {
  using Elem = uint16_t;
  static constexpr int64_t kCols = kBf16PackedPair;
  static constexpr int kParts = 2;
  static __m256 load(const Elem* p, int part) {
    const __m256i pair = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_castsi256_ps(part == 0 ? _mm256_and_si256(pair, _mm256_set1_epi32(-65536))
                                         : _mm256_slli_epi32(pair, 16));
  }
  static int64_t act_col(int64_t k, int part) { return k + 1 - part; }
};

// Groups g < G (group_elems apart from w) x tokens j < T of f32 activations, all columns.
// kPrefetch: the first token tile of a group, which brings the weights from memory, fetches each
// stream's lines kPrefetchBytes ahead (a lone token's two streams leave the hardware prefetcher
// behind); the token tiles after it find them in cache.
template <class C, int G, int T, bool kPrefetch>
void tile(const typename C::Elem* w, int64_t group_elems, int64_t n_cols, const uint8_t* act,
          size_t act_stride, float* y, int64_t y_stride) {
  __m256 acc[G][2][T];
  VELA_UNROLL
  for (int g = 0; g < G; ++g) VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int j = 0; j < T; ++j) acc[g][h][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < n_cols; k += C::kCols) {
    if constexpr (kPrefetch) {
      constexpr int64_t kStepBytes = int64_t(sizeof(typename C::Elem)) * kPackedRows * C::kCols;
      if (k / C::kCols % (64 / kStepBytes) == 0) {
        VELA_UNROLL
        for (int g = 0; g < G; ++g) prefetch_weights<64>(w + g * group_elems + k * kPackedRows);
      }
    }
    VELA_UNROLL
    for (int part = 0; part < C::kParts; ++part) {
      __m256 wv[G][2];
      VELA_UNROLL
      for (int g = 0; g < G; ++g) VELA_UNROLL
      for (int h = 0; h < 2; ++h)
        wv[g][h] = C::load(w + g * group_elems + k * kPackedRows + h * kHalf * C::kCols, part);
      VELA_UNROLL
      for (int j = 0; j < T; ++j) {
        const __m256 a = _mm256_set1_ps(
            reinterpret_cast<const float*>(act + size_t(j) * act_stride)[C::act_col(k, part)]);
        VELA_UNROLL
        for (int g = 0; g < G; ++g) VELA_UNROLL
        for (int h = 0; h < 2; ++h) acc[g][h][j] = _mm256_fmadd_ps(wv[g][h], a, acc[g][h][j]);
      }
    }
  }
  VELA_UNROLL
  for (int g = 0; g < G; ++g) VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int j = 0; j < T; ++j)
    _mm256_storeu_ps(y + j * y_stride + g * kPackedRows + h * kHalf, acc[g][h][j]);
}

// act: f32 rows, act_stride bytes apart.
template <class C>
void gemm_f32_act(const PackedGemmArgs& p, const uint8_t* act, size_t act_stride) {
  const auto* w = static_cast<const typename C::Elem*>(p.w);
  const int64_t group_elems = kPackedRows * p.n_cols;
  const auto run = [&](auto groups, auto tokens, int64_t g, int64_t t) {
    constexpr int G = decltype(groups)::value, T = decltype(tokens)::value;
    const auto fn = t == 0 ? tile<C, G, T, true> : tile<C, G, T, false>;
    fn(w + g * group_elems, group_elems, p.n_cols, act + size_t(t) * act_stride, act_stride,
       p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
  };
  if (p.n_act <= 2)
    for_float_tiles<2, 2>(p.n_groups, p.n_act, run);
  else
    for_float_tiles<1, kTileTokens>(p.n_groups, p.n_act, run);
}

// F16 and BF16 weights against at least kWidenOnceMinTokens tokens: each group is widened to f32
// once, into a buffer its token tiles then share, so that the tile runs without a widening per
// weight vector and tile (vcvtph2ps, or a mask or shift per BF16 pair: both compete with the
// FMAs for their ports). Measured on the Xeon at VELA_ISA=avx2, one thread: F16 1.12x at 128 and
// 256 tokens, 1.08x at 512; BF16 1.28x at 128, 1.34x at 512. Widening is exact, so the floats are
// the same.
constexpr int64_t kWidenOnceMinTokens = 128;

// F16 groups widened: the F32 layout, [n_cols][16].
struct F16Widened : FloatColumns<float> {
  using Source = uint16_t;
  static void widen(const uint16_t* src, int64_t n_cols, float* dst) {
    for (int64_t e = 0; e < kPackedRows * n_cols; e += kHalf)
      _mm256_storeu_ps(dst + e,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + e))));
  }
};

// BF16 groups widened: per column pair and 8-row half, Bf16WidenedPairs' two parts (column k + 1,
// then column k) as 8 floats each, [n_cols / 2][2 halves][2 parts][8], at the element offsets
// the packed pairs have, so the tile addresses both alike.
struct Bf16Widened {
  using Elem = float;
  using Source = uint16_t;
  static constexpr int64_t kCols = kBf16PackedPair;
  static constexpr int kParts = 2;
  static __m256 load(const float* p, int part) { return _mm256_loadu_ps(p + part * kHalf); }
  static int64_t act_col(int64_t k, int part) { return Bf16WidenedPairs::act_col(k, part); }
  static void widen(const uint16_t* src, int64_t n_cols, float* dst) {
    for (int64_t e = 0; e < kPackedRows * n_cols; e += kHalf * kCols)
      for (int part = 0; part < kParts; ++part)
        _mm256_storeu_ps(dst + e + part * kHalf, Bf16WidenedPairs::load(src + e, part));
  }
};

// Every group widened by W once, then its token tiles (act: f32 rows, act_stride bytes apart).
template <class W>
void gemm_widened_once(const PackedGemmArgs& p, const uint8_t* act, size_t act_stride) {
  const int64_t group_elems = kPackedRows * p.n_cols;
  float* group = thread_buffer<float>(size_t(group_elems));
  const auto* w = static_cast<const typename W::Source*>(p.w);
  for (int64_t g = 0; g < p.n_groups; ++g) {
    W::widen(w + g * group_elems, p.n_cols, group);
    for (int64_t t = 0; t < p.n_act; t += kTileTokens)
      with_tile_count<kTileTokens>(int(std::min(kTileTokens, p.n_act - t)), [&](auto tokens) {
        tile<W, 1, decltype(tokens)::value, false>(
            group, group_elems, p.n_cols, act + size_t(t) * act_stride, act_stride,
            p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
      });
  }
}

template <class Elem>
void gemm(const PackedGemmArgs& p) {
  if constexpr (std::is_same_v<Elem, uint16_t>) {
    if (p.n_act >= kWidenOnceMinTokens)
      return gemm_widened_once<F16Widened>(p, p.act, p.act_stride);
  }
  gemm_f32_act<FloatColumns<Elem>>(p, p.act, p.act_stride);
}

void gemm_bf16(const PackedGemmArgs& p) {
  const auto* act = static_cast<const uint8_t*>(packed_act_view(widened_bf16_act_prep(), p));
  const size_t act_stride = size_t(p.n_cols) * sizeof(float);
  const FlushSubnormals flush;
  if (p.n_act >= kWidenOnceMinTokens)
    gemm_widened_once<Bf16Widened>(p, act, act_stride);
  else
    gemm_f32_act<Bf16WidenedPairs>(p, act, act_stride);
}

}  // namespace
}  // namespace avx2

PackedGemmFn packed_gemm_float_avx2(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::F32:
      return avx2::gemm<float>;
    case GgmlType::F16:
      return avx2::gemm<uint16_t>;
    case GgmlType::BF16:
      return avx2::gemm_bf16;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

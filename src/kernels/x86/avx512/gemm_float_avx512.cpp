// AVX-512 register-tiled GEMM (TypeTraits::gemm_tile) for F32 and F16 weights against f32
// activations and BF16 weights against BF16 activations (vdpbf16ps), for prompt processing. A
// cache-sized block of weight rows is widened to f32 (F16) or copied once per call; a tile of
// kTileW weight rows x kTileA activation rows then loads each weight chunk once for kTileA rows and
// each activation chunk once for kTileW rows, instead of one load per multiply-add as in the row
// kernels.
//
// Every output is bit-identical to the table's vec_dot (dot_float_avx512.cpp: dot_tile): the same
// two accumulator chains (chunk i to chain 0, chunk i + C to chain 1 in steps of 2C, then the
// remaining C-element chunks, the last one masked, to chain 0; C = 16 floats or 32 bf16), the
// same fmadd / vdpbf16ps per chunk, the same final add and hsum. f16 widens exactly to f32, so
// widening early changes nothing.
// Thread-safety: pure functions of their arguments (per-thread scratch).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/gemm_avx512.h"

namespace vela::kernels::avx512 {

namespace {

constexpr int kTileW = 4;  // 4 x 3 outputs x 2 chains = 24 accumulators, + 4 weights + 1 act
constexpr int kTileA = 3;

// How the tile's weight and activation chunks meet: the same instruction as the format's
// vec_dot (dot_float_avx512.cpp), on the same chunks.
struct FloatOps {  // F32 and F16 weights (widened to f32) against f32 activations
  using Elem = float;
  static constexpr int64_t kChunk = 16;
  static __m512 load(const Elem* p, __mmask32 mask) {
    return _mm512_maskz_loadu_ps(__mmask16(mask), p);
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) { return _mm512_fmadd_ps(w, a, acc); }
};

struct Bf16Ops {  // BF16 weights against BF16 activations: vdpbf16ps on pairs
  using Elem = uint16_t;
  static constexpr int64_t kChunk = 32;
  static __m512 load(const Elem* p, __mmask32 mask) {
    return _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask, p));
  }
  static __m512 combine(__m512 w, __m512 a, __m512 acc) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)a);
  }
};

struct F32Widen {
  using Ops = FloatOps;
  static void row(const void* w, int64_t n, float* out) {
    std::memcpy(out, w, size_t(n) * sizeof(float));
  }
};

struct F16Widen {
  using Ops = FloatOps;
  static void row(const void* w, int64_t n, float* out) {
    const auto* h = static_cast<const uint16_t*>(w);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(
          out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
    for (; i < n; ++i) out[i] = half_to_float(h[i]);
  }
};

struct BF16Copy {  // already in the form vdpbf16ps takes
  using Ops = Bf16Ops;
  static void row(const void* w, int64_t n, uint16_t* out) {
    std::memcpy(out, w, size_t(n) * sizeof(uint16_t));
  }
};

// acc[i][j] = combine(w row i chunk k, act row j chunk k) (the chunk's first kChunk or masked
// elements).
template <class Ops, int RW, int RA>
__attribute__((always_inline)) inline void chunk_step(const typename Ops::Elem* w, int64_t n,
                                                      const typename Ops::Elem* act,
                                                      int64_t act_stride, int64_t k, __mmask32 mask,
                                                      __m512 (&acc)[RW][RA]) {
  __m512 wv[RW];
#pragma GCC unroll 4
  for (int i = 0; i < RW; ++i) wv[i] = Ops::load(w + i * n + k, mask);
#pragma GCC unroll 4
  for (int j = 0; j < RA; ++j) {
    const __m512 a = Ops::load(act + j * act_stride + k, mask);
#pragma GCC unroll 4
    for (int i = 0; i < RW; ++i) acc[i][j] = Ops::combine(wv[i], a, acc[i][j]);
  }
}

// out[t * out_stride + r] = vec_dot(weight row r, activation row t) for r < RW, t < RA.
// w: RW prepared rows of [n], n elements apart; act: RA rows of [n], act_stride elements apart.
template <class Ops, int RW, int RA>
void tile(int64_t n, const typename Ops::Elem* w, const typename Ops::Elem* act, int64_t act_stride,
          float* out, int64_t out_stride) {
  constexpr int64_t C = Ops::kChunk;
  __m512 chain0[RW][RA], chain1[RW][RA];
#pragma GCC unroll 4
  for (int i = 0; i < RW; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < RA; ++j) chain0[i][j] = chain1[i][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 2 * C <= n; k += 2 * C) {
    chunk_step<Ops, RW, RA>(w, n, act, act_stride, k, ~__mmask32(0), chain0);
    chunk_step<Ops, RW, RA>(w, n, act, act_stride, k + C, ~__mmask32(0), chain1);
  }
  for (; k < n; k += C) {
    const int64_t left = n - k;
    chunk_step<Ops, RW, RA>(w, n, act, act_stride, k,
                            left >= C ? ~__mmask32(0) : __mmask32((1u << left) - 1), chain0);
  }
#pragma GCC unroll 4
  for (int i = 0; i < RW; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < RA; ++j)
      out[j * out_stride + i] = hsum(_mm512_add_ps(chain0[i][j], chain1[i][j]));
}

template <class Ops>
using TileFn = void (*)(int64_t, const typename Ops::Elem*, const typename Ops::Elem*, int64_t,
                        float*, int64_t);

template <class Ops, int RA, int... RW>
constexpr auto tiles_for(std::integer_sequence<int, RW...>) {
  return std::array<TileFn<Ops>, sizeof...(RW)>{tile<Ops, RW + 1, RA>...};
}
template <class Ops, int... RA>
constexpr auto all_tiles(std::integer_sequence<int, RA...>) {
  return std::array{tiles_for<Ops, RA + 1>(std::make_integer_sequence<int, kTileW>{})...};
}

// Prepared weight rows per block: within a core's L2 with the activation tile.
constexpr size_t kWeightBlockBytes = 512 * 1024;

template <class W>
void gemm_tile(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows, const uint8_t* act,
               size_t act_stride, int64_t n_act, float* out, int64_t out_stride) {
  using Ops = typename W::Ops;
  using Elem = typename Ops::Elem;
  static constexpr auto kTiles = all_tiles<Ops>(std::make_integer_sequence<int, kTileA>{});
  const int64_t rows_per_block = std::max<int64_t>(
      kTileW, int64_t(kWeightBlockBytes / (sizeof(Elem) * size_t(n))) / kTileW * kTileW);
  const int64_t w_rows = std::min(rows_per_block, n_w_rows);
  Elem* pw = thread_buffer<Elem>(size_t(w_rows * n));  // [w_rows, n]
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  const auto* x = reinterpret_cast<const Elem*>(act);
  const int64_t x_stride = int64_t(act_stride / sizeof(Elem));
  for (int64_t r0 = 0; r0 < n_w_rows; r0 += w_rows) {
    const int64_t rows = std::min(w_rows, n_w_rows - r0);
    for (int64_t i = 0; i < rows; ++i) W::row(w_bytes + size_t(r0 + i) * w_stride, n, pw + i * n);
    for (int64_t t = 0; t < n_act; t += kTileA) {
      const int64_t ra = std::min<int64_t>(kTileA, n_act - t);
      const auto* fns = kTiles[size_t(ra - 1)].data();
      for (int64_t r = 0; r < rows; r += kTileW) {
        const int64_t rw = std::min<int64_t>(kTileW, rows - r);
        fns[rw - 1](n, pw + r * n, x + t * x_stride, x_stride, out + t * out_stride + r0 + r,
                    out_stride);
      }
    }
  }
}

}  // namespace

void register_float_gemm_kernels(TraitsTable& table, Avx512Extensions ext) {
  table[size_t(GgmlType::F32)].gemm_tile = gemm_tile<F32Widen>;
  table[size_t(GgmlType::F16)].gemm_tile = gemm_tile<F16Widen>;
  // BF16's vec_dot is vdpbf16ps only with AVX512-BF16; without it the rows kernel serves.
  // (The table starts as the AVX2 one, whose BF16 gemm_tile matches only the AVX2 vec_dot.)
  table[size_t(GgmlType::BF16)].gemm_tile = ext.bf16 ? gemm_tile<BF16Copy> : nullptr;
}

}  // namespace vela::kernels::avx512

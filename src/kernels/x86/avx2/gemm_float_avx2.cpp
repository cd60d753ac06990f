// AVX2 register-tiled GEMM (TypeTraits::gemm_tile) for F32, F16 and BF16 weights, for prompt
// processing. Blocks of weight rows are widened to f32 once per call (BF16 activations once per
// weight block); a tile of kTileW weight rows x kTileA activation rows then loads each weight
// chunk once for kTileA rows and each activation chunk once for kTileW rows.
//
// Every output is bit-identical to the table's vec_dot (dot_float_avx2.cpp: FloatDot): four
// accumulator chains, chain c taking the 8-float chunks 32m + 8c in order of m, then the
// remaining 8-float chunks and the zero-padded tail to chain 0, and the result
// hsum((c0 + c1) + (c2 + c3)). The chains are independent until that sum, so the tile runs them
// in two passes of two (c0 and c1 on the first 16 floats of each 32, then c2 and c3 on the
// others): 3 x 2 outputs x 2 chains = 12 accumulators, 2 activation vectors and 1 weight vector
// in the 16 registers, where all four chains at once would leave room for 3 outputs only. f16 and
// bf16 widen exactly to f32, so widening early changes nothing.
// Thread-safety: pure functions of their arguments (per-thread scratch).
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/kernels_avx2.h"

namespace vela::kernels::avx2 {

namespace {

constexpr int kTileW = 3;      // weight rows per tile
constexpr int kTileA = 2;      // activation rows per tile
constexpr int64_t kChain = 8;  // floats per chunk of one chain
constexpr int64_t kStep = 32;  // floats per round of the four chains

// [n] f32 at `out` from n elements at `in`.
void widen_f32(const void* in, int64_t n, float* out) {
  std::memcpy(out, in, size_t(n) * sizeof(float));
}

void widen_f16(const void* in, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(in);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) out[i] = half_to_float(h[i]);
}

void widen_bf16(const void* in, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(in);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = uint32_t(h[i]) << 16;  // bf16 is the top half of an f32
    std::memcpy(out + i, &bits, sizeof(bits));
  }
}

using WidenFn = void (*)(const void*, int64_t, float*);

// The zero-padded last `count` (< 8) floats.
inline __m256 load_tail(const float* p, int64_t count) {
  float buf[8] = {};
  std::memcpy(buf, p, size_t(count) * sizeof(float));
  return _mm256_loadu_ps(buf);
}

// One pass of two chains: acc[h][i][j] += w row i * act row j over the chunks 32m + first + 8h.
// The RA activation vectors are loaded once into registers, each weight vector once for them.
template <int RW, int RA>
__attribute__((always_inline)) inline void chain_pair(int64_t n_steps, int64_t first,
                                                      const float* w, int64_t n, const float* act,
                                                      int64_t act_stride,
                                                      __m256 (&acc)[2][RW][RA]) {
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) {
    VELA_UNROLL
    for (int i = 0; i < RW; ++i) {
      VELA_UNROLL
      for (int j = 0; j < RA; ++j) acc[h][i][j] = _mm256_setzero_ps();
    }
  }
  for (int64_t m = 0; m < n_steps; ++m) {
    const int64_t k = m * kStep + first;
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256 a[RA];
      VELA_UNROLL
      for (int j = 0; j < RA; ++j) {
        a[j] = _mm256_loadu_ps(act + j * act_stride + k + kChain * h);
        // Kept in a register for the RW multiplies: folded into each FMA's memory operand, as
        // the compiler would, it would be loaded RW times (the loop is load-bound).
        __asm__("" : "+x"(a[j]));
      }
      VELA_UNROLL
      for (int i = 0; i < RW; ++i) {
        __m256 wv = _mm256_loadu_ps(w + i * n + k + kChain * h);
        __asm__("" : "+x"(wv));  // likewise: one load for the RA multiplies
        VELA_UNROLL
        for (int j = 0; j < RA; ++j) acc[h][i][j] = _mm256_fmadd_ps(wv, a[j], acc[h][i][j]);
      }
    }
  }
}

// out[t * out_stride + r] = vec_dot(weight row r, activation row t) for r < RW, t < RA.
// w: RW widened rows of [n], n floats apart; act: RA rows of [n] f32, act_stride floats apart.
template <int RW, int RA>
void tile(int64_t n, const float* w, const float* act, int64_t act_stride, float* out,
          int64_t out_stride) {
  const int64_t n_steps = n / kStep;
  __m256 c01[2][RW][RA], c23[2][RW][RA];
  chain_pair<RW, RA>(n_steps, 0, w, n, act, act_stride, c01);
  // Chain 0 continues with the 8-float chunks past the last full round, then the tail.
  for (int64_t k = n_steps * kStep; k < n; k += kChain) {
    const int64_t left = n - k;
    VELA_UNROLL
    for (int j = 0; j < RA; ++j) {
      const float* a = act + j * act_stride + k;
      const __m256 av = left >= kChain ? _mm256_loadu_ps(a) : load_tail(a, left);
      VELA_UNROLL
      for (int i = 0; i < RW; ++i) {
        const float* wr = w + i * n + k;
        const __m256 wv = left >= kChain ? _mm256_loadu_ps(wr) : load_tail(wr, left);
        c01[0][i][j] = _mm256_fmadd_ps(wv, av, c01[0][i][j]);
      }
    }
  }
  chain_pair<RW, RA>(n_steps, 2 * kChain, w, n, act, act_stride, c23);
  VELA_UNROLL
  for (int i = 0; i < RW; ++i) {
    VELA_UNROLL
    for (int j = 0; j < RA; ++j)
      out[j * out_stride + i] = hsum(_mm256_add_ps(_mm256_add_ps(c01[0][i][j], c01[1][i][j]),
                                                   _mm256_add_ps(c23[0][i][j], c23[1][i][j])));
  }
}

using TileFn = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t);

template <int RA, int... RW>
constexpr auto tiles_for(std::integer_sequence<int, RW...>) {
  return std::array<TileFn, sizeof...(RW)>{tile<RW + 1, RA>...};
}
template <int... RA>
constexpr auto all_tiles(std::integer_sequence<int, RA...>) {
  return std::array{tiles_for<RA + 1>(std::make_integer_sequence<int, kTileW>{})...};
}
constexpr auto kTiles = all_tiles(std::make_integer_sequence<int, kTileA>{});  // [RA - 1][RW - 1]

// The loop nest keeps each tile's weight rows in L1 while the activation rows of a token block
// pass them from L2: widened weights in blocks of rows (L3), activations in blocks of tokens.
constexpr size_t kWeightBlockBytes = 2 << 20;
constexpr size_t kTokenBlockBytes = 192 << 10;

// n floats at a 64-byte boundary (whole cache lines: a 32-byte load never spans two).
float* thread_floats(std::vector<float>& buffer, size_t n) {
  if (buffer.size() < n + 16) buffer.resize(n + 16);
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (64 - address % 64) % 64 / sizeof(float);
}

// Rows per block of `bytes` of [n] f32 rows: a multiple of `tile`, at least one tile.
int64_t rows_per_block(size_t bytes, int64_t n, int tile) {
  return std::max<int64_t>(tile, int64_t(bytes / (sizeof(float) * size_t(n))) / tile * tile);
}

template <WidenFn kWidenW, bool kWidenAct>
void gemm_tile(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows, const uint8_t* act,
               size_t act_stride, int64_t n_act, float* out, int64_t out_stride) {
  thread_local std::vector<float> weight_buffer, act_buffer;
  const int64_t w_rows = std::min(rows_per_block(kWeightBlockBytes, n, kTileW), n_w_rows);
  const int64_t a_rows = std::min(rows_per_block(kTokenBlockBytes, n, kTileA), n_act);
  float* pw = thread_floats(weight_buffer, size_t(w_rows * n));                     // [w_rows, n]
  float* pa = kWidenAct ? thread_floats(act_buffer, size_t(a_rows * n)) : nullptr;  // [a_rows, n]
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  for (int64_t r0 = 0; r0 < n_w_rows; r0 += w_rows) {
    const int64_t rows = std::min(w_rows, n_w_rows - r0);
    for (int64_t i = 0; i < rows; ++i) kWidenW(w_bytes + size_t(r0 + i) * w_stride, n, pw + i * n);
    for (int64_t t0 = 0; t0 < n_act; t0 += a_rows) {
      const int64_t tokens = std::min(a_rows, n_act - t0);
      const float* x;
      int64_t x_stride;
      if constexpr (kWidenAct) {
        for (int64_t j = 0; j < tokens; ++j)
          widen_bf16(act + size_t(t0 + j) * act_stride, n, pa + j * n);
        x = pa;
        x_stride = n;
      } else {
        x_stride = int64_t(act_stride / sizeof(float));
        x = reinterpret_cast<const float*>(act) + t0 * x_stride;
      }
      for (int64_t r = 0; r < rows; r += kTileW) {
        const int64_t rw = std::min<int64_t>(kTileW, rows - r);
        for (int64_t t = 0; t < tokens; t += kTileA) {
          const int64_t ra = std::min<int64_t>(kTileA, tokens - t);
          kTiles[size_t(ra - 1)][size_t(rw - 1)](n, pw + r * n, x + t * x_stride, x_stride,
                                                 out + (t0 + t) * out_stride + r0 + r, out_stride);
        }
      }
    }
  }
}

}  // namespace

void gemm_tile_f32_f32(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                       const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                       int64_t out_stride) {
  gemm_tile<widen_f32, false>(n, w, w_stride, n_w_rows, act, act_stride, n_act, out, out_stride);
}
void gemm_tile_f16_f32(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                       const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                       int64_t out_stride) {
  gemm_tile<widen_f16, false>(n, w, w_stride, n_w_rows, act, act_stride, n_act, out, out_stride);
}
void gemm_tile_bf16_bf16(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows,
                         const uint8_t* act, size_t act_stride, int64_t n_act, float* out,
                         int64_t out_stride) {
  gemm_tile<widen_bf16, true>(n, w, w_stride, n_w_rows, act, act_stride, n_act, out, out_stride);
}

}  // namespace vela::kernels::avx2

// AVX-512 VNNI register-tiled GEMM (TypeTraits::gemm_tile) for Q4_0 and Q8_0 weights against Q8_0
// activations, for prompt processing. Weight block pairs are decoded (unsigned levels, float
// scales) once per call for a cache-sized block of rows, and activation pairs (quants, float
// scales, offset correction) once per block of rows; a register tile of kTileW weight rows x
// kTileA activation rows then needs only vpdpbusd, cvt, mul and fma per pair of rows.
//
// Every output is bit-identical to the table's vec_dot (dot_q32_avx512.cpp) for that pair:
//  - the int32 lane sums are the same exact integers. vec_dot multiplies |w| by the sign-adjusted
//    activation; here the weight is stored unsigned as w + off (Q4_0's raw nibble, Q8_0's byte
//    with the top bit flipped) and the lane starts at -off * sum(a) over its 4 bytes, so one
//    vpdpbusd per (weight, activation) pair gives the same lane value;
//  - each pair's lanes are scaled and accumulated with the same float operations, in the same
//    order per lane: acc = fma(float(sum), d_w * d_a, acc), lanes 0-7 block b, 8-15 block b+1;
//  - the pairs go to the same two accumulator chains as vec_dot's (kChains, its main-loop bound
//    kReadableBlocks), and the chains are added and reduced with the same hsum.
// Chain 1 is accumulated first and set aside, then chain 0, so a tile needs only one set of
// accumulators in registers. Changing vec_dot's chain layout requires the same change here (the
// gemm tests compare the two bit for bit).
// Thread-safety: pure functions of their arguments.
#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <utility>

#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/gemm_avx512.h"
#include "quant/blocks.h"

namespace vela::kernels::avx512 {

namespace {

constexpr int64_t kBlock = 32;

// vec_dot's accumulator chains per output, and the blocks its main loop must be able to read
// 64 bytes at (dot_q32_avx512.cpp: dot_tile): together they decide which chain each pair uses.
constexpr int kChains = 2;
template <class Block>
constexpr int64_t kReadableBlocks = (64 + sizeof(Block) - 1) / sizeof(Block);

// Register tile: weight rows x activation rows. 4 x 4 keeps 16 accumulators, 8 decoded weight
// registers and the activation pair's 3 registers within the 32 zmm registers.
constexpr int kTileW = 4;
constexpr int kTileA = 4;

// Lanes 0-7 = fp16 h0, lanes 8-15 = fp16 h1 (zero for a lone block), as exact floats.
template <bool kTwo>
inline __m512 two_scales(const uint16_t* h0, const uint16_t* h1) {
  const __m128i lo = _mm_set1_epi16(short(*h0));
  const __m128i hi = kTwo ? _mm_set1_epi16(short(*h1)) : _mm_setzero_si128();
  return _mm512_cvtph_ps(_mm256_set_m128i(hi, lo));
}

// The 32 quants of one block (upper half zero) or of two blocks `stride` bytes apart.
template <bool kTwo>
inline __m512i load_quants(const void* q, size_t stride) {
  const auto* p = static_cast<const uint8_t*>(q);
  const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (!kTwo) return _mm512_zextsi256_si512(q0);
  const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + stride));
  return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
}

// Weight formats: decode a block pair (or a lone block) into unsigned levels w + kOffset in
// element order and the scales. A lone block leaves the upper half's levels and scales zero, as
// vec_dot's single-block tail does.
struct Q4_0Gemm {
  using Block = BlockQ4_0;
  static constexpr char kOffset = 8;
  template <bool kTwo>
  static void decode(const Block* w, __m512i* u, __m512* d) {
    // 128-bit lanes: block 0's 16 nibble bytes twice, then block 1's twice; the second copy of
    // each is shifted down 4 to give elements 16-31.
    const __m256i b0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)w[0].qs));
    const __m256i b1 = kTwo ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)w[1].qs))
                            : _mm256_setzero_si256();
    const __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(b0), b1, 1);
    const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    *u = _mm512_and_si512(_mm512_srlv_epi64(raw, shifts), _mm512_set1_epi8(0x0F));
    *d = two_scales<kTwo>(&w[0].d, &w[kTwo ? 1 : 0].d);
  }
};

struct Q8_0Gemm {
  using Block = BlockQ8_0;
  static constexpr char kOffset = char(0x80);  // 128 as the unsigned byte vpdpbusd sees
  template <bool kTwo>
  static void decode(const Block* w, __m512i* u, __m512* d) {
    // w + 128 in [0, 255]: flipping the sign bit. A lone block's upper half becomes 0x80, which
    // the zero activation quants there cancel.
    *u = _mm512_xor_si512(load_quants<kTwo>(w[0].qs, sizeof(Block)), _mm512_set1_epi8(char(0x80)));
    *d = two_scales<kTwo>(&w[0].d, &w[kTwo ? 1 : 0].d);
  }
};

// One activation pair, prepared once per gemm_tile call for every weight row it is dotted with.
struct ActPair {
  __m512i q;     // signed quants, element order
  __m512i corr;  // per lane: -offset * (sum of its 4 quants)
  __m512 d;      // scales: lanes 0-7 block 0, 8-15 block 1 (zero for a lone block)
};

template <class F, bool kTwo>
inline void prepare_pair(const BlockQ8_0* a, ActPair* p) {
  const __m512i q = load_quants<kTwo>(a[0].qs, sizeof(BlockQ8_0));
  const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(F::kOffset), q);
  p->q = q;
  p->corr = _mm512_sub_epi32(_mm512_setzero_si512(), sum);
  p->d = two_scales<kTwo>(&a[0].d, &a[kTwo ? 1 : 0].d);
}

// Pairs of an nb-block row: pair s holds blocks 2s and 2s + 1 (a lone last block when nb is odd).
inline int64_t pair_count(int64_t nb) {
  return (nb + 1) / 2;
}

// One activation row: [nb] BlockQ8_0 -> out: [pair_count(nb)] ActPair.
template <class F>
void prepare_row(int64_t nb, const BlockQ8_0* a, ActPair* out) {
  int64_t s = 0;
  for (; 2 * s + 2 <= nb; ++s) prepare_pair<F, true>(a + 2 * s, out + s);
  if (2 * s < nb) prepare_pair<F, false>(a + 2 * s, out + s);
}

// A decoded weight pair, prepared once per gemm_tile call for every activation row.
struct WeightPair {
  __m512i u;  // levels + offset, unsigned, element order
  __m512 d;   // scales: lanes 0-7 block 0, 8-15 block 1 (zero for a lone block)
};

// One weight row: [nb] F::Block -> out: [pair_count(nb)] WeightPair.
template <class F>
void prepare_weight_row(int64_t nb, const typename F::Block* w, WeightPair* out) {
  int64_t s = 0;
  for (; 2 * s + 2 <= nb; ++s) F::template decode<true>(w + 2 * s, &out[s].u, &out[s].d);
  if (2 * s < nb) F::template decode<false>(w + 2 * s, &out[s].u, &out[s].d);
}

// out[t * out_stride + r] = vec_dot(weight row r, activation row t), r < RW, t < RA.
// w: RW prepared rows of [pair_count(nb)] WeightPair, w_stride pairs apart; act: RA prepared
// rows of [pair_count(nb)] ActPair, act_stride pairs apart.
template <class F, int RW, int RA>
void gemm_block(int64_t nb, const WeightPair* w, int64_t w_stride, const ActPair* act,
                int64_t act_stride, float* out, int64_t out_stride) {
  using Block = typename F::Block;
  __m512 acc[RW][RA];
  const auto zero = [&] {
    for (int i = 0; i < RW; ++i)
      for (int j = 0; j < RA; ++j) acc[i][j] = _mm512_setzero_ps();
  };
  const auto step = [&](auto two, int64_t b) {
    (void)two;  // the pair's form is in the prepared data; kept for the call sites' clarity
    __m512i u[RW];
    __m512 dw[RW];
#pragma GCC unroll 8
    for (int i = 0; i < RW; ++i) {
      u[i] = w[i * w_stride + b / 2].u;
      dw[i] = w[i * w_stride + b / 2].d;
    }
#pragma GCC unroll 8
    for (int j = 0; j < RA; ++j) {
      const ActPair& a = act[j * act_stride + b / 2];
#pragma GCC unroll 8
      for (int i = 0; i < RW; ++i) {
        const __m512i sum = _mm512_dpbusd_epi32(a.corr, u[i], a.q);
        const __m512 scale = _mm512_mul_ps(dw[i], a.d);  // d_w * d_a, as vec_dot
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[i][j]);
      }
    }
  };
  using Two = std::integral_constant<bool, true>;
  using One = std::integral_constant<bool, false>;

  // vec_dot's main loop: pairs b (chain 0) and b + 2 (chain 1) while b + 2 + readable <= nb.
  constexpr int64_t kStep = 2 * kChains;
  const int64_t span = 2 * (kChains - 1) + kReadableBlocks<Block>;
  const int64_t main_end = nb >= span ? ((nb - span) / kStep + 1) * kStep : 0;

  zero();
  for (int64_t b = 2; b < main_end; b += kStep) step(Two{}, b);
  __m512 chain1[RW][RA];
  for (int i = 0; i < RW; ++i)
    for (int j = 0; j < RA; ++j) chain1[i][j] = acc[i][j];
  zero();
  for (int64_t b = 0; b < main_end; b += kStep) step(Two{}, b);
  int64_t b = main_end;
  for (; b + 2 <= nb; b += 2) step(Two{}, b);
  if (b < nb) step(One{}, b);
  for (int i = 0; i < RW; ++i)
    for (int j = 0; j < RA; ++j)
      out[j * out_stride + i] = hsum(_mm512_add_ps(acc[i][j], chain1[i][j]));
}

template <class F>
using BlockFn = void (*)(int64_t, const WeightPair*, int64_t, const ActPair*, int64_t, float*,
                         int64_t);

template <class F, int RA, int... RW>
constexpr auto column_of_blocks(std::integer_sequence<int, RW...>) {
  return std::array<BlockFn<F>, sizeof...(RW)>{gemm_block<F, RW + 1, RA>...};
}

// kBlocks[ra - 1][rw - 1]: the tile kernels for every edge size.
template <class F, int... RA>
constexpr auto all_blocks(std::integer_sequence<int, RA...>) {
  return std::array{column_of_blocks<F, RA + 1>(std::make_integer_sequence<int, kTileW>{})...};
}

// Prepared weights per block of rows: within a core's L2 with the activation tile, since every
// activation tile passes over the whole block.
constexpr size_t kWeightBlockBytes = 256 * 1024;

template <class F>
void gemm_tile(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows, const uint8_t* act,
               size_t act_stride, int64_t n_act, float* out, int64_t out_stride) {
  static constexpr auto kBlocks = all_blocks<F>(std::make_integer_sequence<int, kTileA>{});
  const int64_t nb = n / kBlock;
  const int64_t n_pairs = pair_count(nb);
  const int64_t rows_per_block = std::max<int64_t>(
      kTileW,
      int64_t(kWeightBlockBytes / (sizeof(WeightPair) * size_t(n_pairs))) / kTileW * kTileW);
  const int64_t w_rows = std::min(rows_per_block, n_w_rows);
  WeightPair* pw = thread_buffer<WeightPair>(size_t(w_rows * n_pairs));  // [w_rows, n_pairs]
  ActPair* pa = thread_buffer<ActPair>(size_t(kTileA * n_pairs));        // [kTileA, n_pairs]
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  for (int64_t r0 = 0; r0 < n_w_rows; r0 += w_rows) {
    const int64_t rows = std::min(w_rows, n_w_rows - r0);
    for (int64_t i = 0; i < rows; ++i)
      prepare_weight_row<F>(
          nb, reinterpret_cast<const typename F::Block*>(w_bytes + size_t(r0 + i) * w_stride),
          pw + i * n_pairs);
    // Activation tiles outer: each is prepared once per weight block and stays in L1/L2 while
    // every row of the block passes over it.
    for (int64_t t = 0; t < n_act; t += kTileA) {
      const int64_t ra = std::min<int64_t>(kTileA, n_act - t);
      for (int64_t j = 0; j < ra; ++j)
        prepare_row<F>(nb, reinterpret_cast<const BlockQ8_0*>(act + size_t(t + j) * act_stride),
                       pa + j * n_pairs);
      const auto* tile_fns = kBlocks[ra - 1].data();
      for (int64_t r = 0; r < rows; r += kTileW) {
        const int64_t rw = std::min<int64_t>(kTileW, rows - r);
        tile_fns[rw - 1](nb, pw + r * n_pairs, n_pairs, pa, n_pairs, out + t * out_stride + r0 + r,
                         out_stride);
      }
    }
  }
}

}  // namespace

void register_gemm_kernels(TraitsTable& table, Avx512Extensions ext) {
  // The unsigned-weight form needs vpdpbusd: without VNNI, vpmaddubsw's saturating int16 pair
  // sums could overflow on Q8_0's w + 128; matmul then uses vec_dot_rows.
  if (!ext.vnni) return;
  table[size_t(GgmlType::Q4_0)].gemm_tile = gemm_tile<Q4_0Gemm>;
  table[size_t(GgmlType::Q8_0)].gemm_tile = gemm_tile<Q8_0Gemm>;
}

}  // namespace vela::kernels::avx512

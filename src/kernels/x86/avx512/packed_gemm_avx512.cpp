// AVX-512 VNNI kernel for 16-row interleaved Q8_0 / Q4_0 weights (packed_gemm.h). One block of
// a 16-row group is eight vectors whose dword lane n holds four weights of row n, so vpdpbusd
// with one broadcast activation dword adds four products to each of the 16 rows' exact block
// sums; no horizontal reduction is needed. Each block's weights are decoded once for a tile of
// up to 16 activation rows.
#include <type_traits>
#include <vector>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/packed_act_avx512.h"

namespace vela::kernels {

namespace avx512 {
namespace {

struct Q8_0x16Format {
  using Packed = BlockQ8_0x16;
  static constexpr int kBias = kQ8_0PackedBias;
  static void load(const Packed& blk, __m512i w[8]) {
    for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(blk.qs[j]);
  }
};

struct Q4_0x16Format {
  using Packed = BlockQ4_0x16;
  static constexpr int kBias = kQ4_0PackedBias;
  static void load(const Packed& blk, __m512i w[8]) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(blk.qs[j]);
      w[j] = _mm512_and_si512(raw, low);
      w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
    }
  }
};

constexpr size_t kPrefetchBytes = 8192;  // best of 1-16 KiB measured on Q4_0 and Q8_0

// The hardware prefetcher falls behind once a block takes a few dozen cycles (measured: 8 rows
// on weights from DRAM ran 2.5x slower than from cache), so each packed block fetches the lines
// kPrefetchBytes ahead of it; the address runs on into the next group, which is contiguous.
template <class Packed>
inline void prefetch_ahead(const Packed* block) {
  const char* ahead = reinterpret_cast<const char*>(block) + kPrefetchBytes;
  for (size_t line = 0; line < sizeof(Packed); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
}

// Rows r < R of a token tile (slots first .. first + R - 1 of an activation tile, ActTiles)
// against one 16-row group of nb packed blocks at wg. Each block's weights are decoded once for
// the R rows; the 8 weight vectors and R <= 16 accumulators fit the 32 registers.
template <class F, int R>
void group_tile(const typename F::Packed* wg, int64_t nb, const ActTiles& tile, int64_t first,
                float* y, int64_t y_stride) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Packed& blk = wg[b];
    prefetch_ahead(&blk);
    __m512i w[8];
    F::load(blk, w);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.d)));
    const int64_t slot0 = b * kActTileRows + first;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const int64_t slot = slot0 + r;
      const int8_t* q = tile.quants + slot * kQK8_0;
      // The bias correction starts the integer sum.
      __m512i sum = _mm512_set1_epi32(tile.sum_start[slot]);
      if constexpr (R == 1) {
        // A lone row: two chains of four, so vpdpbusd latency does not bound it.
        __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
          sum = _mm512_dpbusd_epi32(sum, w[j], _mm512_set1_epi32(load_i32(q + 4 * j)));
          s1 = _mm512_dpbusd_epi32(s1, w[j + 1], _mm512_set1_epi32(load_i32(q + 4 * j + 4)));
        }
        sum = _mm512_add_epi32(sum, s1);
      } else {
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j)
          sum = _mm512_dpbusd_epi32(sum, w[j], _mm512_set1_epi32(load_i32(q + 4 * j)));
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(tile.scale[slot]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

template <class F>
void gemm(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedBlockK;
  const void* prepared = p.act_prepared;
  if (prepared == nullptr) {  // no copy from the activation conversion: make one for this call
    void* buf = thread_buffer<uint8_t>(act_tiles_bytes(p.n_act, nb));
    write_act_tiles(p.act, p.act_stride, p.n_act, nb, F::kBias, 0, p.n_act, buf);
    prepared = buf;
  }
  const ActTiles act = act_tiles_at(prepared, p.n_act, nb);
  const auto* w = static_cast<const typename F::Packed*>(p.w);
  // Groups outside, tokens inside: a group's blocks stay in cache across the token tiles. Whole
  // tiles of 16 rows, then 8, 4, 2, 1 for the rest of the last one.
  for (int64_t g = 0; g < p.n_groups; ++g) {
    const auto tile = [&](auto rows, int64_t t) {
      constexpr int R = decltype(rows)::value;
      const int64_t base = t / kActTileRows * nb * kActTileRows;
      const ActTiles at = {act.quants + base * kQK8_0, act.scale + base, act.sum_start + base};
      group_tile<F, R>(w + g * nb, nb, at, t % kActTileRows, p.y + t * p.y_stride + g * kPackedRows,
                       p.y_stride);
    };
    int64_t t = 0;
    for (; t + 16 <= p.n_act; t += 16) tile(std::integral_constant<int, 16>{}, t);
    for_row_tiles(p.n_act - t, [&](auto rows, int64_t r) { tile(rows, t + r); });
  }
}

// Q4_K: rows r < R (R <= 4: a super-block pair's 16 decoded vectors stay in registers) of the
// token tile against one group. Per super-block: each sub-block's exact dot for all 16 rows by
// vpdpbusd, scaled by the sub-block scales with vpmulld; the mins meet the activation block sums
// (int16 pairs) in vpdpwssd; then the reference's float operations.
template <int R>
void group_tile_q4_k(const BlockQ4_Kx16* wg, int64_t nb, const uint8_t* act, size_t act_stride,
                     const uint32_t* bsum_pairs, float* y, int64_t y_stride) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_Kx16& wb = wg[b];
    prefetch_ahead(wg + b);
    const BlockQ8_K* a[R];
    __m512i dots[R], mins[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      dots[r] = _mm512_setzero_si512();
      mins[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      __m512i lo[8], hi[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m512i raw = _mm512_loadu_si512(wb.qs[p][g]);
        lo[g] = _mm512_and_si512(raw, low);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
      }
      const __m512i sc_lo =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale[2 * p])));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale[2 * p + 1])));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int8_t* q = a[r]->qs + 64 * p;
        __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          d0 = _mm512_dpbusd_epi32(d0, lo[g], _mm512_set1_epi32(load_i32(q + 4 * g)));
          d1 = _mm512_dpbusd_epi32(d1, hi[g], _mm512_set1_epi32(load_i32(q + 32 + 4 * g)));
        }
        dots[r] = _mm512_add_epi32(dots[r], _mm512_add_epi32(_mm512_mullo_epi32(d0, sc_lo),
                                                             _mm512_mullo_epi32(d1, sc_hi)));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.d)));
    const __m512 dmw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.dmin)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i mp = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.min_pairs[k])));
      for (int r = 0; r < R; ++r)
        mins[r] = _mm512_dpwssd_epi32(mins[r], mp,
                                      _mm512_set1_epi32(int32_t(bsum_pairs[(r * nb + b) * 4 + k])));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 ad = _mm512_set1_ps(a[r]->d);
      const __m512 d = _mm512_mul_ps(dw, ad);
      const __m512 m = _mm512_mul_ps(_mm512_mul_ps(dmw, ad), _mm512_cvtepi32_ps(mins[r]));
      acc[r] = _mm512_add_ps(acc[r], _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(dots[r]), m));
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// Q6_K: rows r < R of the token tile against one group. Per sub-block: the 4 groups' levels
// (4 low bits | 2 high bits) decoded once for the tile, each row's exact dot by vpdpbusd starting
// from -32 * the activations' sub-block sum, times the sub-block scales with vpmulld.
template <int R>
void group_tile_q6_k(const BlockQ6_Kx16* wg, int64_t nb, const uint8_t* act, size_t act_stride,
                     float* y, int64_t y_stride) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), high2 = _mm512_set1_epi8(0x30);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_Kx16& wb = wg[b];
    prefetch_ahead(wg + b);
    const BlockQ8_K* a[R];
    __m512i sum[R];
    for (int r = 0; r < R; ++r) {
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
      sum[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int s = 0; s < 16; ++s) {
      const __m512i l01 = _mm512_loadu_si512(wb.ql[s][0]), l23 = _mm512_loadu_si512(wb.ql[s][1]);
      const __m512i h = _mm512_loadu_si512(wb.qh[s]);
      __m512i q[4];
      q[0] = _mm512_or_si512(_mm512_and_si512(l01, low4),
                             _mm512_and_si512(_mm512_slli_epi16(h, 4), high2));
      q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l01, 4), low4),
                             _mm512_and_si512(_mm512_slli_epi16(h, 2), high2));
      q[2] = _mm512_or_si512(_mm512_and_si512(l23, low4), _mm512_and_si512(h, high2));
      q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l23, 4), low4),
                             _mm512_and_si512(_mm512_srli_epi16(h, 2), high2));
      const __m512i sc =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale[s])));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* qa = a[r]->qs + 16 * s;
        // Two chains of two: a single row would otherwise wait on vpdpbusd latency.
        __m512i dot = _mm512_set1_epi32(-kQ6_KOffset * int32_t(a[r]->bsums[s]));
        __m512i dot2 =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[1], _mm512_set1_epi32(load_i32(qa + 4)));
        dot = _mm512_dpbusd_epi32(dot, q[0], _mm512_set1_epi32(load_i32(qa)));
        dot2 = _mm512_dpbusd_epi32(dot2, q[3], _mm512_set1_epi32(load_i32(qa + 12)));
        dot = _mm512_dpbusd_epi32(dot, q[2], _mm512_set1_epi32(load_i32(qa + 8)));
        sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(_mm512_add_epi32(dot, dot2), sc));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.d)));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a[r]->d)),
                               _mm512_cvtepi32_ps(sum[r]), acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

void gemm_q6_k(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedSuperK;
  const auto* w = static_cast<const BlockQ6_Kx16*>(p.w);
  for (int64_t g = 0; g < p.n_groups; ++g)
    for_row_tiles(p.n_act, [&](auto tile, int64_t t) {
      group_tile_q6_k<decltype(tile)::value>(w + g * nb, nb, p.act + size_t(t) * p.act_stride,
                                             p.act_stride, p.y + t * p.y_stride + g * kPackedRows,
                                             p.y_stride);
    });
}

// Per activation row and super-block, the sums of sub-blocks 2k and 2k + 1 as an int16 pair.
const uint32_t* prepare_bsum_pairs(const uint8_t* act, size_t act_stride, int64_t n_act,
                                   int64_t nb) {
  thread_local std::vector<uint32_t> pairs;
  if (pairs.size() < size_t(n_act * nb * 4)) pairs.resize(size_t(n_act * nb * 4));
  for (int64_t t = 0; t < n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + size_t(t) * act_stride);
    for (int64_t b = 0; b < nb; ++b)
      for (int k = 0; k < 4; ++k) {
        const int16_t* s = a[b].bsums + 4 * k;
        const auto lo = uint16_t(int16_t(s[0] + s[1])), hi = uint16_t(int16_t(s[2] + s[3]));
        pairs[size_t((t * nb + b) * 4 + k)] = uint32_t(lo) | (uint32_t(hi) << 16);
      }
  }
  return pairs.data();
}

void gemm_q4_k(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedSuperK;
  const uint32_t* pairs = prepare_bsum_pairs(p.act, p.act_stride, p.n_act, nb);
  const auto* w = static_cast<const BlockQ4_Kx16*>(p.w);
  for (int64_t g = 0; g < p.n_groups; ++g) {
    const auto run = [&](auto tile, int64_t t) {
      group_tile_q4_k<decltype(tile)::value>(w + g * nb, nb, p.act + size_t(t) * p.act_stride,
                                             p.act_stride, pairs + t * nb * 4,
                                             p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
    };
    int64_t t = 0;
    for (; t + 4 <= p.n_act; t += 4) run(std::integral_constant<int, 4>{}, t);
    if (t + 2 <= p.n_act) run(std::integral_constant<int, 2>{}, t), t += 2;
    if (t < p.n_act) run(std::integral_constant<int, 1>{}, t);
  }
}

}  // namespace
}  // namespace avx512

namespace {

size_t act_tiles_bytes_for_cols(int64_t n_act, int64_t n_cols) {
  return avx512::act_tiles_bytes(n_act, n_cols / kPackedBlockK);
}

template <class F>
void write_act_tiles_for(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t n_cols,
                         int64_t t_begin, int64_t t_end, void* out) {
  avx512::write_act_tiles(act, act_stride, n_act, n_cols / kPackedBlockK, F::kBias, t_begin, t_end,
                          out);
}

}  // namespace

PackedActPrep packed_act_prep_avx512_vnni(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0:
      return {act_tiles_bytes_for_cols, write_act_tiles_for<avx512::Q8_0x16Format>};
    case GgmlType::Q4_0:
      return {act_tiles_bytes_for_cols, write_act_tiles_for<avx512::Q4_0x16Format>};
    default:
      return {};
  }
}

PackedGemmFn packed_gemm_avx512_vnni(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0:
      return avx512::gemm<avx512::Q8_0x16Format>;
    case GgmlType::Q4_0:
      return avx512::gemm<avx512::Q4_0x16Format>;
    case GgmlType::Q4_K:
      return avx512::gemm_q4_k;
    case GgmlType::Q6_K:
      return avx512::gemm_q6_k;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

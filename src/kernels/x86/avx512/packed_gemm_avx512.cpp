// AVX-512 VNNI kernel for 16-row interleaved Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL and MXFP4
// weights (packed_gemm.h); the K types' are in packed_gemm_k_avx512.cpp. One block of a 16-row
// group is eight vectors whose dword lane n holds four weights of row n, so vpdpbusd with one
// broadcast activation dword adds four products to each of the 16 rows' exact block sums; no
// horizontal reduction is needed. Each block's weights are decoded once for a tile of up to 16
// activation rows.
#include <type_traits>
#include <vector>

#include "kernels/packed/nibble_format.h"
#include "kernels/packed/packed_act.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/packed_act_avx512.h"
#include "kernels/x86/avx512/packed_gemm_avx512.h"

namespace vela::kernels {

namespace avx512 {
namespace {

struct Q8_0x16Format {
  using Packed = BlockQ8_0x16;
  static constexpr bool kAffine = false;
  static constexpr int kBias = kQ8_0PackedBias;
  using Act = BlockQ8_0;
  static void load(const Packed& blk, __m512i w[8]) {
    for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(blk.qs[j]);
  }
};

// The formats on Q4_0's nibble layout (nibble_format.h), decoded into the eight VNNI vectors.
template <class P>
struct NibbleFormat : NibbleTraits<P> {
  using typename NibbleTraits<P>::Packed;
  using NibbleTraits<P>::kHighBit;
  using NibbleTraits<P>::kCodebook;
  static void load(const Packed& blk, __m512i w[8]) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(blk.qs[j]);
      w[j] = _mm512_and_si512(raw, low);
      w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
    }
    if constexpr (kCodebook) {
      // Each nibble's level + bias from the 16-byte table in every 128-bit lane.
      const __m512i table = _mm512_broadcast_i32x4(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(NibbleTraits<P>::kBiasedLevels.data())));
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) w[v] = _mm512_shuffle_epi8(table, w[v]);
    }
    if constexpr (kHighBit) {
      // Vector v's 5th bits are bit v of each plane byte: shifted to bit 4 (bits that cross into
      // the neighbouring byte of a 16-bit lane land outside bit 4) and or-ed in under the mask.
      const __m512i plane = _mm512_loadu_si512(blk.qh), bit4 = _mm512_set1_epi8(0x10);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        const __m512i at4 =
            v <= 4 ? _mm512_slli_epi16(plane, 4 - v) : _mm512_srli_epi16(plane, v - 4);
        w[v] = _mm512_ternarylogic_epi32(w[v], at4, bit4, 0xF8);  // w | (at4 & bit4)
      }
    }
  }
};
using Q4_0x16Format = NibbleFormat<BlockQ4_0x16>;
using Q5_0x16Format = NibbleFormat<BlockQ5_0x16>;
using Q4_1x16Format = NibbleFormat<BlockQ4_1x16>;
using Q5_1x16Format = NibbleFormat<BlockQ5_1x16>;
using IQ4_NLx16Format = NibbleFormat<BlockIQ4_NLx16>;
using MXFP4x16Format = NibbleFormat<BlockMXFP4x16>;

// One block's 16 rows (decoded by F::load into w; its d and, for the affine formats, m as f32)
// against activation slot `slot`, added to acc: the exact integer sum, in
// kChains chains of vpdpbusd, then the reference's float operations. A lone row splits its
// eight products over two chains, so that vpdpbusd latency does not bound it.
template <class F, int kChains>
inline __m512 block_row(const __m512i w[8], __m512 dw, __m512 mw, const ActTiles& tile,
                        int64_t slot, __m512 acc) {
  const int8_t* q = tile.quants + slot * kQK8_0;
  // The bias correction starts the integer sum; the affine formats have no bias.
  __m512i sum = F::kAffine ? _mm512_setzero_si512() : _mm512_set1_epi32(tile.sum_start[slot]);
  if constexpr (kChains == 2) {
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
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, acc);
  if constexpr (F::kAffine) acc = _mm512_fmadd_ps(mw, _mm512_set1_ps(tile.offset_sum[slot]), acc);
  return acc;
}

// 2^(e - 128) for 16 e8m0 bytes, as e8m0_half_scale: the exponent field e - 1 from e = 2 on,
// below it the subnormals 2^-128 and 2^-127 (bits 21 and 22).
inline __m512 e8m0_half_scales(const uint8_t* e_bytes) {
  const __m512i e =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e_bytes)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmple_epu32_mask(e, _mm512_set1_epi32(1));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
}

// A block's scales as f32: d (MXFP4: from its e8m0 bytes), and m for the affine formats (zero
// otherwise).
template <class F>
inline void block_scales(const typename F::Packed& blk, __m512& dw, __m512& mw) {
  if constexpr (requires { blk.e; })
    dw = e8m0_half_scales(blk.e);
  else
    dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.d)));
  mw = _mm512_setzero_ps();
  if constexpr (F::kAffine)
    mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.m)));
}

// Rows r < R (2 <= R <= 16) of a token tile (slots first .. first + R - 1 of an activation tile,
// ActTiles) against one 16-row group of nb packed blocks at wg. Each block's weights are decoded
// once for the R rows; the 8 weight vectors and R accumulators fit the 32 registers.
template <class F, int R>
void group_tile(const typename F::Packed* wg, int64_t nb, const ActTiles& tile, int64_t first,
                float* y, int64_t y_stride, bool streams) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Packed& blk = wg[b];
    prefetch_ahead(&blk, streams);
    __m512i w[8];
    F::load(blk, w);
    __m512 dw, mw;
    block_scales<F>(blk, dw, mw);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      acc[r] = block_row<F, 1>(w, dw, mw, tile, b * kActTileRows + first + r, acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// One activation row (slot `first` of each block's tile) against S groups, group i's nb blocks
// at wg + i * apart (in blocks) and its 16 outputs at y + i * y_apart, walked in lockstep: S weight
// streams in flight at once (for_lone_group_pairs).
template <class F, int S>
void lone_row_groups(const typename F::Packed* wg, int64_t apart, int64_t nb, const ActTiles& tile,
                     int64_t first, float* y, int64_t y_apart, bool streams) {
  __m512 acc[S];
  for (int i = 0; i < S; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 2
    for (int i = 0; i < S; ++i) {
      const typename F::Packed& blk = wg[i * apart + b];
      prefetch_ahead(&blk, streams);
      __m512i w[8];
      F::load(blk, w);
      __m512 dw, mw;
      block_scales<F>(blk, dw, mw);
      acc[i] = block_row<F, 2>(w, dw, mw, tile, b * kActTileRows + first, acc[i]);
    }
  }
  for (int i = 0; i < S; ++i) _mm512_storeu_ps(y + i * y_apart, acc[i]);
}

size_t act_tiles_bytes_for_cols(int64_t n_act, int64_t n_cols) {
  return act_tiles_bytes(n_act, n_cols / kPackedBlockK);
}

template <class F>
void write_act_tiles_for(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t n_cols,
                         int64_t t_begin, int64_t t_end, void* out) {
  write_act_tiles<typename F::Act>(act, act_stride, n_act, n_cols / kPackedBlockK, F::kBias,
                                   t_begin, t_end, out);
}

// The activation tiles format F's kernel reads.
template <class F>
PackedActPrep act_tiles_prep() {
  return {act_tiles_bytes_for_cols, write_act_tiles_for<F>};
}

template <class F>
void gemm(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedBlockK;
  const ActTiles act = act_tiles_at(packed_act_view(act_tiles_prep<F>(), p), p.n_act, nb);
  const auto* w = static_cast<const typename F::Packed*>(p.w);
  if (p.n_act == 1) {
    for_lone_group_pairs(p.n_groups, [&](auto streams, int64_t g, int64_t apart) {
      lone_row_groups<F, decltype(streams)::value>(
          w + g * nb, apart * nb, nb, act, 0, p.y + g * kPackedRows, apart * kPackedRows, true);
    });
    return;
  }
  // Groups outside, tokens inside: a group's blocks stay in cache across the token tiles.
  for (int64_t g = 0; g < p.n_groups; ++g)
    for_token_tiles(p.n_act, [&](auto rows, int64_t t) {
      constexpr int R = decltype(rows)::value;
      const int64_t base = t / kActTileRows * nb * kActTileRows;
      const ActTiles tile = act.from_slot(base);
      const int64_t first = t % kActTileRows;
      float* const y = p.y + t * p.y_stride + g * kPackedRows;
      if constexpr (R == 1) {
        lone_row_groups<F, 1>(w + g * nb, 0, nb, tile, first, y, 0, t == 0);
      } else {
        group_tile<F, R>(w + g * nb, nb, tile, first, y, p.y_stride, t == 0);
      }
    });
}

}  // namespace
}  // namespace avx512

PackedActPrep packed_act_prep_avx512_vnni(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0:
      return avx512::act_tiles_prep<avx512::Q8_0x16Format>();
    case GgmlType::Q4_0:
      return avx512::act_tiles_prep<avx512::Q4_0x16Format>();
    case GgmlType::Q5_0:
      return avx512::act_tiles_prep<avx512::Q5_0x16Format>();
    case GgmlType::Q4_1:
      return avx512::act_tiles_prep<avx512::Q4_1x16Format>();
    case GgmlType::Q5_1:
      return avx512::act_tiles_prep<avx512::Q5_1x16Format>();
    case GgmlType::IQ4_NL:
      return avx512::act_tiles_prep<avx512::IQ4_NLx16Format>();
    case GgmlType::MXFP4:
      return avx512::act_tiles_prep<avx512::MXFP4x16Format>();
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
    case GgmlType::Q5_0:
      return avx512::gemm<avx512::Q5_0x16Format>;
    case GgmlType::Q4_1:
      return avx512::gemm<avx512::Q4_1x16Format>;
    case GgmlType::Q5_1:
      return avx512::gemm<avx512::Q5_1x16Format>;
    case GgmlType::IQ4_NL:
      return avx512::gemm<avx512::IQ4_NLx16Format>;
    case GgmlType::MXFP4:
      return avx512::gemm<avx512::MXFP4x16Format>;
    default:
      return packed_gemm_k_avx512_vnni(w_type);
  }
}

}  // namespace vela::kernels

// AMX kernel for 16-row interleaved Q8_0 / Q4_0 weights (packed_gemm.h): a packed block is one
// B tile (8 rows of 16 weight rows x 4 bytes), 16 activation rows x 32 quants one A tile, and
// tdpbsud gives the 16 x 16 exact block sums. The weights' bias is cancelled in the same
// accumulator by a second product with a constant tile of -bias, so each C tile holds the true
// integer dots; the float scaling follows the reference chain (one fma per block, in order).
// Two C tiles alternate so the tile unit computes block b + 1 while the vector unit scales b.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/packed_act_avx512.h"

namespace vela::kernels {

namespace amx {
namespace {

using avx512::prepare_act_scales;

constexpr int kTileM = 16;  // activation rows per tile

// Tile numbers: A (activations) and B (weights) in two slots, the constant -bias tile, C twice.
enum : int { kA0 = 0, kA1 = 1, kB0 = 2, kB1 = 3, kBias = 4, kC0 = 5, kC1 = 6 };

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg operand");

void configure_tiles() {
  TileConfig c;
  for (int a : {kA0, kA1}) c.rows[a] = kTileM, c.colsb[a] = kPackedBlockK;
  for (int b : {kB0, kB1, kBias}) c.rows[b] = kPackedBlockK / 4, c.colsb[b] = 64;
  for (int t : {kC0, kC1}) c.rows[t] = kTileM, c.colsb[t] = 64;
  _tile_loadconfig(&c);
}

struct Q8_0x16Format {
  using Packed = BlockQ8_0x16;
  static constexpr int kBias = kQ8_0PackedBias;
  // The B tile of block b: straight from the packed weights.
  static const uint8_t* b_tile(const Packed* wg, int64_t b, const uint8_t*) {
    return &wg[b].qs[0][0][0];
  }
  static bool needs_unpack() { return false; }
  static void unpack(const Packed*, int64_t, uint8_t*) {}
};

struct Q4_0x16Format {
  using Packed = BlockQ4_0x16;
  static constexpr int kBias = kQ4_0PackedBias;
  static const uint8_t* b_tile(const Packed*, int64_t b, const uint8_t* unpacked) {
    return unpacked + b * 512;
  }
  static bool needs_unpack() { return true; }
  // The group's nibbles as bytes, [nb][8][64], once per group for all token tiles.
  static void unpack(const Packed* wg, int64_t nb, uint8_t* out) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      for (int j = 0; j < 4; ++j) {
        const __m512i raw = _mm512_loadu_si512(wg[b].qs[j]);
        _mm512_store_si512(out + b * 512 + j * 64, _mm512_and_si512(raw, low));
        _mm512_store_si512(out + b * 512 + (j + 4) * 64,
                           _mm512_and_si512(_mm512_srli_epi16(raw, 4), low));
      }
    }
  }
};

// One token tile (kTileM activation rows from `act`, m of them real) against one weight group.
template <class F>
struct TileRun {
  const typename F::Packed* wg;
  uint8_t* unpacked;
  int64_t nb;
  const uint8_t* act;  // the tile's first activation row
  size_t act_stride;
  const float* scale;  // [kTileM][nb] for the tile
  int m;
  __m512 acc[kTileM];
  alignas(64) int32_t c[kTileM][16];

  // GCC's tile intrinsics take the tile number as a literal, hence the macros.
#define VELA_AMX_ISSUE(tile_a, tile_b, tile_c, b)                                      \
  do {                                                                                 \
    _tile_loadd(tile_a, act + size_t(b) * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs), \
                act_stride);                                                           \
    _tile_loadd(tile_b, F::b_tile(wg, b, unpacked), 64);                               \
    _tile_zero(tile_c);                                                                \
    _tile_dpbsud(tile_c, tile_a, tile_b);                                              \
    _tile_dpbssd(tile_c, tile_a, 4 /* kBias */);                                       \
  } while (0)
  void issue0(int64_t b) {
    VELA_AMX_ISSUE(0, 2, 5, b);
  }
  void issue1(int64_t b) {
    VELA_AMX_ISSUE(1, 3, 6, b);
  }
#undef VELA_AMX_ISSUE

  void drain0(int64_t b) {
    _tile_stored(5, c, 64);
    scale_block(b);
  }
  void drain1(int64_t b) {
    _tile_stored(6, c, 64);
    scale_block(b);
  }

  // acc[t] = fma(float(C[t]), d_w * d_a[t], acc[t]) for the block just stored in c.
  void scale_block(int64_t b) {
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg[b].d)));
#pragma GCC unroll 16
    for (int t = 0; t < kTileM; ++t) {
      if (t >= m) break;
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(scale[t * nb + b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[t])), s, acc[t]);
    }
  }

  void run(float* y, int64_t y_stride) {
    for (int t = 0; t < kTileM; ++t) acc[t] = _mm512_setzero_ps();
    issue0(0);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      issue1(b + 1);
      drain0(b);
      if (b + 2 < nb) issue0(b + 2);
      drain1(b + 1);
    }
    if (b < nb) drain0(b);
    for (int t = 0; t < m; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }
};

template <class F>
void gemm(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedBlockK;
  const float* act_scale = prepare_act_scales(p.act, p.act_stride, p.n_act, nb);
  // The last partial token tile reads its rows from a zero-padded copy, so every tile is 16 rows.
  const int64_t n_full = p.n_act / kTileM * kTileM;
  const int tail = int(p.n_act - n_full);
  // Element types local to this function: the vectors' member functions then have no linkage,
  // so the linker cannot hand code on CPUs without AVX-512 this file's copies of
  // std::vector<uint8_t> / <float> functions (compiled with AVX-512 enabled).
  struct PadByte {
    uint8_t v;
  };
  struct PadScale {
    float v;
  };
  thread_local std::vector<PadByte> padded_bytes;
  thread_local std::vector<PadScale> padded_scales;
  if (tail > 0) {
    padded_bytes.assign(kTileM * p.act_stride, PadByte{0});
    std::memcpy(padded_bytes.data(), p.act + size_t(n_full) * p.act_stride,
                size_t(tail) * p.act_stride);
    padded_scales.assign(size_t(kTileM * nb), PadScale{0.0f});
    std::memcpy(padded_scales.data(), act_scale + n_full * nb, size_t(tail * nb) * sizeof(float));
  }
  const auto* padded = reinterpret_cast<const uint8_t*>(padded_bytes.data());
  const auto* padded_scale = reinterpret_cast<const float*>(padded_scales.data());
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> unpacked;  // 64-byte aligned (over-aligned new)
  if (F::needs_unpack() && unpacked.size() < size_t(nb * 8)) unpacked.resize(size_t(nb * 8));
  auto* unpacked_bytes = reinterpret_cast<uint8_t*>(unpacked.data());

  alignas(64) static const struct BiasTile {
    int8_t bytes[8][64];
    BiasTile() { std::memset(bytes, -F::kBias, sizeof(bytes)); }
  } bias_tile;

  configure_tiles();
  _tile_loadd(4 /* kBias */, bias_tile.bytes, 64);
  const auto* w = static_cast<const typename F::Packed*>(p.w);
  TileRun<F> run;
  run.nb = nb;
  for (int64_t g = 0; g < p.n_groups; ++g) {
    run.wg = w + g * nb;
    if (F::needs_unpack()) F::unpack(run.wg, nb, unpacked_bytes);
    run.unpacked = unpacked_bytes;
    for (int64_t t = 0; t < p.n_act; t += kTileM) {
      const bool is_tail = t >= n_full;
      run.act = is_tail ? padded : p.act + size_t(t) * p.act_stride;
      run.act_stride = p.act_stride;
      run.scale = is_tail ? padded_scale : act_scale + t * nb;
      run.m = is_tail ? tail : kTileM;
      run.run(p.y + t * p.y_stride + g * kPackedRows, p.y_stride);
    }
  }
  _tile_release();
}

}  // namespace
}  // namespace amx

PackedGemmFn packed_gemm_amx(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0:
      return amx::gemm<amx::Q8_0x16Format>;
    case GgmlType::Q4_0:
      return amx::gemm<amx::Q4_0x16Format>;
    default:
      return nullptr;
  }
}

}  // namespace vela::kernels

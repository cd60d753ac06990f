#pragma once
// Internal to the AVX-512 VNNI packed kernels (packed_gemm.h): the K-type kernels' entry points
// and what both kernel files share. Include only from files compiled with the AVX-512 flags.
#include <cstdint>
#include <type_traits>

#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/tile_dispatch.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/prefetch_slices.h"

namespace vela::kernels {

// Q4_K - Q6_K, IQ4_XS, Q3_K, Q2_K (packed_gemm_k_avx512.cpp); nullptr for other types.
PackedGemmFn packed_gemm_k_avx512_vnni(GgmlType w_type);

namespace avx512 {

// The hardware prefetcher falls behind once a block takes a few dozen cycles (measured: 8 rows
// on weights from DRAM ran 2.5x slower than from cache), so the first token tile of a group
// (`streams`), which brings its blocks from memory, fetches the lines kPrefetchBytes (8 KiB: best
// of 1-16 KiB on Q4_0 and Q8_0) ahead of each block; the address runs on into the next group,
// which is contiguous. The token tiles after it find the group in cache and skip the hints
// (Q4_K and Q6_K against 512 tokens: 7-13% faster without them).
template <class Packed>
[[gnu::always_inline]] inline void prefetch_ahead(const Packed* block, bool streams) {
  if (streams) prefetch_weights<sizeof(Packed)>(block);
}

// prefetch_ahead in slices (prefetch_slices.h), slice `part` of kParts as the K-type tiles'
// sub-blocks (or pairs) start, rather than all of a block's lines at its start: `vela bench matmul
// -t 2 --rows 16384 --tokens 1` from DRAM (Zen 4, three alternations) took Q4_K 0.51-0.85 ->
// 0.40-0.55 ms, Q5_K 1.30-1.35 -> 0.45-0.87, Q6_K 1.03-1.12 -> 0.83, Q3_K 0.85 -> 0.28-0.41, IQ4_XS
// 0.52-0.55 -> 0.33-0.50.
template <int kParts, class Packed>
[[gnu::always_inline]] inline void prefetch_ahead_part(const Packed* block, int part,
                                                       bool streams) {
  if (streams) prefetch_slice<kPrefetchBytes, Packed, kParts>(block, part);
}

// Token tiles as the activation tiles lay them out: whole tiles of kActTileRows (16) rows, then
// one tile of the rest, so that each block's weights are decoded once per 16 tokens (a 5-token
// speculative verification is one tile, not 4 + 1). tile(std::integral_constant<int, R>,
// first_row).
template <class Tile>
inline void for_token_tiles(int64_t n_act, Tile&& tile) {
  int64_t t = 0;
  for (; t + 16 <= n_act; t += 16) tile(std::integral_constant<int, 16>{}, t);
  if (t < n_act) with_tile_count<15>(int(n_act - t), [&](auto rows) { tile(rows, t); });
}

}  // namespace avx512
}  // namespace vela::kernels

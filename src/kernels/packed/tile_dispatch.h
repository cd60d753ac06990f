#pragma once
// Internal to the packed kernels (x86/*/packed_gemm_*.cpp): run-time tile sizes turned into
// compile-time ones, the loop that covers n_groups x n_act outputs with tiles of at most G
// groups x T tokens, and a lone token's walk over the groups. The tile functions are the callers'
// (one per instruction set); this header holds no instruction-set code.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace vela::kernels {

// fn(std::integral_constant<int, R>{}) for the run-time count r, 1 <= r <= N.
template <int N, class Fn, int... R>
inline void with_tile_count(int r, Fn&& fn, std::integer_sequence<int, R...>) {
  ((r == R + 1 ? (fn(std::integral_constant<int, R + 1>{}), 0) : 0), ...);
}
template <int N, class Fn>
inline void with_tile_count(int r, Fn&& fn) {
  with_tile_count<N>(r, fn, std::make_integer_sequence<int, N>{});
}

// tile(groups, tokens, g, t) with groups <= G and tokens <= T as integral constants, over groups
// [0, n_groups) and tokens [0, n_act): groups outside, tokens inside, so a tile's weight rows stay
// in cache across the token tiles.
template <int G, int T, class Tile>
inline void for_float_tiles(int64_t n_groups, int64_t n_act, Tile&& tile) {
  for (int64_t g = 0; g < n_groups; g += G) {
    const int groups = int(std::min<int64_t>(G, n_groups - g));
    with_tile_count<G>(
        groups,
        [&](auto n_g) {
          for (int64_t t = 0; t < n_act; t += T) {
            const int tokens = int(std::min<int64_t>(T, n_act - t));
            with_tile_count<T>(
                tokens, [&](auto n_t) { tile(n_g, n_t, g, t); },
                std::make_integer_sequence<int, T>{});
          }
        },
        std::make_integer_sequence<int, G>{});
  }
}

// A lone token's groups [0, n_groups) walked in lockstep pairs, so that two weight streams are in
// flight at once: group g with g + n_groups / 2 (the halves of a thread's chunk), then the last
// group of an odd count alone. walk(std::integral_constant<int, S>, g, apart): S groups from g,
// `apart` groups from one to the next. Measured on the Xeon with the AVX-512 kernels (bench
// matmul --tokens 1 -t 2): two streams half a chunk apart read 1.07-1.19x faster than adjacent
// groups or one stream.
template <class Walk>
inline void for_lone_group_pairs(int64_t n_groups, Walk&& walk) {
  const int64_t half = n_groups / 2;
  for (int64_t g = 0; g < half; ++g) walk(std::integral_constant<int, 2>{}, g, half);
  if (n_groups % 2 != 0) walk(std::integral_constant<int, 1>{}, n_groups - 1, int64_t(0));
}

}  // namespace vela::kernels

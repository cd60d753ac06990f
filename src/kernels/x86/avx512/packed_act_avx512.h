#pragma once
// Internal to the packed int8 kernels (AVX-512 VNNI and AMX): per-call views of the Q8_0
// and Q8_1 activation rows that every weight group reuses, in per-thread buffers that only grow.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/x86/avx512/avx512_util.h"
#include "quant/blocks.h"

namespace vela::kernels::avx512 {

// Sum of a Q8_0 block's 32 quants: sum(q) = sum(q + 128) - 32 * 128, the biased bytes summed
// by vpsadbw.
inline int32_t quant_sum(const int8_t* qs) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m256i s =
      _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8(char(0x80))), _mm256_setzero_si256());
  const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return int32_t(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 32 * 128);
}

// The AMX kernel's view: each block's scale as f32, [n_act][nb] (the kernel cancels the
// weights' bias with a tile product, so it needs no sums).
inline const float* prepare_act_scales(const uint8_t* act, size_t act_stride, int64_t n_act,
                                       int64_t nb) {
  // A function-local element type: the vector's member functions then have no linkage, so the
  // linker cannot hand code on CPUs without AVX-512 this header's copies of std::vector<float>'s
  // (compiled with AVX-512 enabled) in place of the ordinary ones.
  struct Scale {
    float v;
  };
  thread_local std::vector<Scale> scale;
  if (scale.size() < size_t(n_act * nb)) scale.resize(size_t(n_act * nb));
  for (int64_t t = 0; t < n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + size_t(t) * act_stride);
    for (int64_t b = 0; b < nb; ++b) scale[size_t(t * nb + b)].v = half_to_float(a[b].d);
  }
  return &scale.data()->v;
}

// The VNNI kernel's view of the activations: tokens in tiles of kActTileRows and, within a tile,
// block-major, so that a tile's operands form one sequential stream and each of its rows sits at
// a fixed offset from one pointer per array (16 row pointers would not fit the general registers:
// spilling them cost 13-17% at 16 tokens). Slot of (token t, block b):
// ((t / kActTileRows) * nb + b) * kActTileRows + t % kActTileRows.
constexpr int64_t kActTileRows = 16;

struct ActTiles {
  const int8_t* quants = nullptr;  // [slot][32] the block's quants
  const float* scale = nullptr;    // [slot] d_a as f32
  // [slot] one 4-byte term per block, seen through either pointer: against Q8_0 activations
  // sum_start = -bias * sum of the block's quants (it starts the integer sum); against Q8_1
  // activations offset_sum = s_a, which meets the weights' offsets m.
  const int32_t* sum_start = nullptr;
  const float* offset_sum = nullptr;

  // The tile view starting at slot `first`.
  ActTiles from_slot(int64_t first) const {
    return {quants + first * kQK8_0, scale + first, sum_start + first, offset_sum + first};
  }
};

// Slots of n_act rows of nb blocks: whole tiles, the last one padded.
inline int64_t act_tile_slots(int64_t n_act, int64_t nb) {
  return (n_act + kActTileRows - 1) / kActTileRows * kActTileRows * nb;
}

// Bytes of the three arrays, one after the other.
inline size_t act_tiles_bytes(int64_t n_act, int64_t nb) {
  return size_t(act_tile_slots(n_act, nb)) * (size_t(kQK8_0) + sizeof(float) + sizeof(int32_t));
}

inline ActTiles act_tiles_at(const void* base, int64_t n_act, int64_t nb) {
  const size_t slots = size_t(act_tile_slots(n_act, nb));
  const auto* bytes = static_cast<const uint8_t*>(base);
  const auto* scale = reinterpret_cast<const float*>(bytes + slots * size_t(kQK8_0));
  return {reinterpret_cast<const int8_t*>(bytes), scale,
          reinterpret_cast<const int32_t*>(scale + slots), scale + slots};
}

// Writes rows [t_begin, t_end) of the Act rows (BlockQ8_0 or BlockQ8_1) at act (n_act of them)
// into the tiles at base (act_tiles_bytes(n_act, nb) bytes); `bias` is the weights' (Q8_0
// activations only). Rows own disjoint slots, so ranges may be written concurrently.
template <class Act>
inline void write_act_tiles(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb,
                            int bias, int64_t t_begin, int64_t t_end, void* base) {
  static_assert(std::is_same_v<Act, BlockQ8_0> || std::is_same_v<Act, BlockQ8_1>);
  const ActTiles tiles = act_tiles_at(base, n_act, nb);
  auto* quants = const_cast<int8_t*>(tiles.quants);
  auto* scale = const_cast<float*>(tiles.scale);
  for (int64_t t = t_begin; t < t_end; ++t) {
    const auto* a = reinterpret_cast<const Act*>(act + size_t(t) * act_stride);
    const int64_t first_slot = (t / kActTileRows) * nb * kActTileRows + t % kActTileRows;
    for (int64_t b = 0; b < nb; ++b) {
      const size_t slot = size_t(first_slot + b * kActTileRows);
      scale[slot] = half_to_float(a[b].d);
      if constexpr (std::is_same_v<Act, BlockQ8_1>)
        const_cast<float*>(tiles.offset_sum)[slot] = half_to_float(a[b].s);
      else
        const_cast<int32_t*>(tiles.sum_start)[slot] = -quant_sum(a[b].qs) * bias;
      std::memcpy(&quants[slot * size_t(kQK8_0)], a[b].qs, size_t(kQK8_0));
    }
  }
}

}  // namespace vela::kernels::avx512

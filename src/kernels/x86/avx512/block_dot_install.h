#pragma once
// Internal to the AVX-512 block-type kernels (dot_q32_avx512.cpp, dot_k_avx512.cpp): vec_dot and
// vec_dot_rows of a TypeTraits entry built from one register-tiled kernel, so that both forms
// run the same code per activation row (batch invariance). Include only from files compiled with
// the AVX-512 flags.
#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"
#include "kernels/x86/avx512/avx512_util.h"

namespace vela::kernels::avx512 {

// Tile::run<F, kVnni, R>(nb, blocks, act, act_stride, out, out_stride): out[r * out_stride] =
// dot(blocks, activation row r) for R rows; kBlockK elements per weight block of F.
template <class Tile, class F, bool kVnni, int64_t kBlockK>
float tiled_vec_dot(int64_t n, const void* w, const void* a) {
  float out;
  Tile::template run<F, kVnni, 1>(n / kBlockK, static_cast<const typename F::Block*>(w),
                                  static_cast<const uint8_t*>(a), 0, &out, 0);
  return out;
}

template <class Tile, class F, bool kVnni, int64_t kBlockK>
void tiled_vec_dot_rows(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                        int64_t n_act, float* out, int64_t out_stride) {
  const auto* blocks = static_cast<const typename F::Block*>(w);
  for_row_tiles(n_act, [&](auto tile, int64_t r) {
    Tile::template run<F, kVnni, decltype(tile)::value>(n / kBlockK, blocks,
                                                        act + size_t(r) * act_stride, act_stride,
                                                        out + r * out_stride, out_stride);
  });
}

// Sets `type`'s vec_dot and vec_dot_rows to the VNNI or the plain AVX-512 instantiation.
template <class Tile, class F, int64_t kBlockK>
void install_tiled(TraitsTable& table, GgmlType type, bool vnni) {
  TypeTraits& t = table[static_cast<size_t>(type)];
  t.vec_dot = vnni ? tiled_vec_dot<Tile, F, true, kBlockK> : tiled_vec_dot<Tile, F, false, kBlockK>;
  t.vec_dot_rows = vnni ? tiled_vec_dot_rows<Tile, F, true, kBlockK>
                        : tiled_vec_dot_rows<Tile, F, false, kBlockK>;
}

}  // namespace vela::kernels::avx512

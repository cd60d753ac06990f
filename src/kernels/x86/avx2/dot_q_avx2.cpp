// AVX2 dot products of the 32-element block types (Q4_0, Q5_0, Q8_0 against Q8_0; Q4_1, Q5_1
// against Q8_1). Per block, the weights are decoded once into one register of 32 bytes and dotted
// with every activation row of the tile: the integer block sum is exact (maddubs + madd), and
// its 8 int32 lanes are scaled by d_w * d_a into the row's 8-lane float accumulator with FMA.
// Each row has two accumulators, for even and odd blocks, so that the single-row dot is not
// bound by one chain of dependent FMAs.
#include <cmath>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/kernels_avx2.h"
#include "quant/blocks.h"

namespace vela::kernels::avx2 {

namespace {

// Decoders: weights of block b as 32 signed bytes (symmetric types) or unsigned levels (affine).
struct DecodeQ4_0 {
  using Block = BlockQ4_0;
  static __m256i decode(const Block& b) {
    return _mm256_sub_epi8(unpack_nibbles_32(b.qs), _mm256_set1_epi8(8));
  }
};

struct DecodeQ5_0 {
  using Block = BlockQ5_0;
  static __m256i decode(const Block& b) {
    // q - 16 = low | 0xF0 (i.e. low - 16 as int8) where the 5th bit is clear, low where set.
    const __m256i high = bits_to_byte_mask(load_u32(b.qh));
    return _mm256_or_si256(unpack_nibbles_32(b.qs),
                           _mm256_andnot_si256(high, _mm256_set1_epi8(int8_t(0xF0))));
  }
};

struct DecodeQ8_0 {
  using Block = BlockQ8_0;
  static __m256i decode(const Block& b) { return loadu256(b.qs); }
};

struct DecodeQ4_1 {
  using Block = BlockQ4_1;
  static __m256i decode(const Block& b) { return unpack_nibbles_32(b.qs); }
};

struct DecodeQ5_1 {
  using Block = BlockQ5_1;
  static __m256i decode(const Block& b) {
    const __m256i high = bits_to_byte_mask(load_u32(b.qh));
    return _mm256_or_si256(unpack_nibbles_32(b.qs), _mm256_and_si256(high, _mm256_set1_epi8(0x10)));
  }
};

// Symmetric weights against Q8_0: sum_b d_w d_a sum_j q_j p_j.
template <class Decode>
struct SymmetricDot {
  using Block = typename Decode::Block;

  // Adds block b of every row to that row's accumulator `slot`.
  template <int k, int slot>
  static void block(const Block& wb, const BlockQ8_0* const* a, int64_t b, __m256 (*acc)[2]) {
    const __m256i q = Decode::decode(wb);
    const __m256i q_abs = _mm256_abs_epi8(q);
    const float dw = half_to_float(wb.d);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      const BlockQ8_0& ab = a[t][b];
      const __m256i isum = dot_i8_i8(q_abs, q, loadu256(ab.qs));
      const __m256 scale = _mm256_set1_ps(dw * half_to_float(ab.d));
      acc[t][slot] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[t][slot]);
    }
  }

  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const Block*>(w_row);
    const BlockQ8_0* a[k];
    __m256 acc[k][2];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_0*>(act[t]);
      acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    }
    const int64_t nb = n / kQK8_0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      block<k, 0>(w[b], a, b, acc);
      block<k, 1>(w[b + 1], a, b + 1, acc);
    }
    if (b < nb) block<k, 0>(w[b], a, b, acc);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) sums[t] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
  }
};

// Affine weights (x = d q + m, q unsigned) against Q8_1:
// sum_b d_w d_a sum_j q_j p_j + m s, with s = d_a sum_j p_j stored in the activation block.
template <class Decode>
struct AffineDot {
  using Block = typename Decode::Block;

  template <int k, int slot>
  static void block(const Block& wb, const BlockQ8_1* const* a, int64_t b, __m256 (*acc)[2],
                    float (*offsets)[2]) {
    const __m256i q = Decode::decode(wb);
    const float dw = half_to_float(wb.d);
    const float m = half_to_float(wb.m);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      const BlockQ8_1& ab = a[t][b];
      const __m256i isum = dot_u8_i8(q, loadu256(ab.qs));
      const __m256 scale = _mm256_set1_ps(dw * half_to_float(ab.d));
      acc[t][slot] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[t][slot]);
      offsets[t][slot] = std::fma(m, half_to_float(ab.s), offsets[t][slot]);
    }
  }

  template <int k>
  static void dot(int64_t n, const void* w_row, const uint8_t* const* act, float* sums) {
    const auto* w = static_cast<const Block*>(w_row);
    const BlockQ8_1* a[k];
    __m256 acc[k][2];
    float offsets[k][2];
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_1*>(act[t]);
      acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      offsets[t][0] = offsets[t][1] = 0.0f;
    }
    const int64_t nb = n / kQK8_1;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      block<k, 0>(w[b], a, b, acc, offsets);
      block<k, 1>(w[b + 1], a, b + 1, acc, offsets);
    }
    if (b < nb) block<k, 0>(w[b], a, b, acc, offsets);
    VELA_UNROLL
    for (int t = 0; t < k; ++t) {
      sums[t] = hsum(_mm256_add_ps(acc[t][0], acc[t][1])) + (offsets[t][0] + offsets[t][1]);
    }
  }
};

// Four rows per tile: 4 accumulators, the decoded block and its magnitude, and per-row
// temporaries fit in the 16 ymm registers.
constexpr int kTile = 4;
using Q4_0Rows = RowTiles<SymmetricDot<DecodeQ4_0>, kTile>;
using Q5_0Rows = RowTiles<SymmetricDot<DecodeQ5_0>, kTile>;
using Q8_0Rows = RowTiles<SymmetricDot<DecodeQ8_0>, kTile>;
using Q4_1Rows = RowTiles<AffineDot<DecodeQ4_1>, kTile>;
using Q5_1Rows = RowTiles<AffineDot<DecodeQ5_1>, kTile>;

}  // namespace

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a) {
  return Q4_0Rows::one(n, w, a);
}
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a) {
  return Q5_0Rows::one(n, w, a);
}
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a) {
  return Q8_0Rows::one(n, w, a);
}
float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a) {
  return Q4_1Rows::one(n, w, a);
}
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a) {
  return Q5_1Rows::one(n, w, a);
}

void vec_dot_rows_q4_0_q8_0(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q4_0Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q5_0_q8_0(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q5_0Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q8_0_q8_0(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q8_0Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q4_1_q8_1(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q4_1Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}
void vec_dot_rows_q5_1_q8_1(int64_t n, const void* w, const uint8_t* act, size_t act_stride,
                            int64_t n_act, float* out, int64_t out_stride) {
  Q5_1Rows::rows(n, w, act, act_stride, n_act, out, out_stride);
}

}  // namespace vela::kernels::avx2

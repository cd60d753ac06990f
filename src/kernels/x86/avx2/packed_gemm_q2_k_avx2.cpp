// AVX2 kernels for 16-row interleaved Q2_K and TQ2_0 weights against Q8_K activations
// (packed_gemm.h), on the K types' scheme (packed_gemm_k_avx2.cpp, walked by gemm_k). Q2_K: each
// 16-element sub-block's exact dot of q (0..3) by vpmaddubsw, scaled by its 4-bit scale in
// vpmaddwd, as Q3_K's; the mins by vpmaddwd with the activations' sub-block sum pairs and the
// reference's float steps per super-block, as Q4_K's. TQ2_0: the same plane and dots without
// scales, the -1 of its levels q - 1 through the activations' block sum, and one fma per
// super-block. So results are bit-identical to the scalar reference and to the AVX-512 kernels.
// A lone token walks two groups' weight streams in lockstep (lone_row_k).
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/packed_gemm_avx2_common.h"
#include "quant/blocks.h"

namespace vela::kernels {
namespace avx2 {
namespace {

// Vector v (elements 4v .. 4v + 3 of each row) of a sub-block's plane of rows 8h .. 8h + 7: q
// (0..3), unsigned for vpmaddubsw. The 16-bit shift carries bits across bytes only into the bits
// the mask drops.
inline __m256i decode_q2_k_vector(__m256i plane, int v) {
  return _mm256_and_si256(_mm256_srli_epi16(plane, 2 * v), _mm256_set1_epi8(3));
}

// Sub-block pair sub (sub-blocks 2 sub, 2 sub + 1) of rows 8h .. 8h + 7 of a Q2_K or TQ2_0
// block: its 8 vectors of q, 0-3 sub-block 2 sub's, 4-7 sub-block 2 sub + 1's.
template <class Packed>
inline void decode_q2_k_sub(const Packed& wb, int sub, int h, __m256i w[8]) {
  VELA_UNROLL
  for (int k = 0; k < 2; ++k) {
    const __m256i plane = loadu256(wb.qs[2 * sub + k][kHalfRows * h]);
    VELA_UNROLL
    for (int v = 0; v < 4; ++v) w[4 * k + v] = decode_q2_k_vector(plane, v);
  }
}

// [8 rows] half h's scale / min bytes of sub-block pair k widened: dword n holds row n's byte of
// sub-block 2k in its low word, of 2k + 1 in its high word.
inline __m256i q2_k_scale_min_pair(const BlockQ2_Kx16& wb, int k, int h) {
  return _mm256_cvtepu8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scale_min[k][kHalfRows * h])));
}

// [2 sub-blocks][8 rows] the scales of sub-blocks 2k and 2k + 1 in both 16-bit halves of each
// row's lane (vpmaddwd's operand).
inline void q2_k_scale_pairs(const BlockQ2_Kx16& wb, int k, int h, __m256i scale[2]) {
  const __m256i sc = _mm256_and_si256(q2_k_scale_min_pair(wb, k, h), _mm256_set1_epi16(0x0F));
  scale[0] =
      _mm256_shuffle_epi8(sc, _mm256_setr_epi32(0x01000100, 0x05040504, 0x09080908, 0x0D0C0D0C,
                                                0x01000100, 0x05040504, 0x09080908, 0x0D0C0D0C));
  scale[1] =
      _mm256_shuffle_epi8(sc, _mm256_setr_epi32(0x03020302, 0x07060706, 0x0B0A0B0A, 0x0F0E0F0E,
                                                0x03020302, 0x07060706, 0x0B0A0B0A, 0x0F0E0F0E));
}

// One 16-element sub-block of rows 8h .. 8h + 7 (its 4 vectors of q, w) against the activations'
// 4 broadcast dwords x, added to sum: the 4 vpmaddubsw pair sums (each at most 2 * 3 * 128) add
// up exactly in int16 (at most 3072), then one vpmaddwd by the scale pairs gives scale * the
// lane's dot.
inline __m256i q2_k_sub_sum(const __m256i* w, const __m256i* x, __m256i scale, __m256i sum) {
  const __m256i s01 =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[0], x[0]), _mm256_maddubs_epi16(w[1], x[1]));
  const __m256i s23 =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[2], x[2]), _mm256_maddubs_epi16(w[3], x[3]));
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_add_epi16(s01, s23), scale));
}

// The reference's float steps for half h of a Q2_K block against activation block a
// (block_pairs: its 8 sums of sub-block pairs as int16 pairs): acc plus d * dots minus dmin * the
// mins times those sums (one vpmaddwd per pair: the widened bytes' high nibbles are the mins).
inline __m256 finish_half_block_q2_k(const BlockQ2_Kx16& wb, int h, __m256i dots,
                                     const BlockQ8_K& a, const int32_t* block_pairs, __m256 acc) {
  const __m256 dw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d + kHalfRows * h)));
  const __m256 dmw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin + kHalfRows * h)));
  __m256i mins = _mm256_setzero_si256();
  VELA_UNROLL
  for (int k = 0; k < 8; ++k) {
    const __m256i mp = _mm256_srli_epi16(q2_k_scale_min_pair(wb, k, h), 4);
    mins = _mm256_add_epi32(mins, _mm256_madd_epi16(mp, _mm256_set1_epi32(block_pairs[k])));
  }
  const __m256 ad = _mm256_set1_ps(a.d);
  const __m256 d = _mm256_mul_ps(dw, ad);
  const __m256 m = _mm256_mul_ps(_mm256_mul_ps(dmw, ad), _mm256_cvtepi32_ps(mins));
  return _mm256_add_ps(acc, _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(dots), m));
}

// One 16-element TQ2_0 sub-block of rows 8h .. 8h + 7 (its 4 vectors of q, w) against the
// activations' 4 broadcast dwords x, added to sum: the 4 vpmaddubsw pair sums add up exactly in
// int16 (at most 3072, as Q2_K's), widened by vpmaddwd with ones.
inline __m256i tq2_0_sub_sum(const __m256i* w, const __m256i* x, __m256i sum) {
  const __m256i s01 =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[0], x[0]), _mm256_maddubs_epi16(w[1], x[1]));
  const __m256i s23 =
      _mm256_add_epi16(_mm256_maddubs_epi16(w[2], x[2]), _mm256_maddubs_epi16(w[3], x[3]));
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_add_epi16(s01, s23), _mm256_set1_epi16(1)));
}

// The reference's float step for half h of a TQ2_0 block against activation block a: the exact
// sum S = dots + start (block_start: -1 * the activations' sum), then acc + S * (d * a.d) in one
// fma.
inline __m256 finish_half_block_tq2_0(const BlockTQ2_0x16& wb, int h, __m256i dots,
                                      const BlockQ8_K& a, const int32_t* block_start, __m256 acc) {
  const __m256 dw =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d + kHalfRows * h)));
  const __m256i sum = _mm256_add_epi32(dots, _mm256_set1_epi32(block_start[0]));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc);
}

// How the two formats on the 2-bit plane differ: Q2_K scales each sub-block's dot (its scale
// pairs) and takes the mins through the activations' sub-block sum pairs (8 per block); TQ2_0 has
// no scales and takes its -1 through one start per block.
struct Q2KFormat {
  using Packed = BlockQ2_Kx16;
  static constexpr GgmlType kType = GgmlType::Q2_K;
  static constexpr int kSumsPerBlock = 8;
  static void sub_scales(const Packed& wb, int sub, int h, __m256i scale[2]) {
    q2_k_scale_pairs(wb, sub, h, scale);
  }
  static __m256i sub_sum(const __m256i* w, const __m256i* x, __m256i scale, __m256i sum) {
    return q2_k_sub_sum(w, x, scale, sum);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                            const int32_t* block_sums, __m256 acc) {
    return finish_half_block_q2_k(wb, h, sum, a, block_sums, acc);
  }
};

struct TQ2_0Format {
  using Packed = BlockTQ2_0x16;
  static constexpr GgmlType kType = GgmlType::TQ2_0;
  static constexpr int kSumsPerBlock = 1;
  static void sub_scales(const Packed&, int, int, __m256i scale[2]) {
    scale[0] = scale[1] = _mm256_setzero_si256();  // unused
  }
  static __m256i sub_sum(const __m256i* w, const __m256i* x, __m256i /*scale*/, __m256i sum) {
    return tq2_0_sub_sum(w, x, sum);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                            const int32_t* block_sums, __m256 acc) {
    return finish_half_block_tq2_0(wb, h, sum, a, block_sums, acc);
  }
};

// A lone row's sub-block pair sub of rows 8h .. 8h + 7 of a block of format F against activation
// block a: sum plus both sub-blocks' (scaled) dots.
template <class F>
inline __m256i lone_step_two_bit(const typename F::Packed& wb, int sub, int h, const BlockQ8_K& a,
                                 __m256i sum) {
  __m256i scale[2];
  F::sub_scales(wb, sub, h, scale);
  VELA_UNROLL
  for (int k = 0; k < 2; ++k) {
    const int j = 2 * sub + k;
    const __m256i plane = loadu256(wb.qs[j][kHalfRows * h]);
    __m256i w[4], x[4];
    VELA_UNROLL
    for (int v = 0; v < 4; ++v) {
      w[v] = decode_q2_k_vector(plane, v);
      x[v] = _mm256_set1_epi32(load_i32(a.qs + 16 * j + 4 * v));
    }
    sum = F::sub_sum(w, x, scale[k], sum);
  }
  return sum;
}

// Rows r < R of the token tile against both halves of one group of format F, sub-block pair by
// pair: its 8 vectors of q per half (decoded here into a local copy, or read from decoded when
// kDecoded: half h of block b's pair sub at decoded + 64 (h nb + b) + 8 sub) serve the R rows,
// each row's 4 activation dwords per sub-block broadcast once for both halves (F::sub_sum), then
// the reference's float step per super-block (F::finish_half; sums: F::kSumsPerBlock per token
// and block).
template <class F, int R, bool kDecoded>
void group_tile_two_bit(const typename F::Packed* wg, int64_t nb, const __m256i* decoded,
                        const uint8_t* act, size_t act_stride, const int32_t* sums, float* y,
                        int64_t y_stride) {
  using Packed = typename F::Packed;
  __m256 acc[2][R];
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Packed& wb = wg[b];
    const BlockQ8_K* a[R];
    VELA_UNROLL
    for (int r = 0; r < R; ++r)
      a[r] = reinterpret_cast<const BlockQ8_K*>(act + size_t(r) * act_stride) + b;
    __m256i sum[2][R];
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r) sum[h][r] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < 8; ++sub) {
      if constexpr (!kDecoded) prefetch_ahead_slice<Packed, 8>(&wb, sub);
      __m256i local[2][8];
      const __m256i* w[2];
      __m256i scale[2][2];  // [half][sub-block of the pair]
      VELA_UNROLL
      for (int h = 0; h < 2; ++h) {
        if constexpr (kDecoded) {
          w[h] = decoded + 64 * (h * nb + b) + 8 * sub;
        } else {
          decode_q2_k_sub(wb, sub, h, local[h]);
          w[h] = local[h];
        }
        F::sub_scales(wb, sub, h, scale[h]);
      }
      VELA_UNROLL
      for (int k = 0; k < 2; ++k) {
        const int j = 2 * sub + k;
        VELA_UNROLL
        for (int r = 0; r < R; ++r) {
          __m256i x[4];
          VELA_UNROLL
          for (int v = 0; v < 4; ++v) x[v] = _mm256_set1_epi32(load_i32(a[r]->qs + 16 * j + 4 * v));
          VELA_UNROLL
          for (int h = 0; h < 2; ++h)
            sum[h][r] = F::sub_sum(w[h] + 4 * k, x, scale[h][k], sum[h][r]);
        }
      }
    }
    VELA_UNROLL
    for (int h = 0; h < 2; ++h) VELA_UNROLL
    for (int r = 0; r < R; ++r)
      acc[h][r] = F::finish_half(wb, h, sum[h][r], *a[r], sums + (r * nb + b) * F::kSumsPerBlock,
                                 acc[h][r]);
  }
  VELA_UNROLL
  for (int h = 0; h < 2; ++h) VELA_UNROLL
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_stride + kHalfRows * h, acc[h][r]);
}

// A 2-bit plane format's kernel for gemm_k: q unsigned (0..3), decoded at most once per call from
// kQ2_KDecodeOnceMinTokens tokens (TQ2_0's decode is Q2_K's; not measured on its own).
template <class F>
struct TwoBitKernel {
  using Packed = typename F::Packed;
  static constexpr GgmlType kType = F::kType;
  static constexpr int kSubs = 8, kSubVectors = 8, kMaxR = 4, kSumsPerBlock = F::kSumsPerBlock;
  static constexpr int64_t kDecodeFrom = kQ2_KDecodeOnceMinTokens;
  static void decode_sub(const Packed& wb, int sub, int h, __m256i* out) {
    decode_q2_k_sub(wb, sub, h, out);
  }
  template <int R, bool kDecoded, class... Args>
  static void tile(Args... args) {
    group_tile_two_bit<F, R, kDecoded>(args...);
  }
  static constexpr int kLoneSteps = 8;  // sub-block pairs per block
  static __m256i lone_step(const Packed& wb, int step, int h, const BlockQ8_K& a,
                           const int32_t* /*block_sums*/, __m256i sum) {
    return lone_step_two_bit<F>(wb, step, h, a, sum);
  }
  static __m256 finish_half(const Packed& wb, int h, __m256i sum, const BlockQ8_K& a,
                            const int32_t* block_sums, __m256 acc) {
    return F::finish_half(wb, h, sum, a, block_sums, acc);
  }
};

}  // namespace
}  // namespace avx2

PackedGemmFn packed_gemm_q2_k_avx2() {
  return avx2::gemm_k<avx2::TwoBitKernel<avx2::Q2KFormat>>;
}

PackedGemmFn packed_gemm_tq2_0_avx2() {
  return avx2::gemm_k<avx2::TwoBitKernel<avx2::TQ2_0Format>>;
}

}  // namespace vela::kernels

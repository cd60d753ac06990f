#pragma once
// Internal to the packed int8 kernels (AVX-512 VNNI and AMX): per-call views of the Q8_0
// activation rows that every weight group reuses: each block's scale as f32 and the bias
// correction bias * sum(quants), both [n_act][nb], in a per-thread buffer that only grows.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/x86/avx512/avx512_util.h"
#include "quant/blocks.h"

namespace vela::kernels::avx512 {

struct ActBlockInfo {
  const float* scale = nullptr;       // [n_act][nb] d_a as f32
  const int32_t* correction = nullptr;  // [n_act][nb] bias * sum of the block's quants
};

// with_correction false skips the sums (the AMX kernel cancels the bias with a tile product).
inline ActBlockInfo prepare_act_blocks(const uint8_t* act, size_t act_stride, int64_t n_act,
                                       int64_t nb, int bias, bool with_correction) {
  thread_local std::vector<float> scale;
  thread_local std::vector<int32_t> correction;
  const size_t n = size_t(n_act * nb);
  if (scale.size() < n) scale.resize(n);
  if (with_correction && correction.size() < n) correction.resize(n);
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  for (int64_t t = 0; t < n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + size_t(t) * act_stride);
    for (int64_t b = 0; b < nb; ++b) {
      scale[size_t(t * nb + b)] = half_to_float(a[b].d);
      if (!with_correction) continue;
      // sum(q) = sum(q + 128) - 32 * 128, the biased bytes summed by vpsadbw.
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
      const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(q, flip), _mm256_setzero_si256());
      const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      const int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 32 * 128;
      correction[size_t(t * nb + b)] = int32_t(sum) * bias;
    }
  }
  return {scale.data(), with_correction ? correction.data() : nullptr};
}

}  // namespace vela::kernels::avx512

// Scalar reference of the packed int8 kernels (packed_gemm.h): the definition every SIMD and AMX
// kernel must reproduce bit for bit.
#include <cmath>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "quant/blocks.h"
#include "util/half.h"

namespace vela::kernels {

namespace {

// Unbiased level of weight row n, element k of a packed block.
inline int level(const BlockQ8_0x16& b, int n, int k) {
  return int(b.qs[k / 4][n][k % 4]) - kQ8_0PackedBias;
}
inline int level(const BlockQ4_0x16& b, int n, int k) {
  const uint8_t byte = b.qs[(k % 16) / 4][n][k % 4];
  return int(k < 16 ? byte & 0x0F : byte >> 4) - kQ4_0PackedBias;
}

template <class Packed>
void gemm_ref(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedBlockK;
  const auto* w = static_cast<const Packed*>(p.w);
  for (int64_t t = 0; t < p.n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(p.act + size_t(t) * p.act_stride);
    for (int64_t g = 0; g < p.n_groups; ++g) {
      const Packed* wg = w + g * nb;
      for (int n = 0; n < kPackedRows; ++n) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          int isum = 0;
          for (int k = 0; k < kPackedBlockK; ++k) isum += level(wg[b], n, k) * int(a[b].qs[k]);
          const float scale = fp16_to_fp32(wg[b].d[n]) * fp16_to_fp32(a[b].d);  // exact
          acc = std::fma(float(isum), scale, acc);
        }
        p.y[t * p.y_stride + g * kPackedRows + n] = acc;
      }
    }
  }
}

// Q4_K: per super-block, the exact integer sums of scale_j * dot_j and of min_j * (the
// activations' sum over sub-block j), then acc += d * dots - dmin * mins with d and dmin times the
// activation scale, in the order written (the kernels repeat each operation).
void gemm_ref_q4_k(const PackedGemmArgs& p) {
  const int64_t nb = p.n_cols / kPackedSuperK;
  const auto* w = static_cast<const BlockQ4_Kx16*>(p.w);
  for (int64_t t = 0; t < p.n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(p.act + size_t(t) * p.act_stride);
    for (int64_t g = 0; g < p.n_groups; ++g) {
      const BlockQ4_Kx16* wg = w + g * nb;
      for (int n = 0; n < kPackedRows; ++n) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const BlockQ4_Kx16& wb = wg[b];
          int32_t dots = 0, mins = 0;
          for (int j = 0; j < 8; ++j) {
            int32_t dot = 0;
            for (int l = 0; l < 32; ++l) {
              const uint8_t byte = wb.qs[j / 2][l / 4][n][l % 4];
              const int q = j % 2 == 0 ? byte & 0x0F : byte >> 4;
              dot += q * int32_t(a[b].qs[32 * j + l]);
            }
            dots += int32_t(wb.scale[j][n]) * dot;
            mins += int32_t(wb.min_pairs[j / 2][n][j % 2]) *
                    (int32_t(a[b].bsums[2 * j]) + int32_t(a[b].bsums[2 * j + 1]));
          }
          const float d = fp16_to_fp32(wb.d[n]) * a[b].d;
          const float dmin = fp16_to_fp32(wb.dmin[n]) * a[b].d;
          const float m = dmin * float(mins);
          acc = acc + std::fma(d, float(dots), -m);
        }
        p.y[t * p.y_stride + g * kPackedRows + n] = acc;
      }
    }
  }
}

}  // namespace

PackedGemmFn packed_gemm_ref(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0: return gemm_ref<BlockQ8_0x16>;
    case GgmlType::Q4_0: return gemm_ref<BlockQ4_0x16>;
    case GgmlType::Q4_K: return gemm_ref_q4_k;
    default: return nullptr;
  }
}

}  // namespace vela::kernels

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

}  // namespace

PackedGemmFn packed_gemm_ref(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q8_0: return gemm_ref<BlockQ8_0x16>;
    case GgmlType::Q4_0: return gemm_ref<BlockQ4_0x16>;
    default: return nullptr;
  }
}

}  // namespace vela::kernels

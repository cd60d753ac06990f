// Importance-weighted quantization: one switch over the per-family quantizers. Types without a
// weighted quantizer of their own fall back to quantize_row(), which ignores the importance.
#include <cstdio>
#include <cstdlib>

#include "quant/quantize.h"
#include "quant/quantize_iq1.h"
#include "quant/quantize_iq23.h"
#include "quant/quantize_low_k.h"
#include "quant/quantize_nonlinear4.h"

namespace vela {

namespace {

using WeightedFn = void (*)(const float* src, void* dst, int64_t n, const float* importance);

// The importance-aware row quantizer of `type`, or nullptr where there is none.
WeightedFn weighted_quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return quantize_row_q2_k_weighted;
    case GgmlType::Q3_K:
      return quantize_row_q3_k_weighted;
    case GgmlType::TQ1_0:
      return quantize_row_tq1_0_weighted;
    case GgmlType::TQ2_0:
      return quantize_row_tq2_0_weighted;
    case GgmlType::IQ1_S:
      return quantize_row_iq1_s_weighted;
    case GgmlType::IQ1_M:
      return quantize_row_iq1_m_weighted;
    case GgmlType::IQ2_XXS:
      return quantize_row_iq2_xxs_weighted;
    case GgmlType::IQ2_XS:
      return quantize_row_iq2_xs_weighted;
    case GgmlType::IQ2_S:
      return quantize_row_iq2_s_weighted;
    case GgmlType::IQ3_XXS:
      return quantize_row_iq3_xxs_weighted;
    case GgmlType::IQ3_S:
      return quantize_row_iq3_s_weighted;
    case GgmlType::IQ4_NL:
      return quantize_row_iq4_nl_weighted;
    case GgmlType::IQ4_XS:
      return quantize_row_iq4_xs_weighted;
    case GgmlType::MXFP4:
      return quantize_row_mxfp4_weighted;
    default:
      return nullptr;
  }
}

}  // namespace

bool can_quantize_weighted(GgmlType type) {
  return weighted_quantizer(type) != nullptr || can_quantize(type);
}

bool needs_importance(GgmlType type) {
  switch (type) {
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M:
      return true;
    default:
      return false;
  }
}

void quantize_row_weighted(GgmlType type, const float* src, void* dst, int64_t n,
                           const float* importance) {
  if (const WeightedFn fn = weighted_quantizer(type)) return fn(src, dst, n, importance);
  if (can_quantize(type)) return quantize_row(type, src, dst, n);
  std::fprintf(stderr, "quantize_row_weighted: unsupported type %s\n",
               ggml_type_name(uint32_t(type)).c_str());
  std::abort();
}

}  // namespace vela

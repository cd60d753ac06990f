// Scalar reference of the element-wise kernels (kernels/elementwise.h).
#include <cmath>

#include "kernels/elementwise.h"

namespace vela::kernels {
namespace {

void silu_mul_ref(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul_ref(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * up[i];
  }
}

}  // namespace

const ElementwiseKernels& elementwise_kernels_ref() {
  static const ElementwiseKernels table = {silu_mul_ref, gelu_tanh_mul_ref};
  return table;
}

}  // namespace vela::kernels

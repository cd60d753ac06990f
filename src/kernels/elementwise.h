#pragma once
// Element-wise kernels of the layers that cost a transcendental per element, one table per
// instruction-set level (as attention_kernels.h): the scalar reference with std::exp, and AVX2 and
// AVX-512 versions with a polynomial exp (within a few ulp of the reference).
// Thread-safety: the tables are immutable; the kernels are pure functions.
#include <cstdint>

#include "kernels/cpu_features.h"

namespace vela::kernels {

// gate[i] = silu(gate[i]) * up[i] = gate[i] * sigmoid(gate[i]) * up[i] for i < n.
using SiluMulFn = void (*)(float* gate, const float* up, int64_t n);

// gate[i] = gelu(gate[i]) * up[i] with the tanh approximation
// gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), for i < n.
using GeluMulFn = void (*)(float* gate, const float* up, int64_t n);

struct ElementwiseKernels {
  SiluMulFn silu_mul;
  GeluMulFn gelu_tanh_mul;
};

const ElementwiseKernels& elementwise_kernels_ref();
const ElementwiseKernels& elementwise_kernels_avx2();
const ElementwiseKernels& elementwise_kernels_avx512();

// The table of one level (tests; the caller checks the CPU supports it).
inline const ElementwiseKernels& elementwise_kernels(KernelIsa isa) {
  if (isa == KernelIsa::kAvx512) return elementwise_kernels_avx512();
  if (isa == KernelIsa::kAvx2) return elementwise_kernels_avx2();
  return elementwise_kernels_ref();
}

// The table of the level in use (selected_kernel_isa()).
inline const ElementwiseKernels& elementwise_kernels() {
  return elementwise_kernels(selected_kernel_isa());
}

}  // namespace vela::kernels

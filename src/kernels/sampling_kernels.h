#pragma once
// The sampler's whole-vocabulary loops (max, sums of exponentials, weights for a draw), one table
// per instruction-set level like the other kernels. Every level runs the same loop source
// (sampling_loops.h) built with that level's vector width and without FMA contraction, so all
// levels return bit-identical results and a seed reproduces the same tokens on every machine.
// Over a 150k vocabulary these run for every token.
// Thread-safety: the tables are immutable; the kernels are pure functions (exp_weights writes
// only its arguments).
#include <cstddef>

#include "kernels/cpu_features.h"

namespace vela::kernels {

// Sums are accumulated in float lanes over blocks of this many elements, then in double: short
// float chains keep the relative error ~1e-7 even over 150k terms.
inline constexpr size_t kSamplingSumBlock = 256;

// Largest of x[i * stride] for i < n; -inf when n == 0. x: [n * stride], no NaN.
using MaxValueFn = float (*)(const float* x, size_t n, size_t stride);

// sum_i exp(x[i * stride] - shift) for i < n. x: [n * stride], no NaN.
using SumExpFn = double (*)(const float* x, size_t n, size_t stride, float shift);

// x[i] <- exp(x[i] - shift) if x[i] >= threshold, else 0, for i < n; writes the sum of each
// kSamplingSumBlock-element block to block_sums and returns the total.
// x: [n]; block_sums: [ceil(n / kSamplingSumBlock)].
using ExpWeightsFn = double (*)(float* x, size_t n, float shift, float threshold,
                                double* block_sums);

struct SamplingKernels {
  MaxValueFn max_value;
  SumExpFn sum_exp;
  ExpWeightsFn exp_weights;
};

const SamplingKernels& sampling_kernels_ref();
const SamplingKernels& sampling_kernels_avx2();
const SamplingKernels& sampling_kernels_avx512();

// The table of one level (tests; the caller checks the CPU supports it).
inline const SamplingKernels& sampling_kernels(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512:
      return sampling_kernels_avx512();
    case KernelIsa::kAvx2:
      return sampling_kernels_avx2();
    case KernelIsa::kScalar:
      break;
  }
  return sampling_kernels_ref();
}

// The table of the level in use (selected_kernel_isa()), looked up once.
inline const SamplingKernels& sampling_kernels() {
  static const SamplingKernels& table = sampling_kernels(selected_kernel_isa());
  return table;
}

}  // namespace vela::kernels

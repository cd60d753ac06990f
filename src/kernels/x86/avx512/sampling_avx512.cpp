// AVX-512 level of the sampling kernels (kernels/sampling_kernels.h): the shared loop source
// built with -mavx512f and without FMA contraction, so results equal the reference bit for bit.
#include "kernels/sampling_loops.h"

namespace vela::kernels {

const SamplingKernels& sampling_kernels_avx512() {
  return kSamplingKernelsThisLevel;
}

}  // namespace vela::kernels

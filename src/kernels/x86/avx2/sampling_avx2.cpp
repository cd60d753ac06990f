// AVX2 level of the sampling kernels (kernels/sampling_kernels.h): the shared loop source built
// with -mavx2 and without FMA contraction, so results equal the reference bit for bit.
#include "kernels/sampling_loops.h"

namespace vela::kernels {

const SamplingKernels& sampling_kernels_avx2() {
  return kSamplingKernelsThisLevel;
}

}  // namespace vela::kernels

// Scalar reference of the sampling kernels (kernels/sampling_kernels.h): the shared loop source
// built for baseline x86-64 (SSE2) or whatever the target's baseline is.
#include "kernels/sampling_loops.h"

namespace vela::kernels {

const SamplingKernels& sampling_kernels_ref() {
  return kSamplingKernelsThisLevel;
}

}  // namespace vela::kernels

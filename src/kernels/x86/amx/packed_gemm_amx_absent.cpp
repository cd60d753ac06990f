// The emulated-AVX-512 kernel library (src/kernels/CMakeLists.txt) has no AMX kernels: its
// portable intrinsics have no tiles, and its cpu_features() reports no AMX, so nothing asks.
#include "kernels/packed/packed_gemm.h"

namespace vela::kernels {

PackedGemmFn packed_gemm_amx(GgmlType) {
  return nullptr;
}

}  // namespace vela::kernels

// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c).
#include "kernels/kernel_table.h"

namespace vela::kernels {

void register_avx2_kernels(TraitsTable& table) {
  (void)table;  // no AVX2 kernels yet: every type keeps its scalar entry
}

}  // namespace vela::kernels

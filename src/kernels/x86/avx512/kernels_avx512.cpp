// AVX-512 (F/BW/DQ/VL, plus VNNI and BF16 where the CPU has them) kernels (compiled with the
// matching -mavx512* flags).
#include "kernels/kernel_table.h"

namespace vela::kernels {

void register_avx512_kernels(TraitsTable& table) {
  (void)table;  // no AVX-512 kernels yet: every type keeps its AVX2 or scalar entry
}

}  // namespace vela::kernels

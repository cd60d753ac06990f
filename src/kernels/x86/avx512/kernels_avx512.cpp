// AVX-512 (F/BW/DQ/VL, plus VNNI and BF16 where the CPU has them) kernels (compiled with the
// matching -mavx512* flags). The table starts as a copy of the AVX2 one; every weight type the
// engine supports gets a 512-bit vec_dot and vec_dot_rows here.
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/gemm_avx512.h"

namespace vela::kernels {

namespace avx512 {

Avx512Extensions detected_extensions() {
  const CpuFeatures& f = cpu_features();
  return {.vnni = f.avx512_vnni, .bf16 = f.avx512_bf16};
}

void register_kernels(TraitsTable& table, Avx512Extensions ext) {
  register_float_kernels(table, ext);
  register_q32_kernels(table, ext);
  register_k_kernels(table, ext);
  register_low_k_kernels(table, ext);
  register_nonlinear4_kernels(table, ext);
  register_iq1_kernels(table, ext);
  register_iq23_kernels(table, ext);
  register_gemm_kernels(table, ext);
  register_float_gemm_kernels(table, ext);
}

}  // namespace avx512

void register_avx512_kernels(TraitsTable& table) {
  // The optional extensions are checked here, once, so the table stays correct on AVX-512 CPUs
  // without VNNI or BF16.
  avx512::register_kernels(table, avx512::detected_extensions());
}

}  // namespace vela::kernels

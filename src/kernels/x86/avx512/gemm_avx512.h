#pragma once
// Internal to the AVX-512 kernels: the register-tiled gemm_tile kernels (gemm_avx512.cpp).
// Only call when cpu_features().avx512 is true.
// Thread-safety: writes only the table it is given.
#include "kernels/x86/avx512/avx512_kernels.h"

namespace vela::kernels::avx512 {

// gemm_tile for Q4_0 and Q8_0 (VNNI only; without it the entries stay null). Call after
// register_q32_kernels: the results match that file's vec_dot bit for bit.
void register_gemm_kernels(TraitsTable& table, Avx512Extensions ext);

// gemm_tile for F32, F16 and (with AVX512-BF16) BF16 weights (gemm_float_avx512.cpp); matches
// dot_float_avx512.cpp's vec_dot bit for bit.
void register_float_gemm_kernels(TraitsTable& table, Avx512Extensions ext);

}  // namespace vela::kernels::avx512

#pragma once
// Internal to the AVX-512 kernels: how the table is filled, split by family, with the optional
// extensions passed in explicitly so tests can build the fallback tables on a CPU that has them.
// Only call these when cpu_features().avx512 is true.
// Thread-safety: each function writes only the table it is given.
#include "kernels/kernel_table.h"

namespace vela::kernels::avx512 {

// Extensions beyond AVX-512 F/BW/DQ/VL that a table may use.
struct Avx512Extensions {
  bool vnni = false;  // vpdpbusd / vpdpwssd for the int8 dots
  bool bf16 = false;  // vdpbf16ps for BF16 x BF16
};

// The extensions this CPU has (cpu_features()).
Avx512Extensions detected_extensions();

// F32, F16 (x F32) and BF16 (x BF16).
void register_float_kernels(TraitsTable& table, Avx512Extensions ext);
// The 32-element block types against Q8_0 / Q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
void register_q32_kernels(TraitsTable& table, Avx512Extensions ext);
// The K super-block types against Q8_K: Q4_K, Q5_K, Q6_K.
void register_k_kernels(TraitsTable& table, Avx512Extensions ext);
// The 2- and 3-bit K and the ternary types against Q8_K: Q2_K, Q3_K, TQ1_0, TQ2_0.
void register_low_k_kernels(TraitsTable& table, Avx512Extensions ext);
// The 4-bit non-linear types: IQ4_NL and MXFP4 against Q8_0, IQ4_XS against Q8_K.
void register_nonlinear4_kernels(TraitsTable& table, Avx512Extensions ext);
// The 1-bit codebook types against Q8_K: IQ1_S, IQ1_M.
void register_iq1_kernels(TraitsTable& table, Avx512Extensions ext);
// The E8-lattice codebook types against Q8_K: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S.
void register_iq23_kernels(TraitsTable& table, Avx512Extensions ext);

// All of the above; register_avx512_kernels() calls it with detected_extensions().
void register_kernels(TraitsTable& table, Avx512Extensions ext);

}  // namespace vela::kernels::avx512

// AVX2 + FMA + F16C kernel table: every weight type's vec_dot and vec_dot_rows, the float, codebook
// and ternary types' gemm_tile, and the activation conversions (this file is compiled with -mavx2
// -mfma -mf16c).
#include "kernels/x86/avx2/kernels_avx2.h"
#include "kernels/kernel_table.h"

namespace vela::kernels {

void register_avx2_kernels(TraitsTable& table) {
  namespace k = avx2;
  auto entry = [&table](GgmlType type) -> TypeTraits& { return table[static_cast<size_t>(type)]; };
  auto set_dot =
      [&](GgmlType type, float (*dot)(int64_t, const void*, const void*),
          void (*rows)(int64_t, const void*, const uint8_t*, size_t, int64_t, float*, int64_t)) {
        entry(type).vec_dot = dot;
        entry(type).vec_dot_rows = rows;
      };
  set_dot(GgmlType::F32, k::vec_dot_f32_f32, k::vec_dot_rows_f32_f32);
  set_dot(GgmlType::F16, k::vec_dot_f16_f32, k::vec_dot_rows_f16_f32);
  set_dot(GgmlType::BF16, k::vec_dot_bf16_bf16, k::vec_dot_rows_bf16_bf16);
  entry(GgmlType::F32).gemm_tile = k::gemm_tile_f32_f32;
  entry(GgmlType::F16).gemm_tile = k::gemm_tile_f16_f32;
  entry(GgmlType::BF16).gemm_tile = k::gemm_tile_bf16_bf16;
  set_dot(GgmlType::Q4_0, k::vec_dot_q4_0_q8_0, k::vec_dot_rows_q4_0_q8_0);
  set_dot(GgmlType::Q5_0, k::vec_dot_q5_0_q8_0, k::vec_dot_rows_q5_0_q8_0);
  set_dot(GgmlType::Q8_0, k::vec_dot_q8_0_q8_0, k::vec_dot_rows_q8_0_q8_0);
  set_dot(GgmlType::Q4_1, k::vec_dot_q4_1_q8_1, k::vec_dot_rows_q4_1_q8_1);
  set_dot(GgmlType::Q5_1, k::vec_dot_q5_1_q8_1, k::vec_dot_rows_q5_1_q8_1);
  set_dot(GgmlType::Q4_K, k::vec_dot_q4_k_q8_k, k::vec_dot_rows_q4_k_q8_k);
  set_dot(GgmlType::Q5_K, k::vec_dot_q5_k_q8_k, k::vec_dot_rows_q5_k_q8_k);
  set_dot(GgmlType::Q6_K, k::vec_dot_q6_k_q8_k, k::vec_dot_rows_q6_k_q8_k);
  set_dot(GgmlType::IQ2_XXS, k::vec_dot_iq2_xxs_q8_k, k::vec_dot_rows_iq2_xxs_q8_k);
  set_dot(GgmlType::IQ2_XS, k::vec_dot_iq2_xs_q8_k, k::vec_dot_rows_iq2_xs_q8_k);
  set_dot(GgmlType::IQ2_S, k::vec_dot_iq2_s_q8_k, k::vec_dot_rows_iq2_s_q8_k);
  set_dot(GgmlType::IQ3_XXS, k::vec_dot_iq3_xxs_q8_k, k::vec_dot_rows_iq3_xxs_q8_k);
  set_dot(GgmlType::IQ3_S, k::vec_dot_iq3_s_q8_k, k::vec_dot_rows_iq3_s_q8_k);
  set_dot(GgmlType::Q2_K, k::vec_dot_q2_k_q8_k, k::vec_dot_rows_q2_k_q8_k);
  set_dot(GgmlType::Q3_K, k::vec_dot_q3_k_q8_k, k::vec_dot_rows_q3_k_q8_k);
  set_dot(GgmlType::TQ1_0, k::vec_dot_tq1_0_q8_k, k::vec_dot_rows_tq1_0_q8_k);
  set_dot(GgmlType::TQ2_0, k::vec_dot_tq2_0_q8_k, k::vec_dot_rows_tq2_0_q8_k);
  set_dot(GgmlType::IQ4_NL, k::vec_dot_iq4_nl_q8_0, k::vec_dot_rows_iq4_nl_q8_0);
  set_dot(GgmlType::IQ4_XS, k::vec_dot_iq4_xs_q8_k, k::vec_dot_rows_iq4_xs_q8_k);
  set_dot(GgmlType::MXFP4, k::vec_dot_mxfp4_q8_0, k::vec_dot_rows_mxfp4_q8_0);
  set_dot(GgmlType::IQ1_S, k::vec_dot_iq1_s_q8_k, k::vec_dot_rows_iq1_s_q8_k);
  set_dot(GgmlType::IQ1_M, k::vec_dot_iq1_m_q8_k, k::vec_dot_rows_iq1_m_q8_k);
  entry(GgmlType::IQ2_XXS).gemm_tile = k::gemm_tile_iq2_xxs_q8_k;
  entry(GgmlType::IQ2_XS).gemm_tile = k::gemm_tile_iq2_xs_q8_k;
  entry(GgmlType::IQ2_S).gemm_tile = k::gemm_tile_iq2_s_q8_k;
  entry(GgmlType::IQ3_XXS).gemm_tile = k::gemm_tile_iq3_xxs_q8_k;
  entry(GgmlType::IQ3_S).gemm_tile = k::gemm_tile_iq3_s_q8_k;
  entry(GgmlType::IQ1_S).gemm_tile = k::gemm_tile_iq1_s_q8_k;
  entry(GgmlType::IQ1_M).gemm_tile = k::gemm_tile_iq1_m_q8_k;
  entry(GgmlType::TQ1_0).gemm_tile = k::gemm_tile_tq1_0_q8_k;
  entry(GgmlType::TQ2_0).gemm_tile = k::gemm_tile_tq2_0_q8_k;

  entry(GgmlType::BF16).from_float = k::quantize_row_bf16;
  entry(GgmlType::Q8_0).from_float = k::quantize_row_q8_0_activations;
  entry(GgmlType::Q8_1).from_float = k::quantize_row_q8_1_activations;
  entry(GgmlType::Q8_K).from_float = k::quantize_row_q8_k;
  // A weight type's from_float converts activations to its vec_dot_type: use that type's.
  for (TypeTraits& t : table) {
    if (t.vec_dot != nullptr) t.from_float = entry(t.vec_dot_type).from_float;
  }
}

}  // namespace vela::kernels

#include "kernels/type_traits.h"

#include <array>

#include "kernels/kernel_table.h"
#include "kernels/ref/vec_dot_iq1_ref.h"
#include "kernels/ref/vec_dot_iq23_ref.h"
#include "kernels/ref/vec_dot_ref.h"
#include "kernels/ref/vec_dot_low_k_ref.h"
#include "kernels/ref/vec_dot_nonlinear4_ref.h"
#include "quant/dequantize.h"
#include "quant/dequantize_iq1.h"
#include "quant/dequantize_iq23.h"
#include "quant/dequantize_low_k.h"
#include "quant/dequantize_nonlinear4.h"
#include "quant/quantize.h"

namespace vela {

namespace {

using kernels::TraitsTable;

constexpr TypeTraits kUnsupported{GgmlType::F32, nullptr, nullptr, nullptr};

TraitsTable make_scalar_table() {
  namespace r = kernels::ref;
  TraitsTable t;
  t.fill(kUnsupported);
  auto set = [&t](GgmlType type, TypeTraits traits) { t[static_cast<size_t>(type)] = traits; };
  set(GgmlType::F32, {GgmlType::F32, quantize_row_f32, dequantize_row_f32, r::vec_dot_f32_f32});
  // F16 weights are dotted with f32 activations: rounding activations to f16 costs accuracy
  // (and agreement with reference engines) for no bandwidth gain in matrix x vector.
  set(GgmlType::F16, {GgmlType::F32, quantize_row_f32, dequantize_row_f16, r::vec_dot_f16_f32});
  set(GgmlType::BF16,
      {GgmlType::BF16, quantize_row_bf16, dequantize_row_bf16, r::vec_dot_bf16_bf16});
  set(GgmlType::Q4_0,
      {GgmlType::Q8_0, quantize_row_q8_0_activations, dequantize_row_q4_0, r::vec_dot_q4_0_q8_0});
  set(GgmlType::Q4_1,
      {GgmlType::Q8_1, quantize_row_q8_1_activations, dequantize_row_q4_1, r::vec_dot_q4_1_q8_1});
  set(GgmlType::Q5_0,
      {GgmlType::Q8_0, quantize_row_q8_0_activations, dequantize_row_q5_0, r::vec_dot_q5_0_q8_0});
  set(GgmlType::Q5_1,
      {GgmlType::Q8_1, quantize_row_q8_1_activations, dequantize_row_q5_1, r::vec_dot_q5_1_q8_1});
  set(GgmlType::Q8_0,
      {GgmlType::Q8_0, quantize_row_q8_0_activations, dequantize_row_q8_0, r::vec_dot_q8_0_q8_0});
  set(GgmlType::Q8_1,
      {GgmlType::Q8_1, quantize_row_q8_1_activations, dequantize_row_q8_1, nullptr});
  set(GgmlType::Q4_K,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_q4_k, r::vec_dot_q4_k_q8_k});
  set(GgmlType::Q5_K,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_q5_k, r::vec_dot_q5_k_q8_k});
  set(GgmlType::Q6_K,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_q6_k, r::vec_dot_q6_k_q8_k});
  set(GgmlType::Q8_K, {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_q8_k, nullptr});
  set(GgmlType::IQ2_XXS,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq2_xxs, r::vec_dot_iq2_xxs_q8_k});
  set(GgmlType::IQ2_XS,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq2_xs, r::vec_dot_iq2_xs_q8_k});
  set(GgmlType::IQ2_S,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq2_s, r::vec_dot_iq2_s_q8_k});
  set(GgmlType::IQ3_XXS,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq3_xxs, r::vec_dot_iq3_xxs_q8_k});
  set(GgmlType::IQ3_S,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq3_s, r::vec_dot_iq3_s_q8_k});
  set(GgmlType::Q2_K,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_q2_k, r::vec_dot_q2_k_q8_k});
  set(GgmlType::Q3_K,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_q3_k, r::vec_dot_q3_k_q8_k});
  set(GgmlType::TQ1_0,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_tq1_0, r::vec_dot_tq1_0_q8_k});
  set(GgmlType::TQ2_0,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_tq2_0, r::vec_dot_tq2_0_q8_k});
  set(GgmlType::IQ4_NL, {GgmlType::Q8_0, quantize_row_q8_0_activations, dequantize_row_iq4_nl,
                         r::vec_dot_iq4_nl_q8_0});
  set(GgmlType::IQ4_XS,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq4_xs, r::vec_dot_iq4_xs_q8_k});
  set(GgmlType::MXFP4,
      {GgmlType::Q8_0, quantize_row_q8_0_activations, dequantize_row_mxfp4, r::vec_dot_mxfp4_q8_0});
  set(GgmlType::IQ1_S,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq1_s, r::vec_dot_iq1_s_q8_k});
  set(GgmlType::IQ1_M,
      {GgmlType::Q8_K, quantize_row_q8_k, dequantize_row_iq1_m, r::vec_dot_iq1_m_q8_k});
  return t;
}

const TraitsTable& scalar_table() {
  static const TraitsTable table = make_scalar_table();
  return table;
}

const TypeTraits* lookup(const TraitsTable& table, GgmlType type) {
  const auto index = static_cast<size_t>(type);
  if (index >= table.size() || table[index].to_float == nullptr) return nullptr;
  return &table[index];
}

const TraitsTable& avx2_table() {
  static const TraitsTable table = [] {
    TraitsTable t = scalar_table();
    kernels::register_avx2_kernels(t);
    return t;
  }();
  return table;
}

const TraitsTable& avx512_table() {
  static const TraitsTable table = [] {
    TraitsTable t = avx2_table();  // AVX-512 machines run AVX2 code for what has no 512-bit kernel
    kernels::register_avx512_kernels(t);
    return t;
  }();
  return table;
}

}  // namespace

KernelIsa active_kernel_isa() { return selected_kernel_isa(); }

const TypeTraits* type_traits_for(KernelIsa isa, GgmlType type) {
  // A table is only built (and its code only run) when the CPU supports its instruction set.
  if (static_cast<int>(isa) > static_cast<int>(supported_kernel_isas().back())) return nullptr;
  switch (isa) {
    case KernelIsa::kScalar: return lookup(scalar_table(), type);
    case KernelIsa::kAvx2: return lookup(avx2_table(), type);
    case KernelIsa::kAvx512: return lookup(avx512_table(), type);
  }
  return nullptr;
}

const TypeTraits* type_traits(GgmlType type) {
  // Resolved once: the CPU does not change under us.
  static const KernelIsa isa = active_kernel_isa();
  if (const TypeTraits* t = type_traits_for(isa, type)) return t;
  return type_traits_for(KernelIsa::kScalar, type);
}

}  // namespace vela

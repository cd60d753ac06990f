#include "kernels/packed/packed_gemm.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kernels/cpu_features.h"
#include "kernels/packed/packed_act.h"

namespace vela {

namespace {

// Tokens from which the AMX kernel takes over from VNNI.
constexpr int64_t kAmxMinTokens = 4;

// F32, F16 and BF16 have float kernels of their own (packed_gemm_float_*), not int8 ones.
bool is_float_weight(GgmlType w_type) {
  return w_type == GgmlType::F32 || w_type == GgmlType::F16 || w_type == GgmlType::BF16;
}

// The AMX kernel runs only with VELA_AMX=1: it was written on a machine without AMX and has not
// yet run on real tiles (its test, PackedGemm.AmxBitIdenticalToReference, needs the same opt-in).
bool amx_opted_in() {
  const char* env = std::getenv("VELA_AMX");
  return env != nullptr && std::string_view(env) == "1";
}

// The activation copy the `small` kernel of w_type at the kernel level `isa` reads.
PackedActPrep small_act_prep(GgmlType w_type, KernelIsa isa) {
  if (isa == KernelIsa::kAvx512 && is_float_weight(w_type))
    return interleaved_float_act_prep(w_type, selected_bf16_kernel());
  if (w_type == GgmlType::BF16) return widened_bf16_act_prep();  // the AVX2 kernel's
  if (isa == KernelIsa::kAvx512) {
    const PackedActPrep tiles = kernels::packed_act_prep_avx512_vnni(w_type);  // 32-element types
    if (tiles.write != nullptr) return tiles;
  }
  return packed_act_sums_prep(w_type);
}

PackedKernels select(GgmlType w_type) {
  PackedKernels k;
  const KernelIsa isa = selected_kernel_isa();
  if (isa == KernelIsa::kScalar) return k;
  k.small = packed_gemm_kernel(
      isa == KernelIsa::kAvx2 ? PackedKernelKind::kAvx2 : PackedKernelKind::kAvx512, w_type);
  if (k.small == nullptr) return k;
  k.small_prep = small_act_prep(w_type, isa);
  if (isa == KernelIsa::kAvx512) {
    k.large = packed_gemm_kernel(PackedKernelKind::kAmx, w_type);
    k.large_min_tokens = k.large ? kAmxMinTokens : 0;
  }
  return k;
}

}  // namespace

Bf16Kernel selected_bf16_kernel() {
  static const Bf16Kernel kernel = [] {
    const CpuFeatures& f = cpu_features();
    Bf16Kernel k = f.bf16_dot_full_rate ? Bf16Kernel::kDot : Bf16Kernel::kWidenedFma;
    if (const char* env = std::getenv("VELA_BF16_KERNEL"); env && *env) {
      const std::string_view v(env);
      if (v == "dot" && f.avx512_bf16)
        k = Bf16Kernel::kDot;
      else if (v == "fma")
        k = Bf16Kernel::kWidenedFma;
      else
        std::fprintf(stderr,
                     "vela: ignoring VELA_BF16_KERNEL='%s' (fma, or dot with AVX512-BF16)\n", env);
    }
    return k;
  }();
  return kernel;
}

PackedGemmFn packed_gemm_kernel(PackedKernelKind kind, GgmlType w_type) {
  const CpuFeatures& f = cpu_features();
  switch (kind) {
    case PackedKernelKind::kReference:
      return kernels::packed_gemm_ref(w_type);
    case PackedKernelKind::kAvx2:
      if (!f.avx2) return nullptr;
      return is_float_weight(w_type) ? kernels::packed_gemm_float_avx2(w_type)
                                     : kernels::packed_gemm_avx2(w_type);
    case PackedKernelKind::kAvx512:
      if (is_float_weight(w_type))
        return f.avx512 ? kernels::packed_gemm_float_avx512(w_type, selected_bf16_kernel())
                        : nullptr;
      return f.avx512_vnni ? kernels::packed_gemm_avx512_vnni(w_type) : nullptr;
    case PackedKernelKind::kAmx:
      return f.amx_int8 && f.avx512_vnni && amx_opted_in() ? kernels::packed_gemm_amx(w_type)
                                                           : nullptr;
  }
  return nullptr;
}

const PackedKernels& active_packed_kernels(GgmlType w_type) {
  static constexpr std::array kTypes = {
      GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,  GgmlType::Q8_0,   GgmlType::Q4_0,
      GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,  GgmlType::Q4_K,   GgmlType::Q5_K,
      GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::IQ4_XS, GgmlType::Q3_K,
      GgmlType::Q2_K, GgmlType::TQ2_0};
  static const auto table = [] {
    std::array<PackedKernels, kTypes.size()> t;
    for (size_t i = 0; i < kTypes.size(); ++i) t[i] = select(kTypes[i]);
    return t;
  }();
  static const PackedKernels none;
  for (size_t i = 0; i < kTypes.size(); ++i)
    if (kTypes[i] == w_type) return table[i];
  return none;
}

}  // namespace vela

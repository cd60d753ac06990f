#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>
#include <thread>

namespace vela {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

// Linux needs a process to ask for the AMX tile-data state before using it.
[[maybe_unused]] bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

int count_physical_cores() {
  // Distinct (physical id, core id) pairs in /proc/cpuinfo; falls back to hardware_concurrency.
  std::set<std::pair<int, int>> cores;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    int phys = 0;
    while (std::fgets(line, sizeof line, f)) {
      int v;
      if (std::sscanf(line, "physical id : %d", &v) == 1) phys = v;
      if (std::sscanf(line, "core id : %d", &v) == 1) cores.insert({phys, v});
    }
    std::fclose(f);
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.bf16_dot_full_rate = std::string_view(vendor) == "AuthenticAMD";
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & bit_OSXSAVE;
  const bool fma = c & bit_FMA;
  const bool f16c = c & bit_F16C;
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = ymm_os && fma && f16c && (b & bit_AVX2);
  f.avx512 = f.avx2 && zmm_os && (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512DQ) &&
             (b & bit_AVX512VL);
  f.avx512_vnni = f.avx512 && (c & bit_AVX512VNNI);
  [[maybe_unused]] const bool amx_tile = d & (1u << 24);
  [[maybe_unused]] const bool amx_int8 = d & (1u << 25);
  [[maybe_unused]] const bool amx_bf16 = d & (1u << 22);
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = f.avx512 && (a & (1u << 5));
#if defined(VELA_AVX512_EMULATED)
  // This library's AVX-512 kernels run on portable intrinsics (avx512_emulation.h) beside its
  // AVX2 ones, so every AVX-512 extension is there wherever AVX2 is; AMX tiles are not emulated.
  f.avx512 = f.avx512_vnni = f.avx512_bf16 = f.avx2;
#else
  if (f.avx512 && amx_tile && request_amx_permission()) {
    f.amx_int8 = amx_int8;
    f.amx_bf16 = amx_bf16;
  }
#endif
  f.bf16_dot_full_rate = f.bf16_dot_full_rate && f.avx512_bf16;
  f.physical_cores = count_physical_cores();
  return f;
}

KernelIsa highest_supported() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512) return KernelIsa::kAvx512;
  if (f.avx2) return KernelIsa::kAvx2;
  return KernelIsa::kScalar;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar:
      return "scalar";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<KernelIsa> supported_kernel_isas() {
  std::vector<KernelIsa> out;
  for (int i = 0; i <= static_cast<int>(highest_supported()); ++i)
    out.push_back(static_cast<KernelIsa>(i));
  return out;
}

KernelIsa selected_kernel_isa() {
  static const KernelIsa isa = [] {
    KernelIsa best = highest_supported();
    if (const char* env = std::getenv("VELA_ISA"); env && *env) {
      for (KernelIsa cap : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
        if (std::string_view(env) == kernel_isa_name(cap)) {
          if (static_cast<int>(cap) < static_cast<int>(best)) best = cap;
          return best;
        }
      }
      std::fprintf(stderr, "vela: ignoring unknown VELA_ISA='%s' (scalar, avx2, avx512)\n", env);
    }
    return best;
  }();
  return isa;
}

std::string describe_cpu() {
  const CpuFeatures& f = cpu_features();
  std::string s = kernel_isa_name(selected_kernel_isa());
  std::string extras;
  if (f.avx512_vnni) extras += " vnni";
  if (f.avx512_bf16) extras += " bf16";
  if (f.amx_int8) extras += " amx";
#if defined(VELA_AVX512_EMULATED)
  if (f.avx512) extras += " emulated";
#endif
  if (!extras.empty()) s += " (" + extras.substr(1) + ")";
  return s + ", " + std::to_string(f.physical_cores) + " physical cores";
}

}  // namespace vela

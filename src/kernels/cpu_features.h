#pragma once
// What the CPU can run, read once from CPUID (and the OS's XSAVE state), and the kernel level
// the process uses: the best one present, or a lower one forced with VELA_ISA=scalar|avx2|avx512
// so tests and benchmarks can exercise every path this machine has.
// Thread-safety: computed once on first use (thread-safe static); read-only afterwards.
#include <string>
#include <vector>

namespace vela {

struct CpuFeatures {
  bool avx2 = false;    // with FMA and F16C
  bool avx512 = false;  // F, BW, DQ, VL
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_int8 = false;  // AMX tiles usable (CPU support and OS permission)
  bool amx_bf16 = false;
  // vdpbf16ps retires its 32 multiply-adds per vector as fast as an FMA retires 16 (AMD Zen 4 and
  // 5); Intel's cores issue it at half that rate (measured on an Emerald Rapids Xeon: 43 against
  // 87 GMAC/s per core), so there BF16 weights widened to f32 for FMA are faster.
  bool bf16_dot_full_rate = false;
  int physical_cores = 1;  // best effort; at least 1
};

const CpuFeatures& cpu_features();

// Instruction-set levels with their own kernel tables, lowest first.
enum class KernelIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* kernel_isa_name(KernelIsa isa);

// Levels this CPU supports (always includes kScalar), lowest first.
std::vector<KernelIsa> supported_kernel_isas();

// The level in use: the highest supported one, capped by $VELA_ISA when set.
KernelIsa selected_kernel_isa();

// One line for logs and benchmarks, e.g. "avx512 (vnni bf16 amx), 2 cores".
std::string describe_cpu();

}  // namespace vela

#pragma once
// The machine's ceilings for a roofline comparison, measured at run time: memory read bandwidth
// (a STREAM-like multi-threaded read of a buffer much larger than the last-level cache) and the
// arithmetic peak of the selected kernel ISA (fp32 FMA chains; int8 dot products: VNNI on
// AVX-512, maddubs on AVX2; bf16 pair dot products where AVX512-BF16 has them), for a given
// thread count. `vela bench` measures a test's ceiling again next to each of its runs: on a
// shared host the ceilings move by up to 2x within minutes, so a run's share is only meaningful
// against the ceiling of its own moment.
// Thread-safety: the functions start and join their own threads; call from one thread at a time
// (concurrent measurements would disturb each other, not corrupt anything).
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cpu_features.h"

namespace vela::bench {

struct Roofline {
  int n_threads = 1;
  double read_bytes_per_s = 0;  // 0 when not measured
  double fp32_flops = 0;        // FLOP/s, 2 per FMA lane
  double int8_ops = 0;          // int8 ops/s, 2 per multiply-add
  double bf16_flops = 0;        // FLOP/s of bf16 pair dot products (vdpbf16ps: 4 per f32 lane);
                                // 0 where the kernels have no bf16 dot instruction (they widen)
};

// One of a Roofline's ceilings.
enum class CeilingKind { kReadBandwidth, kFp32Peak, kInt8Peak, kBf16Peak };

const char* ceiling_name(CeilingKind kind);  // "read bandwidth", "fp32 peak", ...

// Buffer size for the bandwidth test: 4x the last-level cache, at least 256 MiB, at most a
// quarter of physical memory.
size_t default_bandwidth_buffer_bytes();

// Best of `passes` reads of a `bytes`-byte buffer split between n_threads threads (bytes/s).
double measure_read_bandwidth(int n_threads, size_t bytes, KernelIsa isa, int passes = 5);

// Peak rates with n_threads threads each running the loop for about `seconds`.
double measure_peak_fp32(int n_threads, KernelIsa isa, double seconds = 0.1);
double measure_peak_int8(int n_threads, KernelIsa isa, double seconds = 0.1);
// 0 unless the ISA is AVX-512 and the CPU has AVX512-BF16.
double measure_peak_bf16(int n_threads, KernelIsa isa, double seconds = 0.1);

// One of them: the read bandwidth of a bandwidth_bytes buffer (0 when bandwidth_bytes == 0, not
// measured; the buffer is allocated for the measurement and freed after it, so that it takes no
// memory from the model between measurements), or a peak over `seconds`.
double measure_ceiling(CeilingKind kind, int n_threads, KernelIsa isa, size_t bandwidth_bytes,
                       double seconds = 0.1);

// All of them; bandwidth_bytes == 0 skips the bandwidth test.
Roofline measure_roofline(int n_threads, KernelIsa isa, size_t bandwidth_bytes,
                          double seconds = 0.1);

}  // namespace vela::bench

#include "tools_support/bench/roofline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "tools_support/bench/peak_kernels.h"
#include "util/huge_pages.h"

namespace vela::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Scalar loops: what the portable build reaches (the scalar kernel level's ceiling).
uint64_t fp32_loop_scalar(uint64_t iters, float* sink) {
  float a[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  for (uint64_t i = 0; i < iters; ++i)
    for (float& x : a) x = x * 0.9999f + 1e-4f;
  *sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
  return iters * 8 * 2;
}

uint64_t int8_loop_scalar(uint64_t iters, int32_t* sink) {
  uint32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8};  // unsigned: the sums wrap
  uint8_t x = 3;
  for (uint64_t i = 0; i < iters; ++i) {
    x = uint8_t(x + 1);
    for (uint32_t& v : a) v += uint32_t(int32_t(int8_t(x)) * -2);
  }
  *sink = int32_t(a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7]);
  return iters * 8 * 2;
}

uint64_t read_sum_scalar(const uint8_t* data, size_t bytes) {
  const auto* p = reinterpret_cast<const uint64_t*>(data);
  uint64_t s[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < bytes / 8; i += 4) {
    s[0] += p[i];
    s[1] += p[i + 1];
    s[2] += p[i + 2];
    s[3] += p[i + 3];
  }
  return s[0] + s[1] + s[2] + s[3];
}

// Runs work(thread_index) on n threads started together; returns the wall time in seconds.
double run_parallel(int n_threads, const std::function<void(int)>& work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 1; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      work(t);
    });
  while (ready.load() < n_threads - 1) std::this_thread::yield();
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  work(0);
  for (std::thread& t : threads) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs of a peak loop, the best kept. On a shared virtual machine a run can lose one of its
// cores to the host for part of its 0.1 s (two-thread fp32 peaks of 100 and 195 GFLOP/s a few
// seconds apart on a 2-vCPU Zen 3 guest), which would understate the ceiling.
constexpr int kPeakRuns = 5;

// Ops/s of `loop` on n threads: calibrates the iteration count on one thread to about `seconds`.
template <class Sink>
double measure_loop(int n_threads, double seconds, uint64_t (*loop)(uint64_t, Sink*)) {
  Sink sink{};
  uint64_t iters = 1 << 12;
  for (;;) {
    const auto t0 = Clock::now();
    loop(iters, &sink);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > seconds / 8 || iters > (uint64_t(1) << 40)) {
      iters = uint64_t(double(iters) * seconds / std::max(dt, 1e-9)) + 1;
      break;
    }
    iters *= 4;
  }
  std::vector<uint64_t> ops(static_cast<size_t>(n_threads), 0);
  std::vector<Sink> sinks(static_cast<size_t>(n_threads));
  double best = 0;
  for (int rep = 0; rep < kPeakRuns; ++rep) {
    const double wall =
        run_parallel(n_threads, [&](int t) { ops[size_t(t)] = loop(iters, &sinks[size_t(t)]); });
    uint64_t total = 0;
    for (uint64_t o : ops) total += o;
    best = std::max(best, double(total) / wall);
  }
  return best;
}

}  // namespace

size_t default_bandwidth_buffer_bytes() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t ram = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : size_t(4) << 30;
  size_t bytes = std::max<size_t>(size_t(256) << 20, llc > 0 ? size_t(llc) * 4 : 0);
  return std::min(bytes, ram / 4);
}

double measure_read_bandwidth(int n_threads, size_t bytes, KernelIsa isa, int passes) {
  n_threads = std::max(1, n_threads);
  // Each thread's slice is a multiple of 256 bytes (the widest kernel's step).
  const size_t slice = std::max<size_t>(256, bytes / size_t(n_threads) / 256 * 256);
  const size_t total = slice * size_t(n_threads);
  // On huge pages, as the repacked weights are, so that the ceiling is the one they can reach.
  const HugePageBuffer buf = allocate_huge_pages(total);
  if (!buf) return 0;
  // First touch by the thread that will read the slice (places pages near it on NUMA systems).
  run_parallel(n_threads, [&](int t) { std::memset(buf.get() + size_t(t) * slice, t + 1, slice); });
  uint64_t (*read)(const uint8_t*, size_t) = read_sum_scalar;
  if (isa == KernelIsa::kAvx512) read = read_sum_avx512;
  if (isa == KernelIsa::kAvx2) read = read_sum_avx2;
  std::vector<uint64_t> sums(static_cast<size_t>(n_threads));
  double best = 0;
  for (int p = 0; p < std::max(1, passes); ++p) {
    const double wall = run_parallel(
        n_threads, [&](int t) { sums[size_t(t)] = read(buf.get() + size_t(t) * slice, slice); });
    best = std::max(best, double(total) / wall);
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sums) keep = keep + s;  // the sums must be used or the reads could go
  return best;
}

double measure_peak_fp32(int n_threads, KernelIsa isa, double seconds) {
  n_threads = std::max(1, n_threads);
  if (isa == KernelIsa::kAvx512)
    return measure_loop<float>(n_threads, seconds, fp32_fma_loop_avx512);
  if (isa == KernelIsa::kAvx2) return measure_loop<float>(n_threads, seconds, fp32_fma_loop_avx2);
  return measure_loop<float>(n_threads, seconds, fp32_loop_scalar);
}

double measure_peak_int8(int n_threads, KernelIsa isa, double seconds) {
  n_threads = std::max(1, n_threads);
  if (isa == KernelIsa::kAvx512 && cpu_features().avx512_vnni)
    return measure_loop<int32_t>(n_threads, seconds, int8_dot_loop_avx512_vnni);
  if (isa >= KernelIsa::kAvx2) return measure_loop<int32_t>(n_threads, seconds, int8_dot_loop_avx2);
  return measure_loop<int32_t>(n_threads, seconds, int8_loop_scalar);
}

double measure_peak_bf16(int n_threads, KernelIsa isa, double seconds) {
  if (isa != KernelIsa::kAvx512 || !cpu_features().avx512_bf16) return 0;
  return measure_loop<float>(std::max(1, n_threads), seconds, bf16_dot_loop_avx512);
}

Roofline measure_roofline(int n_threads, KernelIsa isa, size_t bandwidth_bytes, double seconds) {
  Roofline r;
  r.n_threads = n_threads;
  r.read_bytes_per_s =
      measure_ceiling(CeilingKind::kReadBandwidth, n_threads, isa, bandwidth_bytes);
  r.fp32_flops = measure_ceiling(CeilingKind::kFp32Peak, n_threads, isa, 0, seconds);
  r.int8_ops = measure_ceiling(CeilingKind::kInt8Peak, n_threads, isa, 0, seconds);
  r.bf16_flops = measure_ceiling(CeilingKind::kBf16Peak, n_threads, isa, 0, seconds);
  return r;
}

const char* ceiling_name(CeilingKind kind) {
  switch (kind) {
    case CeilingKind::kReadBandwidth:
      return "read bandwidth";
    case CeilingKind::kFp32Peak:
      return "fp32 peak";
    case CeilingKind::kInt8Peak:
      return "int8 peak";
    case CeilingKind::kBf16Peak:
      return "bf16 peak";
  }
  return "?";
}

double measure_ceiling(CeilingKind kind, int n_threads, KernelIsa isa, size_t bandwidth_bytes,
                       double seconds) {
  switch (kind) {
    case CeilingKind::kReadBandwidth:
      return bandwidth_bytes > 0 ? measure_read_bandwidth(n_threads, bandwidth_bytes, isa) : 0;
    case CeilingKind::kFp32Peak:
      return measure_peak_fp32(n_threads, isa, seconds);
    case CeilingKind::kInt8Peak:
      return measure_peak_int8(n_threads, isa, seconds);
    case CeilingKind::kBf16Peak:
      return measure_peak_bf16(n_threads, isa, seconds);
  }
  return 0;
}

}  // namespace vela::bench

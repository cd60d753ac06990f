#pragma once
// Software prefetch of a packed weight block in slices, shared by the AVX2 and AVX-512 packed
// kernels (each passes its own distance). A K-type block is 36-53 cache lines; requesting all of
// them as the block starts, then computing on it, overruns the core's outstanding-miss slots,
// where the same lines requested a slice per sub-block (or sub-block pair) as each starts keep
// the stream at the memory's pace. Measured on Zen 3 (AVX2, avx2/packed_gemm_avx2_common.h) and
// Zen 4 (AVX-512, avx512/packed_gemm_avx512.h). Include only from files compiled for x86 SIMD.
// Thread-safety: stateless.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace vela::kernels {

// Slice `part` of kParts of the lines of the sizeof(Packed) bytes at kAheadBytes past `block`.
// Slice p covers lines kLines * p / kParts up to kLines * (p + 1) / kParts, from a table: computing
// the bounds took some 15 instructions per slice, a quarter of the Q6_K lone row's loop on Zen 3
// (the table: 1.07x in L3, the same from memory). Slices of one size instead (the last reaching
// into the next block, or taking the remainder) were 0.4-0.9x from memory there.
// Every prefetch helper is always_inline: GCC 12 finds an out-of-line one free of side effects (it
// models none for a prefetch), marks it const and drops its calls, which left every AVX-512 K-type
// tile without hints (`objdump -d` of packed_gemm_k_avx512.cpp.o: 5 prefetches, now 38).
template <size_t kAheadBytes, class Packed, int kParts>
[[gnu::always_inline]] inline void prefetch_slice(const Packed* block, int part) {
  constexpr int kLines = int((sizeof(Packed) + 63) / 64);
  // Byte offset of slice p's first line, p <= kParts.
  static constexpr auto kStart = [] {
    std::array<int16_t, kParts + 1> start{};
    for (int p = 0; p <= kParts; ++p) start[size_t(p)] = int16_t(64 * (kLines * p / kParts));
    return start;
  }();
  const char* ahead = reinterpret_cast<const char*>(block) + kAheadBytes;
  const char* end = ahead + kStart[size_t(part) + 1];
  for (const char* line = ahead + kStart[size_t(part)]; line < end; line += 64)
    _mm_prefetch(line, _MM_HINT_T0);
}

}  // namespace vela::kernels

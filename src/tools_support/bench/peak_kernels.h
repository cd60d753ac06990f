#pragma once
// Inner loops of the roofline measurements, one set per instruction-set level, each compiled
// with its own ISA flags (peak_avx2.cpp, peak_avx512.cpp) and called only when the CPU has it.
// Thread-safety: pure functions over the caller's memory; safe to run on many threads at once.
#include <cstddef>
#include <cstdint>

namespace vela::bench {

// Runs `iters` iterations of independent fp32 FMA chains; returns the FLOPs executed (2 per
// lane per FMA). `sink` receives a value that depends on every chain (keeps the work alive).
uint64_t fp32_fma_loop_avx512(uint64_t iters, float* sink);
uint64_t fp32_fma_loop_avx2(uint64_t iters, float* sink);

// Runs `iters` iterations of independent int8 dot-product chains (u8 x s8 multiply, summed
// into i32: VNNI vpdpbusd on AVX-512, maddubs + madd + add on AVX2); returns the int8 ops
// executed (2 per multiply-add).
uint64_t int8_dot_loop_avx512_vnni(uint64_t iters, int32_t* sink);
uint64_t int8_dot_loop_avx2(uint64_t iters, int32_t* sink);

// Runs `iters` iterations of independent vdpbf16ps chains (AVX512-BF16); returns the FLOPs
// executed (2 pairs x 2 per f32 lane).
uint64_t bf16_dot_loop_avx512(uint64_t iters, float* sink);

// Sums `bytes` bytes (a multiple of 256, 64-byte aligned) as 64-bit integers with full-width
// loads: a read-only stream of the buffer.
uint64_t read_sum_avx512(const uint8_t* data, size_t bytes);
uint64_t read_sum_avx2(const uint8_t* data, size_t bytes);

}  // namespace vela::bench

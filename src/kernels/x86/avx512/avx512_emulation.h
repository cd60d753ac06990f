#pragma once
// The AVX-512 intrinsics in portable C++, for the emulated-AVX-512 kernel library that the tests
// build beside the real one (VELA_AVX512_EMULATED, src/kernels/CMakeLists.txt). The AVX-512
// kernel sources compile unchanged against it, without any -mavx512 flag, and give the same
// integer and IEEE float results as the hardware, so their tests against the scalar reference
// run on a CPU without AVX-512 too. Speed means nothing there.
//
// SIMDe (Debian's libsimde-dev) supplies nearly every intrinsic under its Intel name. The ones
// its 0.7.4 lacks, and those it rounds differently from the hardware (fused multiply-adds,
// vdpbf16ps), are written below element by element; like the hardware, a masked load or store
// touches only the elements its mask selects. A kernel that uses an intrinsic neither
// provides fails to compile in that library, naming it.
// Thread-safety: stateless functions.
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/ref/bf16_pair_dot.h"
#include "util/half.h"

namespace vela::kernels::avx512_emulation {

template <typename T, int kLanes, typename Vec>
inline void to_lanes(Vec v, T (&out)[kLanes]) {
  static_assert(sizeof(Vec) == sizeof(out));
  std::memcpy(out, &v, sizeof(v));
}

template <typename Vec, typename T, int kLanes>
inline Vec from_lanes(const T (&lanes)[kLanes]) {
  static_assert(sizeof(Vec) == sizeof(lanes));
  Vec v;
  std::memcpy(&v, lanes, sizeof(v));
  return v;
}

// Lanes of type T from p where `mask` has a bit, the others from `fill`.
template <typename Vec, typename T, int kLanes>
inline Vec masked_load(Vec fill, uint64_t mask, const void* p) {
  T lanes[kLanes];
  to_lanes<T, kLanes>(fill, lanes);
  for (int i = 0; i < kLanes; ++i)
    if ((mask >> i) & 1)
      std::memcpy(&lanes[i], static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return from_lanes<Vec>(lanes);
}

template <typename Vec, typename T, int kLanes>
inline Vec maskz_load(uint64_t mask, const void* p) {
  Vec zero;
  std::memset(&zero, 0, sizeof(zero));
  return masked_load<Vec, T, kLanes>(zero, mask, p);
}

inline void mask_storeu_ps(void* p, simde__mmask16 mask, simde__m512 v) {
  float lanes[16];
  to_lanes<float, 16>(v, lanes);
  for (int i = 0; i < 16; ++i)
    if ((mask >> i) & 1) std::memcpy(static_cast<char*>(p) + i * sizeof(float), &lanes[i], 4);
}

// The first kLanes lanes of type In, each mapped by `fn` to a lane of type Out.
template <typename Out, typename In, int kLanes, typename OutVec, typename InVec, typename Fn>
inline OutVec map_lanes(InVec v, Fn fn) {
  In in[sizeof(InVec) / sizeof(In)];
  to_lanes<In, int(sizeof(InVec) / sizeof(In))>(v, in);
  Out out[kLanes];
  for (int i = 0; i < kLanes; ++i) out[i] = fn(in[i]);
  return from_lanes<OutVec>(out);
}

template <typename Out, typename In, int kLanes, typename OutVec, typename InVec>
inline OutVec convert_lanes(InVec v) {
  return map_lanes<Out, In, kLanes, OutVec>(v, [](In x) { return static_cast<Out>(x); });
}

inline simde__m512 cvtph_ps(simde__m256i h) {
  return map_lanes<float, uint16_t, 16, simde__m512>(h, fp16_to_fp32);
}

// Round to nearest even, the only rounding the kernels ask for.
template <int kRounding>
inline simde__m256i cvtps_ph(simde__m512 v) {
  static_assert((kRounding & 7) == SIMDE_MM_FROUND_TO_NEAREST_INT, "only nearest-even rounding");
  return map_lanes<uint16_t, float, 16, simde__m256i>(v, fp32_to_fp16);
}

// The order and operand order of GCC's _mm512_reduce_add_ps / _mm512_reduce_max_ps: the upper
// 256 and 128 bits with the lower ones, then lanes {0,1} with {2,3}, then lane 0 with lane 1.
template <typename Op>
inline float reduce_ps(simde__m512 v, Op op) {
  float x[16];
  to_lanes<float, 16>(v, x);
  for (int width = 8; width >= 4; width /= 2)
    for (int i = 0; i < width; ++i) x[i] = op(x[i + width], x[i]);
  for (int width = 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) x[i] = op(x[i], x[i + width]);
  return x[0];
}

// SIMDe computes a fused multiply-add as a product and a sum, two roundings; the hardware rounds
// once. kProductSign and kAddendSign give fmadd (+1, +1), fmsub (+1, -1) and fnmadd (-1, +1).
// std::fma runs under the thread's MXCSR, so subnormals flush as on the hardware where a kernel
// sets DAZ and FTZ (flush_subnormals.h).
template <int kProductSign, int kAddendSign, typename Vec>
inline Vec fused_multiply_add(Vec a, Vec b, Vec c) {
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
  float x[kLanes], y[kLanes], z[kLanes];
  to_lanes<float, kLanes>(a, x);
  to_lanes<float, kLanes>(b, y);
  to_lanes<float, kLanes>(c, z);
  for (int i = 0; i < kLanes; ++i)
    x[i] = std::fma(float(kProductSign) * x[i], y[i], float(kAddendSign) * z[i]);
  return from_lanes<Vec>(x);
}

// Lane 0 fused, lanes 1-3 from a.
inline simde__m128 fmadd_ss(simde__m128 a, simde__m128 b, simde__m128 c) {
  return simde_mm_move_ss(a, fused_multiply_add<1, 1>(a, b, c));
}

// vdpbf16ps, lane by lane as the scalar reference computes it (bf16_pair_dot.h).
inline simde__m512 dpbf16_ps(simde__m512 src, simde__m512bh a, simde__m512bh b) {
  float acc[16];
  uint16_t x[32], y[32];
  to_lanes<float, 16>(src, acc);
  to_lanes<uint16_t, 32>(a, x);
  to_lanes<uint16_t, 32>(b, y);
  for (int i = 0; i < 16; ++i) acc[i] = bf16_pair_dot(acc[i], x + 2 * i, y + 2 * i);
  return from_lanes<simde__m512>(acc);
}

// vpdpbusd: each 32-bit lane plus the four products of its unsigned bytes of a with the signed
// bytes of b, wrapping. Out of line: SIMDe's own form, inlined into the kernels' unrolled tiles,
// made GCC spend minutes on packed_gemm_avx512.cpp alone.
[[gnu::noinline]] inline simde__m512i dpbusd_epi32(simde__m512i src, simde__m512i a,
                                                   simde__m512i b) {
  uint32_t acc[16];
  uint8_t x[64];
  int8_t y[64];
  to_lanes<uint32_t, 16>(src, acc);
  to_lanes<uint8_t, 64>(a, x);
  to_lanes<int8_t, 64>(b, y);
  for (int i = 0; i < 16; ++i)
    for (int j = 4 * i; j < 4 * i + 4; ++j) acc[i] += uint32_t(int32_t(x[j]) * int32_t(y[j]));
  return from_lanes<simde__m512i>(acc);
}

inline simde__m512i zextsi256_si512(simde__m256i v) {
  uint8_t lanes[64] = {};
  std::memcpy(lanes, &v, sizeof(v));
  return from_lanes<simde__m512i>(lanes);
}

}  // namespace vela::kernels::avx512_emulation

// Built with AVX2 enabled, SIMDe includes the compiler's own intrinsics headers, which declare
// these already.
#if !defined(SIMDE_X86_AVX2_NATIVE)
typedef simde__mmask8 __mmask8;
typedef simde__mmask16 __mmask16;
typedef simde__mmask32 __mmask32;
typedef simde__mmask64 __mmask64;
#endif
#if !defined(_MM_FROUND_NO_EXC)
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif

// SIMDe's aliases are function-like macros, which split a template argument list at its commas,
// and its _mm512_madd_epi16 alias takes the masked form's four operands; plain names avoid both.
#undef _mm512_madd_epi16
#define _mm512_madd_epi16 simde_mm512_madd_epi16
#undef _mm512_permutexvar_epi16
#define _mm512_permutexvar_epi16 simde_mm512_permutexvar_epi16

// SIMDe insists on constant shift counts under clang; the hardware intrinsics take any count
// (a count over the lane width gives zero in both forms).
#define VELA_EMU_SHIFT(shift, a, n) (shift(a, simde_mm_cvtsi32_si128(int(n))))
#undef _mm256_slli_epi16
#define _mm256_slli_epi16(a, n) VELA_EMU_SHIFT(simde_mm256_sll_epi16, a, n)
#undef _mm512_slli_epi16
#define _mm512_slli_epi16(a, n) VELA_EMU_SHIFT(simde_mm512_sll_epi16, a, n)
#undef _mm512_srli_epi16
#define _mm512_srli_epi16(a, n) VELA_EMU_SHIFT(simde_mm512_srl_epi16, a, n)
#undef _mm512_slli_epi32
#define _mm512_slli_epi32(a, n) VELA_EMU_SHIFT(simde_mm512_sll_epi32, a, n)

// Those it lacks: a streaming store is, to a program, a store.
#if !defined(_mm512_stream_ps)
#define _mm512_stream_ps(p, v) simde_mm512_storeu_ps(p, v)
#endif

// Those it rounds otherwise than the hardware.
#define VELA_EMU ::vela::kernels::avx512_emulation
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps(a, b, c) (VELA_EMU::fused_multiply_add<1, 1>(a, b, c))
#undef _mm512_fmsub_ps
#define _mm512_fmsub_ps(a, b, c) (VELA_EMU::fused_multiply_add<1, -1>(a, b, c))
#undef _mm512_fnmadd_ps
#define _mm512_fnmadd_ps(a, b, c) (VELA_EMU::fused_multiply_add<-1, 1>(a, b, c))
#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps(a, b, c) (VELA_EMU::fused_multiply_add<1, 1>(a, b, c))
#undef _mm_fmadd_ss
#define _mm_fmadd_ss(a, b, c) (VELA_EMU::fmadd_ss(a, b, c))
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps(src, a, b) (VELA_EMU::dpbf16_ps(src, a, b))

// One that compiles too slowly in SIMDe's form.
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32(src, a, b) (VELA_EMU::dpbusd_epi32(src, a, b))

// The intrinsics SIMDe 0.7.4 lacks.
#define _mm512_shuffle_f32x4(a, b, imm) \
  (simde_mm512_castsi512_ps(            \
      simde_mm512_shuffle_i32x4(simde_mm512_castps_si512(a), simde_mm512_castps_si512(b), imm)))
#define _cvtsh_ss(h) ::vela::fp16_to_fp32(h)
#define _mm_maskz_loadu_epi8(k, p) (VELA_EMU::maskz_load<simde__m128i, int8_t, 16>(k, p))
#define _mm256_maskz_loadu_epi8(k, p) (VELA_EMU::maskz_load<simde__m256i, int8_t, 32>(k, p))
#define _mm256_maskz_loadu_epi16(k, p) (VELA_EMU::maskz_load<simde__m256i, int16_t, 16>(k, p))
#define _mm512_maskz_loadu_epi8(k, p) (VELA_EMU::maskz_load<simde__m512i, int8_t, 64>(k, p))
#define _mm512_maskz_loadu_epi16(k, p) (VELA_EMU::maskz_load<simde__m512i, int16_t, 32>(k, p))
#define _mm512_maskz_loadu_ps(k, p) (VELA_EMU::maskz_load<simde__m512, float, 16>(k, p))
#define _mm512_mask_loadu_ps(src, k, p) (VELA_EMU::masked_load<simde__m512, float, 16>(src, k, p))
#define _mm512_mask_storeu_ps(p, k, v) (VELA_EMU::mask_storeu_ps(p, k, v))
#define _mm512_cvtepi32_ps(v) (VELA_EMU::convert_lanes<float, int32_t, 16, simde__m512>(v))
#define _mm512_cvtepi8_epi32(v) (VELA_EMU::convert_lanes<int32_t, int8_t, 16, simde__m512i>(v))
#define _mm512_cvtepu8_epi32(v) (VELA_EMU::convert_lanes<int32_t, uint8_t, 16, simde__m512i>(v))
#define _mm512_cvtepu8_epi16(v) (VELA_EMU::convert_lanes<int16_t, uint8_t, 32, simde__m512i>(v))
#define _mm512_cvtepu16_epi32(v) (VELA_EMU::convert_lanes<int32_t, uint16_t, 16, simde__m512i>(v))
#define _mm512_cvtph_ps(h) (VELA_EMU::cvtph_ps(h))
#define _mm512_cvtps_ph(v, rounding) (VELA_EMU::cvtps_ph<(rounding)>(v))
#define _mm512_reduce_add_ps(v) (VELA_EMU::reduce_ps(v, [](float a, float b) { return a + b; }))
// vmaxps gives its second operand unless the first is greater (so also for NaN).
#define _mm512_reduce_max_ps(v) \
  (VELA_EMU::reduce_ps(v, [](float a, float b) { return a > b ? a : b; }))
#define _mm512_zextsi256_si512(v) (VELA_EMU::zextsi256_si512(v))

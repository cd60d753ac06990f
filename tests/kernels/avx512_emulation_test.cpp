// The emulated-AVX-512 kernel library (src/kernels/x86/avx512/avx512_emulation.h), which this
// executable runs the kernel tests against: it reports every AVX-512 extension, so those tests run
// rather than skip, and the intrinsics it writes itself round, mask and reduce as the hardware
// does, so a kernel that passes here computes the same bits on an AVX-512 CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/x86/avx512/avx512_emulation.h"
#include "util/half.h"

namespace vela {
namespace {

template <typename Vec, typename T, int kLanes>
Vec vec_of(const T (&lanes)[kLanes]) {
  return kernels::avx512_emulation::from_lanes<Vec>(lanes);
}

template <typename T, int kLanes, typename Vec>
std::vector<T> lanes_of(Vec v) {
  T lanes[kLanes];
  kernels::avx512_emulation::to_lanes<T, kLanes>(v, lanes);
  return std::vector<T>(lanes, lanes + kLanes);
}

TEST(Avx512Emulation, ReportsEveryExtensionWhereAvx2Runs) {
  const CpuFeatures& f = cpu_features();
  if (!f.avx2) GTEST_SKIP() << "CPU without AVX2: the library's AVX2 kernels cannot run";
  EXPECT_TRUE(f.avx512);
  EXPECT_TRUE(f.avx512_vnni);
  EXPECT_TRUE(f.avx512_bf16);
  EXPECT_FALSE(f.amx_int8);
  EXPECT_EQ(supported_kernel_isas().back(), KernelIsa::kAvx512);
  EXPECT_NE(describe_cpu().find("emulated"), std::string::npos) << describe_cpu();
}

// (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the product alone rounds the 2^-24 away, one fused rounding
// keeps it.
TEST(Avx512Emulation, MultiplyAddsRoundOnce) {
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const float c = 1.0f + std::ldexp(1.0f, -11);
  const float tiny = std::ldexp(1.0f, -24);
  float x[16], minus_c[16], plus_c[16];
  for (int i = 0; i < 16; ++i) x[i] = a, minus_c[i] = -c, plus_c[i] = c;
  const __m512 va = vec_of<__m512>(x);
  for (float v : lanes_of<float, 16>(_mm512_fmadd_ps(va, va, vec_of<__m512>(minus_c))))
    EXPECT_EQ(v, tiny);
  for (float v : lanes_of<float, 16>(_mm512_fmsub_ps(va, va, vec_of<__m512>(plus_c))))
    EXPECT_EQ(v, tiny);
  for (float v : lanes_of<float, 16>(_mm512_fnmadd_ps(va, va, vec_of<__m512>(plus_c))))
    EXPECT_EQ(v, -tiny);
  for (float v : lanes_of<float, 8>(
           _mm256_fmadd_ps(_mm256_set1_ps(a), _mm256_set1_ps(a), _mm256_set1_ps(-c))))
    EXPECT_EQ(v, tiny);
  const auto ss =
      lanes_of<float, 4>(_mm_fmadd_ss(_mm_set_ps(4, 3, 2, a), _mm_set1_ps(a), _mm_set1_ps(-c)));
  EXPECT_EQ(ss, (std::vector<float>{tiny, 2, 3, 4}));
}

// Each f32 lane adds the odd bf16 product, then the even one, each with its own rounding, and
// flushes subnormal inputs to zero: with src -1, odd 1 x 1 and even 2^-30 x 1, odd-first gives
// 2^-30 where even-first would lose it in -1 + 2^-30.
TEST(Avx512Emulation, Bf16DotAddsOddThenEvenAndFlushesSubnormals) {
  uint16_t a[32], b[32];
  float src[16];
  for (int i = 0; i < 16; ++i) {
    src[i] = -1.0f;
    a[2 * i + 1] = b[2 * i + 1] = fp32_to_bf16(1.0f);
    a[2 * i] = fp32_to_bf16(std::ldexp(1.0f, -30));
    b[2 * i] = fp32_to_bf16(1.0f);
  }
  a[0] = 0x0001;  // lane 0's even product: a subnormal weight, read as 0
  const auto out = lanes_of<float, 16>(
      _mm512_dpbf16_ps(vec_of<__m512>(src), vec_of<__m512bh>(a), vec_of<__m512bh>(b)));
  EXPECT_EQ(out[0], 0.0f);
  for (int i = 1; i < 16; ++i) EXPECT_EQ(out[i], std::ldexp(1.0f, -30)) << "lane " << i;
}

// Masked loads fill unselected lanes with zero or the source; a masked store leaves memory
// outside the mask as it was.
TEST(Avx512Emulation, MasksSelectLanes) {
  float mem[16], fill[16];
  for (int i = 0; i < 16; ++i) mem[i] = float(i + 1), fill[i] = -float(i + 1);
  const __mmask16 mask = 0x00F5;
  const auto zeroed = lanes_of<float, 16>(_mm512_maskz_loadu_ps(mask, mem));
  const auto merged = lanes_of<float, 16>(_mm512_mask_loadu_ps(vec_of<__m512>(fill), mask, mem));
  float out[16];
  for (int i = 0; i < 16; ++i) out[i] = 100.0f;
  _mm512_mask_storeu_ps(out, mask, vec_of<__m512>(fill));
  for (int i = 0; i < 16; ++i) {
    const bool on = (mask >> i) & 1;
    EXPECT_EQ(zeroed[i], on ? mem[i] : 0.0f) << i;
    EXPECT_EQ(merged[i], on ? mem[i] : fill[i]) << i;
    EXPECT_EQ(out[i], on ? fill[i] : 100.0f) << i;
  }
  int8_t bytes[64];
  for (int i = 0; i < 64; ++i) bytes[i] = int8_t(i - 32);
  const auto b = lanes_of<int8_t, 64>(_mm512_maskz_loadu_epi8(0x8000000000000001ull, bytes));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(b[i], (i == 0 || i == 63) ? bytes[i] : 0) << i;
}

// _mm512_reduce_add_ps adds lane i to lane i + 8, then i + 4, then lanes {0,1} to {2,3}, then
// lane 0 to lane 1: 2^24 and 1 placed so that this order and a left-to-right sum differ.
TEST(Avx512Emulation, ReduceAddKeepsTheTreeOrder) {
  float x[16] = {};
  x[0] = 16777216.0f;  // 2^24: adding 1 to it rounds back to 2^24
  x[8] = 1.0f;
  x[4] = 1.0f;
  x[12] = -16777216.0f;
  // The tree: lane 0 = 2^24 + 1 -> 2^24, lane 4 = 1 - 2^24 -> 1 - 2^24 (exact); then 2^24 +
  // (1 - 2^24) = 1. Left to right: 2^24 + 1 + 1 + ... - 2^24 = 0.
  EXPECT_EQ(_mm512_reduce_add_ps(vec_of<__m512>(x)), 1.0f);
  float y[16];
  for (int i = 0; i < 16; ++i) y[i] = float((i * 7) % 16) - 3.5f;
  EXPECT_EQ(_mm512_reduce_max_ps(vec_of<__m512>(y)), 11.5f);
}

// Halfway cases go to the even half: 1 + 2^-11 to 1 (0x3C00), 1 + 3 * 2^-11 to 1 + 2^-9 (0x3C02).
TEST(Avx512Emulation, HalfConversionsRoundToNearestEven) {
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = 1.0f + float(i) * std::ldexp(1.0f, -11);
  const auto h =
      lanes_of<uint16_t, 16>(_mm512_cvtps_ph(vec_of<__m512>(x), _MM_FROUND_TO_NEAREST_INT));
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0x3C00);
  EXPECT_EQ(h[2], 0x3C01);
  EXPECT_EQ(h[3], 0x3C02);
  EXPECT_EQ(h[5], 0x3C02);
  uint16_t halves[16];
  std::memcpy(halves, h.data(), sizeof(halves));
  const auto back = lanes_of<float, 16>(_mm512_cvtph_ps(vec_of<__m256i>(halves)));
  EXPECT_EQ(back[3], 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(back[2], 1.0f + std::ldexp(1.0f, -10));
}

}  // namespace
}  // namespace vela

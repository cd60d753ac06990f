// AVX-512 dot products of the float weight types: F32 x F32, F16 x F32 (vcvtph2ps, then FMA
// against the exact f32 activations) and BF16 x BF16 (vdpbf16ps when the CPU has AVX512-BF16,
// otherwise the bf16 halves widened to f32 by shifts). Rows of any length: the tail is loaded
// with a mask. Accumulation is in f32 across 16 lanes and several registers.
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"

namespace vela::kernels::avx512 {

namespace {

// Weight formats: how 16 (F32, F16) or 32 (BF16) weights decode into registers that are then
// combined with one activation row's matching chunk. kChunk elements per step.
struct F32Format {
  static constexpr int64_t kChunk = 16;
  static constexpr int64_t kBytes = 4;  // per weight
  struct Decoded {
    __m512 w;
  };
  static Decoded decode(const void* w, int64_t i, __mmask32 mask) {
    return {_mm512_maskz_loadu_ps(__mmask16(mask), static_cast<const float*>(w) + i)};
  }
  static Decoded decode(const void* w, int64_t i) {
    return {_mm512_loadu_ps(static_cast<const float*>(w) + i)};
  }
  static __m512 step(const Decoded& d, const uint8_t* a, int64_t i, __mmask32 mask, __m512 acc) {
    const auto* x = reinterpret_cast<const float*>(a) + i;
    return _mm512_fmadd_ps(d.w, _mm512_maskz_loadu_ps(__mmask16(mask), x), acc);
  }
  static __m512 step(const Decoded& d, const uint8_t* a, int64_t i, __m512 acc) {
    return _mm512_fmadd_ps(d.w, _mm512_loadu_ps(reinterpret_cast<const float*>(a) + i), acc);
  }
};

struct F16Format {
  static constexpr int64_t kChunk = 16;
  static constexpr int64_t kBytes = 2;  // per weight
  struct Decoded {
    __m512 w;
  };
  static Decoded decode(const void* w, int64_t i, __mmask32 mask) {
    const auto* h = static_cast<const uint16_t*>(w) + i;
    return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(__mmask16(mask), h))};
  }
  static Decoded decode(const void* w, int64_t i) {
    const auto* h = static_cast<const uint16_t*>(w) + i;
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)))};
  }
  static __m512 step(const Decoded& d, const uint8_t* a, int64_t i, __mmask32 mask, __m512 acc) {
    return F32Format::step({d.w}, a, i, mask, acc);
  }
  static __m512 step(const Decoded& d, const uint8_t* a, int64_t i, __m512 acc) {
    return F32Format::step({d.w}, a, i, acc);
  }
};

// bf16 pairs widened without vdpbf16ps: a bf16 is the top half of an f32, so the even elements
// are each 32-bit lane shifted left by 16 and the odd ones the lane with its low half cleared.
inline __m512 bf16_even(__m512i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 bf16_odd(__m512i v) {
  return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int32_t(0xFFFF0000u))));
}

template <bool kDpbf16>
struct BF16Format {
  static constexpr int64_t kChunk = 32;
  static constexpr int64_t kBytes = 2;  // per weight
  struct Decoded {
    __m512i raw;
    __m512 even, odd;  // only without vdpbf16ps
  };
  static Decoded finish(__m512i raw) {
    Decoded d;
    d.raw = raw;
    if constexpr (!kDpbf16) {
      d.even = bf16_even(raw);
      d.odd = bf16_odd(raw);
    }
    return d;
  }
  static Decoded decode(const void* w, int64_t i, __mmask32 mask) {
    return finish(_mm512_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(w) + i));
  }
  static Decoded decode(const void* w, int64_t i) {
    return finish(_mm512_loadu_si512(static_cast<const uint16_t*>(w) + i));
  }
  static __m512 combine(const Decoded& d, __m512i x, __m512 acc) {
    if constexpr (kDpbf16) {
      // Products of two bf16 are exact in f32; the instruction flushes subnormals.
      return _mm512_dpbf16_ps(acc, (__m512bh)d.raw, (__m512bh)x);
    } else {
      acc = _mm512_fmadd_ps(d.even, bf16_even(x), acc);
      return _mm512_fmadd_ps(d.odd, bf16_odd(x), acc);
    }
  }
  static __m512 step(const Decoded& d, const uint8_t* a, int64_t i, __mmask32 mask, __m512 acc) {
    const auto* x = reinterpret_cast<const uint16_t*>(a) + i;
    return combine(d, _mm512_maskz_loadu_epi16(mask, x), acc);
  }
  static __m512 step(const Decoded& d, const uint8_t* a, int64_t i, __m512 acc) {
    return combine(d, _mm512_loadu_si512(reinterpret_cast<const uint16_t*>(a) + i), acc);
  }
};

// Accumulator chains per activation row: enough to hide the FMA latency in the single-row case.
// The same for every tile size, so each row's sum is formed in the same order whatever tile it
// falls in: vec_dot_rows gives bit-identical results to vec_dot (batch invariance).
constexpr int kChains = 2;

// out[r * out_stride] = dot(w, activation row r) over n elements, for R rows starting at act.
// w: [n] weights of format F; act: R rows of [n] activations, act_stride bytes apart.
template <class F, int R>
void dot_tile(int64_t n, const void* w, const uint8_t* act, size_t act_stride, float* out,
              int64_t out_stride) {
  constexpr int64_t C = F::kChunk;
  constexpr int U = kChains;
  const uint8_t* a[R];
  __m512 acc[R][U];
  for (int r = 0; r < R; ++r) {
    a[r] = act + size_t(r) * act_stride;
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + U * C <= n; i += U * C) {
    prefetch_weights<U * C * F::kBytes>(static_cast<const uint8_t*>(w) + i * F::kBytes);
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const auto d = F::decode(w, i + u * C);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][u] = F::step(d, a[r], i + u * C, acc[r][u]);
    }
  }
  for (; i < n; i += C) {
    const int64_t left = n - i;
    const __mmask32 mask = left >= C ? __mmask32(~0u) : __mmask32((1u << left) - 1);
    const auto d = F::decode(w, i, mask);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = F::step(d, a[r], i, mask, acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm512_add_ps(acc[r][0], acc[r][u]);
    out[r * out_stride] = hsum(acc[r][0]);
  }
}

template <class F>
float vec_dot(int64_t n, const void* w, const void* a) {
  float out;
  dot_tile<F, 1>(n, w, static_cast<const uint8_t*>(a), 0, &out, 0);
  return out;
}

template <class F>
void vec_dot_rows(int64_t n, const void* w, const uint8_t* act, size_t act_stride, int64_t n_act,
                  float* out, int64_t out_stride) {
  for_row_tiles(n_act, [&](auto tile, int64_t r) {
    dot_tile<F, decltype(tile)::value>(n, w, act + size_t(r) * act_stride, act_stride,
                                       out + r * out_stride, out_stride);
  });
}

template <class F>
void install(TraitsTable& table, GgmlType type) {
  TypeTraits& t = table[static_cast<size_t>(type)];
  t.vec_dot = vec_dot<F>;
  t.vec_dot_rows = vec_dot_rows<F>;
}

}  // namespace

void register_float_kernels(TraitsTable& table, Avx512Extensions ext) {
  install<F32Format>(table, GgmlType::F32);
  install<F16Format>(table, GgmlType::F16);
  if (ext.bf16) {
    install<BF16Format<true>>(table, GgmlType::BF16);
  } else {
    install<BF16Format<false>>(table, GgmlType::BF16);
  }
}

}  // namespace vela::kernels::avx512

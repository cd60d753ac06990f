#pragma once
// Matrix kernels over weights repacked in 16-row interleaved groups (packed_blocks.h): int8 ones
// for Q8_0, Q4_0, Q5_0, IQ4_NL and MXFP4 weights against Q8_0 activations (IQ4_NL and MXFP4 by
// a table lookup of each nibble's level, nibble_format.h), Q4_1 and Q5_1 against Q8_1 and the K
// types and IQ4_XS (the same lookup, sub-block scales as Q6_K's) and Q3_K (levels from 2-bit
// and 1-bit planes, Q6_K's 16-element sub-blocks), Q2_K (2-bit plane, Q4_K's mins) and TQ2_0
// (Q2_K's plane, no scales) against Q8_K; float ones for F32
// and F16 weights against f32 activations and BF16 against BF16. Kernels: at the AVX-512 level VNNI
// (int8 types, any batch) and FMA / vdpbf16ps (float types; BF16 by vdpbf16ps or widened,
// Bf16Kernel), for Q8_0 / Q4_0 the AMX tile kernel (prompt processing and batched decode); at the
// AVX2 level every int8 type, and F32 / F16 / BF16 (widened). A scalar reference defines every
// result.
//
// Every kernel computes exactly the same floats, whatever the batch, the tile or the kernel:
// per (row, token) and per 32-element block the integer dot product is exact, and the row's
// float sum is the chain acc = fma(float(isum_b), d_w[b] * d_a[b], acc) over blocks in order
// (d_w * d_a is exact: two 11-bit significands; MXFP4's power of two times d_a is rounded only
// below f32's normal range, by that one multiplication in every kernel), Q4_1 / Q5_1 adding
// fma(m_w[b], s_a[b], acc) after each block; Q4_K's per-super-block sums are exact integers too,
// followed by a fixed sequence of float operations (ref/packed_gemm_ref.cpp). So a token's
// logits never depend on which other tokens share its batch, nor on whether AMX or VNNI ran
// (batch invariance). The float kernels give each output one vector lane whose fma chain runs over
// the columns in order (vdpbf16ps: the odd column of each pair first), so they too are exact
// against the reference, whatever the tile.
// Thread-safety: the kernels are pure functions; disjoint outputs may be computed concurrently.
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace vela {

struct PackedGemmArgs {
  const void* w = nullptr;       // [n_groups][n_cols / 32] BlockQ8_0x16 / BlockQ4_0x16 / ...
                                 // / BlockIQ4_NLx16 / BlockMXFP4x16,
                                 // [n_groups][n_cols / 256] BlockQ4_Kx16 / Q5_Kx16 / Q6_Kx16
                                 // / IQ4_XSx16 / Q3_Kx16 / Q2_Kx16, or
                                 // [n_groups][16 n_cols] F32 / F16 / BF16 elements
  int64_t n_groups = 0;          // groups of 16 weight rows
  int64_t n_cols = 0;            // elements per row, a multiple of interleaved16_block_cols
  const uint8_t* act = nullptr;  // n_act rows of the type's vec_dot_type (BlockQ8_0, Q8_1 for
                                 // Q4_1 / Q5_1, Q8_K for the K types, f32 for F32 / F16, bf16
                                 // for BF16), act_stride apart
  size_t act_stride = 0;
  int64_t n_act = 0;
  float* y = nullptr;  // y[t * y_stride + 16 * g + n] = dot(row 16 g + n, act row t)
  int64_t y_stride = 0;
  // The same activations in the kernel's own layout (PackedActPrep), written once by the
  // activation conversion; null: the kernel derives what it needs from act on every call.
  const void* act_prepared = nullptr;
};

using PackedGemmFn = void (*)(const PackedGemmArgs&);

// A kernel's own copy of the activation rows (say, block-major tiles), so that the conversion
// writes it once per matmul instead of every call (one per row range) deriving it again.
struct PackedActPrep {
  // Bytes of the copy of n_act rows of n_cols.
  size_t (*bytes)(int64_t n_act, int64_t n_cols) = nullptr;
  // Rows [t_begin, t_end) of the n_act activation rows at act into out; disjoint ranges may be
  // written concurrently.
  void (*write)(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t n_cols,
                int64_t t_begin, int64_t t_end, void* out) = nullptr;
};

enum class PackedKernelKind { kReference, kAvx2, kAvx512, kAmx };

// The kernel of `kind` for weights of w_type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K, IQ4_NL, MXFP4, IQ4_XS, Q3_K, Q2_K, TQ2_0; AMX: Q8_0, Q4_0), or
// nullptr when this CPU (or the process's AMX permission) lacks it or the type has no packed
// form of that kind. AMX is opt-in for now (VELA_AMX=1): it has not yet been verified on a CPU
// with tiles.
PackedGemmFn packed_gemm_kernel(PackedKernelKind kind, GgmlType w_type);

// What the engine uses: at the AVX-512 level the AVX-512 kernel below large_min_tokens tokens, AMX
// from there on (when present); at the AVX2 level the AVX2 kernel. Null `small` means no packed
// kernels at the selected kernel level: keep weights row-major.
struct PackedKernels {
  PackedGemmFn small = nullptr;
  PackedGemmFn large = nullptr;
  int64_t large_min_tokens = 0;
  PackedActPrep small_prep;  // the small kernel's activation copy; null members: none

  PackedGemmFn for_tokens(int64_t n_tokens) const {
    return large && n_tokens >= large_min_tokens ? large : small;
  }
  // The activation copy to write for a matmul of n_tokens, or nullptr.
  const PackedActPrep* prep_for_tokens(int64_t n_tokens) const {
    return small_prep.write && for_tokens(n_tokens) == small ? &small_prep : nullptr;
  }
};
const PackedKernels& active_packed_kernels(GgmlType w_type);

// How the AVX-512 kernel multiplies BF16 weights: by vdpbf16ps (AVX512-BF16), or with weights and
// activations widened to f32 for FMA, the odd column of each pair first and subnormals flushed
// (DAZ/FTZ), which gives the same floats. The engine takes vdpbf16ps where it runs at full rate
// (CpuFeatures::bf16_dot_full_rate) and the widened FMA elsewhere, even without AVX512-BF16;
// VELA_BF16_KERNEL=dot|fma forces one (benchmarks, tests).
enum class Bf16Kernel { kDot, kWidenedFma };
Bf16Kernel selected_bf16_kernel();

namespace kernels {
// Defined per instruction set; nullptr where the CPU lacks it (checked by the caller).
PackedGemmFn packed_gemm_ref(GgmlType w_type);
PackedGemmFn packed_gemm_avx2(GgmlType w_type);        // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K-Q6_K,
                                                       // IQ4_NL, MXFP4, IQ4_XS, Q3_K, Q2_K,
                                                       // TQ2_0
PackedGemmFn packed_gemm_float_avx2(GgmlType w_type);  // F32, F16, BF16 (widened)
PackedGemmFn packed_gemm_avx512_vnni(GgmlType w_type);
// F32, F16, BF16; kDot needs AVX512-BF16.
PackedGemmFn packed_gemm_float_avx512(GgmlType w_type, Bf16Kernel bf16);
PackedActPrep packed_act_prep_avx512_vnni(GgmlType w_type);
PackedGemmFn packed_gemm_amx(GgmlType w_type);
}  // namespace kernels

}  // namespace vela

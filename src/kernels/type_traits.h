#pragma once
// Per-type kernel dispatch: for each weight type, the activation type its dot product consumes
// (vec_dot_type, paired as in ggml's CPU backend) and the conversion and dot-product kernels.
// There is one table per instruction set (kernel_table.h): the scalar reference, and SIMD tables
// (x86/avx2, x86/avx512) built on top of it. type_traits() uses the level cpu_features.h selects;
// a type a SIMD table does not override keeps its scalar kernels.
// Thread-safety: the tables are immutable after static initialization; safe to use concurrently.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "quant/ggml_type.h"

namespace vela {

struct TypeTraits {
  // Type the activation row must be converted to before calling vec_dot.
  GgmlType vec_dot_type;
  // Converts [n] f32 to n elements of vec_dot_type (whole blocks).
  void (*from_float)(const float* x, void* y, int64_t n);
  // Converts n elements of this type (whole blocks) to [n] f32.
  void (*to_float)(const void* x, float* y, int64_t n);
  // sum_i w[i] * a[i] over n elements: w_row in this type, act_row in vec_dot_type. Null for
  // activation-only types (Q8_1, Q8_K), which have conversions but are never weights.
  float (*vec_dot)(int64_t n, const void* w_row, const void* act_row);
  // Optional batched form: out[t * out_stride] = vec_dot(n, w_row, act + t * act_stride) for
  // t < n_act. A kernel decodes each weight block once for all n_act activation rows, which is
  // what makes batched decode and prefill cheaper than n_act separate dots. Null = loop vec_dot.
  void (*vec_dot_rows)(int64_t n, const void* w_row, const uint8_t* act, size_t act_stride,
                       int64_t n_act, float* out, int64_t out_stride) = nullptr;
  // Optional register-tiled form for prompt processing: out[t * out_stride + r] =
  // vec_dot(n, w + r * w_stride, act + t * act_stride) for r < n_w_rows, t < n_act, each
  // bit-identical to that vec_dot (batch invariance). A kernel keeps a tile of decoded weight
  // blocks and prepared activation blocks in registers, so each is decoded once per tile rather
  // than once per pair. Null = vec_dot_rows / vec_dot.
  void (*gemm_tile)(int64_t n, const void* w, size_t w_stride, int64_t n_w_rows, const uint8_t* act,
                    size_t act_stride, int64_t n_act, float* out, int64_t out_stride) = nullptr;
};

// Kernels for `type` from the best table for this CPU; nullptr if the type is unsupported.
const TypeTraits* type_traits(GgmlType type);

// Kernels for `type` from one specific table (tests compare SIMD tables against kScalar);
// nullptr if that table does not cover the type.
const TypeTraits* type_traits_for(KernelIsa isa, GgmlType type);

// The table type_traits() uses (selected_kernel_isa()).
KernelIsa active_kernel_isa();

}  // namespace vela

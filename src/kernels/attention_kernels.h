#pragma once
// Row kernels of attention over a KV cache: the dot product of an f32 query head with one stored
// K head row, and the weighted accumulation of one stored V head row, for each KV storage type.
// One table per instruction-set level; attention picks the table once per call.
//
// Row layouts (those of kv/kv_cache.h, restated here so kernels do not depend on kv):
// - f32: n floats; f16 / bf16: n uint16 values.
// - q8_0: ceil(n / 32) blocks, each an fp16 scale (2 bytes) followed by its int8 values — 32 in
//   every block but the last, which holds the n % 32 remaining ones when n is not a multiple of
//   32 (so the row is n / 32 * 34 + (n % 32 ? 2 + n % 32 : 0) bytes). Value i of a block is
//   q[i] * scale.
// Rows are read byte-wise with no alignment and never past their last byte.
//
// Results differ between tables only in summation order (stored values convert exactly to f32),
// so a table's dot is within a few ulp of sum |q_i k_i| of the scalar reference's.
// Thread-safety: the tables are immutable; the kernels are pure functions.
#include <cstdint>

#include "kernels/cpu_features.h"

namespace vela::kernels {

// sum_i q[i] * k[i] over one stored row. q: [n]; k_row: one row of n values in the row type.
using AttnDotFn = float (*)(const float* q, const void* k_row, int n);
// acc[i] += w * v[i] over one stored row. v_row: one row of n values; acc: [n].
using AttnAxpyFn = void (*)(float w, const void* v_row, float* acc, int n);

// The same for n_rows query rows against the stored rows k_rows[p] of n_pos positions
// (1 <= n_pos <= kAttnMaxPositions; each converted once for all rows), each result
// bit-identical to the single-row kernel's, so a score never depends on which rows or positions
// share the call: out[r * out_stride + p] = dot(q + r * q_stride, k_rows[p], n) * scale.
constexpr int kAttnMaxPositions = 64;
using AttnDotRowsFn = void (*)(const float* q, int64_t q_stride, int n_rows,
                               const void* const* k_rows, int n_pos, int n, float scale, float* out,
                               int64_t out_stride);
// For the stored rows v_rows[p] of n_pos consecutive positions (1 <= n_pos <= kAttnMaxPositions)
// and r < n_rows: axpy(w[r * w_stride + p], v_rows[p], acc + r * acc_stride, n) for p = 0, 1, ...
// in that order, bit-identical to those single-row calls (each accumulator takes its positions in
// order), so grouping positions changes nothing but the memory traffic.
using AttnAxpyRowsFn = void (*)(const float* w, int64_t w_stride, int n_rows,
                                const void* const* v_rows, int n_pos, float* acc,
                                int64_t acc_stride, int n);
// x[0, n) := softmax(x) in place (max subtracted, exp, normalized by the sum); each probability
// rounded to f16 when round_f16 (the f16-KV contract of model/attention.h). SIMD tables use a
// polynomial exp within 2 ulp of std::exp.
using AttnSoftmaxFn = void (*)(float* x, int n, bool round_f16);
// An online softmax's step over one block of scores x[0, n) (n >= 1): *running_max :=
// max(*running_max, max of x), then x[i] := exp(x[i] - *running_max), returning the sum of the new
// x[i] (lane sums added in double, as the softmax's). SIMD tables use the softmax's polynomial
// exp; the maximum is exact in every table.
using AttnSoftmaxStepFn = double (*)(float* x, int n, float* running_max);
// out[i] = x[i] rounded to the nearest f16 (ties to even) and back, for i < n: the query as an f16
// KV cache's dot products see it. Exact in every table (IEEE conversion both ways).
using AttnRoundF16Fn = void (*)(const float* x, float* out, int n);

// Storage types of attention rows, in the order of the table's arrays.
enum class AttnRowType { kF32 = 0, kF16 = 1, kBF16 = 2, kQ8_0 = 3 };
constexpr int kAttnRowTypes = 4;

struct AttentionRowKernels {
  AttnDotFn dot[kAttnRowTypes];    // indexed by AttnRowType
  AttnAxpyFn axpy[kAttnRowTypes];  // indexed by AttnRowType
  AttnDotRowsFn dot_rows[kAttnRowTypes];
  AttnAxpyRowsFn axpy_rows[kAttnRowTypes];
  AttnSoftmaxFn softmax;
  AttnRoundF16Fn round_f16;
  AttnSoftmaxStepFn softmax_step;

  AttnDotFn dot_for(AttnRowType t) const { return dot[static_cast<int>(t)]; }
  AttnAxpyFn axpy_for(AttnRowType t) const { return axpy[static_cast<int>(t)]; }
  AttnDotRowsFn dot_rows_for(AttnRowType t) const { return dot_rows[static_cast<int>(t)]; }
  AttnAxpyRowsFn axpy_rows_for(AttnRowType t) const { return axpy_rows[static_cast<int>(t)]; }
};

// Per-level tables, defined in ref/attention_ref.cpp, x86/avx2/attention_avx2.cpp and
// x86/avx512/attention_avx512.cpp. A SIMD table must only be used when the CPU has its ISA.
const AttentionRowKernels& attention_row_kernels_ref();
const AttentionRowKernels& attention_row_kernels_avx2();
const AttentionRowKernels& attention_row_kernels_avx512();

// The table of one level (tests; the caller checks the CPU supports it).
inline const AttentionRowKernels& attention_row_kernels(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512:
      return attention_row_kernels_avx512();
    case KernelIsa::kAvx2:
      return attention_row_kernels_avx2();
    case KernelIsa::kScalar:
      break;
  }
  return attention_row_kernels_ref();
}

// The table of the level in use (selected_kernel_isa(), so $VELA_ISA applies).
inline const AttentionRowKernels& attention_row_kernels() {
  return attention_row_kernels(selected_kernel_isa());
}

}  // namespace vela::kernels

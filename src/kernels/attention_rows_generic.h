#pragma once
// Internal: multi-row attention kernels as loops over a table's single-row kernels (trivially
// bit-identical to them), for the levels without a dedicated multi-row form. Instantiated only
// with a file's own (internal) kernels, so no copy compiled with SIMD flags is shared.
#include "kernels/attention_kernels.h"

namespace vela::kernels {

// A multi-row kernel of one stored row: out[r * out_stride] = dot(q row r, k_row) * scale.
using AttnDotRowsOneFn = void (*)(const float* q, int64_t q_stride, int n_rows, const void* k_row,
                                  int n, float scale, float* out, int64_t out_stride);

template <AttnDotFn kDot>
void dot_rows_loop(const float* q, int64_t q_stride, int n_rows, const void* k_row, int n,
                   float scale, float* out, int64_t out_stride) {
  for (int r = 0; r < n_rows; ++r) out[r * out_stride] = kDot(q + r * q_stride, k_row, n) * scale;
}

// AttnDotRowsFn as one call of a one-row kernel per position.
template <AttnDotRowsOneFn kDotRows>
void dot_rows_each_position(const float* q, int64_t q_stride, int n_rows, const void* const* k_rows,
                            int n_pos, int n, float scale, float* out, int64_t out_stride) {
  for (int p = 0; p < n_pos; ++p)
    kDotRows(q, q_stride, n_rows, k_rows[p], n, scale, out + p, out_stride);
}

template <AttnAxpyFn kAxpy>
void axpy_rows_loop(const float* w, int64_t w_stride, int n_rows, const void* const* v_rows,
                    int n_pos, float* acc, int64_t acc_stride, int n) {
  for (int p = 0; p < n_pos; ++p)
    for (int r = 0; r < n_rows; ++r) kAxpy(w[r * w_stride + p], v_rows[p], acc + r * acc_stride, n);
}

}  // namespace vela::kernels

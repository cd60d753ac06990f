// Scalar reference of the attention row kernels (kernels/attention_kernels.h): plain loops in
// element order, the definition the SIMD tables are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_kernels.h"
#include "kernels/attention_rows_generic.h"
#include "util/half.h"

namespace vela::kernels {
namespace {

constexpr int kQ8Block = 32;       // values per q8_0 block
constexpr int kQ8BlockBytes = 34;  // fp16 scale + 32 int8

float dot_f32(const float* q, const void* k_row, int n) {
  const auto* k = static_cast<const float*>(k_row);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += q[i] * k[i];
  return sum;
}

float dot_f16(const float* q, const void* k_row, int n) {
  const auto* k = static_cast<const uint16_t*>(k_row);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += q[i] * fp16_to_fp32(k[i]);
  return sum;
}

float dot_bf16(const float* q, const void* k_row, int n) {
  const auto* k = static_cast<const uint16_t*>(k_row);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += q[i] * bf16_to_fp32(k[i]);
  return sum;
}

// Scale of the q8_0 block at p.
float q8_scale(const uint8_t* p) {
  uint16_t d;
  std::memcpy(&d, p, sizeof d);
  return fp16_to_fp32(d);
}

float dot_q8_0(const float* q, const void* k_row, int n) {
  const auto* p = static_cast<const uint8_t*>(k_row);
  float sum = 0.0f;
  for (int i0 = 0; i0 < n; i0 += kQ8Block, p += kQ8BlockBytes) {
    const float d = q8_scale(p);
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    const int len = std::min(kQ8Block, n - i0);
    for (int i = 0; i < len; ++i) sum += q[i0 + i] * (float(qs[i]) * d);
  }
  return sum;
}

void axpy_f32(float w, const void* v_row, float* acc, int n) {
  const auto* v = static_cast<const float*>(v_row);
  for (int i = 0; i < n; ++i) acc[i] += w * v[i];
}

void axpy_f16(float w, const void* v_row, float* acc, int n) {
  const auto* v = static_cast<const uint16_t*>(v_row);
  for (int i = 0; i < n; ++i) acc[i] += w * fp16_to_fp32(v[i]);
}

void axpy_bf16(float w, const void* v_row, float* acc, int n) {
  const auto* v = static_cast<const uint16_t*>(v_row);
  for (int i = 0; i < n; ++i) acc[i] += w * bf16_to_fp32(v[i]);
}

void axpy_q8_0(float w, const void* v_row, float* acc, int n) {
  const auto* p = static_cast<const uint8_t*>(v_row);
  for (int i0 = 0; i0 < n; i0 += kQ8Block, p += kQ8BlockBytes) {
    const float d = q8_scale(p);
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    const int len = std::min(kQ8Block, n - i0);
    for (int i = 0; i < len; ++i) acc[i0 + i] += w * (float(qs[i]) * d);
  }
}

// std::exp per element, the sum in double (long contexts sum many small terms).
void softmax_ref(float* x, int n, bool round_f16) {
  float max_score = -INFINITY;
  for (int j = 0; j < n; ++j) max_score = std::max(max_score, x[j]);
  double sum = 0.0;
  for (int j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - max_score);
    sum += x[j];
  }
  const float inv_sum = float(1.0 / sum);
  for (int j = 0; j < n; ++j) {
    const float w = x[j] * inv_sum;
    x[j] = round_f16 ? fp16_to_fp32(fp32_to_fp16(w)) : w;
  }
}

double softmax_step_ref(float* x, int n, float* running_max) {
  for (int j = 0; j < n; ++j) *running_max = std::max(*running_max, x[j]);
  const float shift = *running_max;
  double sum = 0.0;
  for (int j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - shift);
    sum += x[j];
  }
  return sum;
}

void round_f16_ref(const float* x, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_ref() {
  static const AttentionRowKernels table = {{dot_f32, dot_f16, dot_bf16, dot_q8_0},
                                            {axpy_f32, axpy_f16, axpy_bf16, axpy_q8_0},
                                            {dot_rows_each_position<dot_rows_loop<dot_f32>>,
                                             dot_rows_each_position<dot_rows_loop<dot_f16>>,
                                             dot_rows_each_position<dot_rows_loop<dot_bf16>>,
                                             dot_rows_each_position<dot_rows_loop<dot_q8_0>>},
                                            {axpy_rows_loop<axpy_f32>, axpy_rows_loop<axpy_f16>,
                                             axpy_rows_loop<axpy_bf16>, axpy_rows_loop<axpy_q8_0>},
                                            softmax_ref,
                                            round_f16_ref,
                                            softmax_step_ref};
  return table;
}

}  // namespace vela::kernels

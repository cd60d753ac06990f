#pragma once
// Internal: the loop source of the sampling kernels (sampling_kernels.h), included by one file
// per instruction-set level, each built with its own vector flags and -ffp-contract=off. The
// loops keep kLanes independent float accumulators so compilers vectorise them without
// -ffast-math; the order of every addition is fixed by the source, not by the vector width,
// which is what makes the levels bit-identical. Internal linkage, for the reason given in
// exp_approx.h.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>

#include "kernels/exp_approx.h"
#include "kernels/sampling_kernels.h"

namespace vela::kernels {
namespace {

constexpr size_t kSamplingLanes = 16;  // independent accumulators: covers up to AVX-512 width

// Stride as a template argument for the common cases (1: a logits row; 2: the logit field of
// {float, int32} candidates), so those loops vectorise; 0 means "use the run-time stride".
template <size_t kStride>
float max_value_loop(const float* x, size_t n, size_t run_time_stride) {
  const size_t stride = kStride != 0 ? kStride : run_time_stride;
  float lanes[kSamplingLanes];
  std::fill(std::begin(lanes), std::end(lanes), -std::numeric_limits<float>::infinity());
  const size_t n_full = n - n % kSamplingLanes;
  for (size_t i = 0; i < n_full; i += kSamplingLanes) {
    for (size_t j = 0; j < kSamplingLanes; ++j) {
      const float v = x[(i + j) * stride];
      lanes[j] = std::max(lanes[j], v);
    }
  }
  for (size_t i = n_full; i < n; ++i)
    lanes[0] = x[i * stride] > lanes[0] ? x[i * stride] : lanes[0];
  return *std::max_element(std::begin(lanes), std::end(lanes));
}

template <size_t kStride>
double sum_exp_loop(const float* x, size_t n, size_t run_time_stride, float shift) {
  const size_t stride = kStride != 0 ? kStride : run_time_stride;
  double total = 0.0;
  for (size_t begin = 0; begin < n; begin += kSamplingSumBlock) {
    const size_t end = std::min(n, begin + kSamplingSumBlock);
    const size_t full_end = end - (end - begin) % kSamplingLanes;
    float lanes[kSamplingLanes] = {};
    for (size_t i = begin; i < full_end; i += kSamplingLanes) {
      for (size_t j = 0; j < kSamplingLanes; ++j) {
        lanes[j] += exp_approx(x[(i + j) * stride] - shift);
      }
    }
    for (size_t i = full_end; i < end; ++i) lanes[0] += exp_approx(x[i * stride] - shift);
    double block_total = 0.0;
    for (const float lane : lanes) block_total += lane;
    total += block_total;
  }
  return total;
}

float max_value_strided(const float* x, size_t n, size_t stride) {
  if (stride == 1) return max_value_loop<1>(x, n, 1);
  if (stride == 2) return max_value_loop<2>(x, n, 2);
  return max_value_loop<0>(x, n, stride);
}

double sum_exp_strided(const float* x, size_t n, size_t stride, float shift) {
  if (stride == 1) return sum_exp_loop<1>(x, n, 1, shift);
  if (stride == 2) return sum_exp_loop<2>(x, n, 2, shift);
  return sum_exp_loop<0>(x, n, stride, shift);
}

double exp_weights_loop(float* x, size_t n, float shift, float threshold, double* block_sums) {
  double total = 0.0;
  for (size_t begin = 0, block = 0; begin < n; begin += kSamplingSumBlock, ++block) {
    const size_t end = std::min(n, begin + kSamplingSumBlock);
    const size_t full_end = end - (end - begin) % kSamplingLanes;
    float lanes[kSamplingLanes] = {};
    for (size_t i = begin; i < full_end; i += kSamplingLanes) {
      for (size_t j = 0; j < kSamplingLanes; ++j) {
        const float weight = x[i + j] >= threshold ? exp_approx(x[i + j] - shift) : 0.0f;
        x[i + j] = weight;
        lanes[j] += weight;
      }
    }
    for (size_t i = full_end; i < end; ++i) {
      x[i] = x[i] >= threshold ? exp_approx(x[i] - shift) : 0.0f;
      lanes[0] += x[i];
    }
    double block_total = 0.0;
    for (const float lane : lanes) block_total += lane;
    block_sums[block] = block_total;
    total += block_total;
  }
  return total;
}

constexpr SamplingKernels kSamplingKernelsThisLevel = {max_value_strided, sum_exp_strided,
                                                       exp_weights_loop};

}  // namespace
}  // namespace vela::kernels

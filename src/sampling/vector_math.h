#pragma once
// Whole-vocabulary loops of the sampler (max, argmax, sums of exponentials, weighted draw). The
// loops over every logit run through the kernels' run-time dispatch (kernels/sampling_kernels.h),
// which gives the same bits on every instruction-set level.
// Free functions without state: safe from any thread.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/exp_approx.h"
#include "kernels/sampling_kernels.h"

namespace vela::sampling {

using kernels::exp_approx;

// Block size of the sums and of draw_weighted's block_sums.
inline constexpr size_t kSumBlock = kernels::kSamplingSumBlock;

// Largest element; -inf for an empty span. x: [n], no NaN.
float max_value(std::span<const float> x);

// Index of the largest element, the lowest index among ties; 0 for an empty span. x: [n], no NaN.
int32_t argmax(std::span<const float> x);

// sum_i exp(x_i - shift). x: [n], no NaN; shift: usually max_value(x), so every term is <= 1.
double sum_exp(std::span<const float> x, float shift);

// Turns x into unnormalised probabilities in place: x_i <- exp(x_i - shift) if x_i >= threshold,
// else 0. Writes the sum of each kSumBlock-element block to block_sums and returns the total.
// x: [n]; block_sums: [ceil(n / kSumBlock)].
double exp_weights_in_place(std::span<float> x, float shift, float threshold,
                            std::span<double> block_sums);

// Index i drawn with probability weights_i / total, for target = u * total with u uniform in
// [0, 1): the first i whose cumulative weight exceeds target. Skips whole blocks by their sums,
// so it reads only one block of weights. Never returns an index of zero weight when any weight
// is positive. weights, block_sums: as left by exp_weights_in_place.
size_t draw_weighted(std::span<const float> weights, std::span<const double> block_sums,
                     double target);

}  // namespace vela::sampling

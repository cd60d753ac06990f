#include "sampling/vector_math.h"

#include <algorithm>

namespace vela::sampling {

float max_value(std::span<const float> x) {
  return kernels::sampling_kernels().max_value(x.data(), x.size(), 1);
}

int32_t argmax(std::span<const float> x) {
  if (x.empty()) return 0;
  const float best = max_value(x);
  // First occurrence: the lowest index among ties.
  return static_cast<int32_t>(std::find(x.begin(), x.end(), best) - x.begin());
}

double sum_exp(std::span<const float> x, float shift) {
  return kernels::sampling_kernels().sum_exp(x.data(), x.size(), 1, shift);
}

double exp_weights_in_place(std::span<float> x, float shift, float threshold,
                            std::span<double> block_sums) {
  return kernels::sampling_kernels().exp_weights(x.data(), x.size(), shift, threshold,
                                                 block_sums.data());
}

size_t draw_weighted(std::span<const float> weights, std::span<const double> block_sums,
                     double target) {
  // Find the block holding the target, then walk inside it.
  size_t block = 0;
  while (block + 1 < block_sums.size() && !(target < block_sums[block])) {
    target -= block_sums[block];
    ++block;
  }
  size_t begin = block * kSumBlock;
  size_t end = std::min(weights.size(), begin + kSumBlock);
  // Block sums and the walk round differently; if rounding left the target past this block's
  // last positive weight, that weight is the draw. A block of zero weight (only possible by
  // rounding at its edge) falls back to the last positive weight anywhere before it.
  double cumulative = 0.0;
  size_t last_positive = weights.size();
  for (size_t i = begin; i < end; ++i) {
    if (weights[i] <= 0.0f) continue;
    cumulative += weights[i];
    last_positive = i;
    if (target < cumulative) return i;
  }
  if (last_positive != weights.size()) return last_positive;
  for (size_t i = end; i-- > 0;) {
    if (weights[i] > 0.0f) return i;
  }
  for (size_t i = end; i < weights.size(); ++i) {
    if (weights[i] > 0.0f) return i;
  }
  return 0;
}

}  // namespace vela::sampling

#include "sampling/vector_math.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace vela::sampling {
namespace {

constexpr size_t kLanes = 16;  // independent accumulators: covers up to AVX-512 width

}  // namespace

VELA_VECTOR_CLONES float max_value(std::span<const float> x) {
  float lanes[kLanes];
  std::fill(std::begin(lanes), std::end(lanes), -std::numeric_limits<float>::infinity());
  const size_t n_full = x.size() - x.size() % kLanes;
  for (size_t i = 0; i < n_full; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  }
  for (size_t i = n_full; i < x.size(); ++i) lanes[0] = x[i] > lanes[0] ? x[i] : lanes[0];
  return *std::max_element(std::begin(lanes), std::end(lanes));
}

int32_t argmax(std::span<const float> x) {
  if (x.empty()) return 0;
  const float best = max_value(x);
  // First occurrence: the lowest index among ties.
  return static_cast<int32_t>(std::find(x.begin(), x.end(), best) - x.begin());
}

VELA_VECTOR_CLONES double sum_exp(std::span<const float> x, float shift) {
  double total = 0.0;
  for (size_t begin = 0; begin < x.size(); begin += kSumBlock) {
    const size_t end = std::min(x.size(), begin + kSumBlock);
    const size_t full_end = end - (end - begin) % kLanes;
    float lanes[kLanes] = {};
    for (size_t i = begin; i < full_end; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) lanes[j] += exp_approx(x[i + j] - shift);
    }
    for (size_t i = full_end; i < end; ++i) lanes[0] += exp_approx(x[i] - shift);
    double block_total = 0.0;
    for (const float lane : lanes) block_total += lane;
    total += block_total;
  }
  return total;
}

VELA_VECTOR_CLONES double exp_weights_in_place(std::span<float> x, float shift, float threshold,
                                               std::span<double> block_sums) {
  double total = 0.0;
  for (size_t begin = 0, block = 0; begin < x.size(); begin += kSumBlock, ++block) {
    const size_t end = std::min(x.size(), begin + kSumBlock);
    const size_t full_end = end - (end - begin) % kLanes;
    float lanes[kLanes] = {};
    for (size_t i = begin; i < full_end; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
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

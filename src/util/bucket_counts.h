#pragma once
// A histogram with fixed bucket bounds, as plain counters: cheap to update on a hot path and to
// copy into a snapshot that metrics render. Upper bounds are inclusive, as Prometheus'
// `le`; one more bucket past the last bound holds the rest.
// Thread-safety: a value type; not synchronised.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace vela {

template <size_t N>
struct BucketCounts {
  std::array<uint64_t, N + 1> counts{};  // per bucket, not cumulative
  double sum = 0;
  uint64_t count = 0;

  void observe(const std::array<double, N>& bounds, double value) {
    const size_t i = size_t(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
    ++counts[i];
    sum += value;
    ++count;
  }
};

}  // namespace vela

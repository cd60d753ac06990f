#include "sampling/candidate_filters.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include "sampling/vector_math.h"

namespace vela::sampling {

namespace {

// more_likely as a function object: std algorithms inline it, unlike a function pointer.
constexpr auto kMoreLikely = [](const Candidate& a, const Candidate& b) {
  return more_likely(a, b);
};

// Candidates top-p examines by heap selection before switching to buckets.
constexpr size_t kTopPHead = 256;

// Bound for picking heap selection over nth_element (see select_most_likely).
constexpr size_t kHeapSelectRatio = 16;

// Moves the `count` most likely of `candidates` to its front, most likely first if `sorted`.
// Heap selection (partial_sort) rejects most candidates with one comparison against the heap
// top, so it is several times faster than nth_element when count << n (the usual top-k of
// 20-100 out of 150k); nth_element is O(n) whatever the count and wins for large counts.
void select_most_likely(std::span<Candidate> candidates, size_t count, bool sorted) {
  const auto middle = candidates.begin() + static_cast<ptrdiff_t>(count);
  if (count <= candidates.size() / kHeapSelectRatio) {
    std::partial_sort(candidates.begin(), middle, candidates.end(), kMoreLikely);
    return;
  }
  if (middle != candidates.end()) {
    std::nth_element(candidates.begin(), middle, candidates.end(), kMoreLikely);
  }
  if (sorted) std::sort(candidates.begin(), middle, kMoreLikely);
}

// sum_i exp(logit_i - shift) over candidates, read in place as floats two apart (the logit
// field of each {logit, token} pair).
double sum_exp(std::span<const Candidate> candidates, float shift) {
  static_assert(sizeof(Candidate) == 2 * sizeof(float) && offsetof(Candidate, logit) == 0);
  const float* logits = reinterpret_cast<const float*>(candidates.data());
  return kernels::sampling_kernels().sum_exp(logits, candidates.size(), 2, shift);
}

// The nucleus of a flat distribution can hold thousands of candidates; rather than sorting
// them, bucket candidates by logit (kBucketsPerNat buckets per unit below the max), find the
// bucket where the cumulative mass crosses the target, and sort only that bucket.
constexpr float kBucketsPerNat = 32.0f;
constexpr size_t kBuckets = 24 * 32 + 1;  // 24 nats (weights down to ~4e-11), then a catch-all

size_t bucket_of(float logit, float max_logit) {
  const float position = (max_logit - logit) * kBucketsPerNat;  // >= 0; +inf for -inf logits
  return position < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(position) : kBuckets - 1;
}

// Keeps the fewest most likely candidates whose mass reaches target_mass (masses relative to
// max_logit); returns their count, moved to the front in unspecified order. candidates: [n].
size_t keep_mass_by_buckets(std::span<Candidate> candidates, double target_mass, float max_logit) {
  std::array<double, kBuckets> bucket_mass{};
  for (const Candidate& c : candidates) {
    bucket_mass[bucket_of(c.logit, max_logit)] += exp_approx(c.logit - max_logit);
  }
  // Buckets are ordered most likely first: accumulate until the target falls inside one.
  double mass_before = 0.0;
  size_t cut_bucket = 0;
  while (cut_bucket < kBuckets && mass_before + bucket_mass[cut_bucket] < target_mass) {
    mass_before += bucket_mass[cut_bucket];
    ++cut_bucket;
  }
  if (cut_bucket == kBuckets) return candidates.size();  // rounding: keep everything

  // Two partitions: first drop everything below the cut bucket (usually most candidates), then
  // split the survivors into the surely-kept buckets and the cut bucket.
  const auto cut_end = std::partition(
      candidates.begin(), candidates.end(),
      [&](const Candidate& c) { return bucket_of(c.logit, max_logit) <= cut_bucket; });
  const auto above_cut = std::partition(candidates.begin(), cut_end, [&](const Candidate& c) {
    return bucket_of(c.logit, max_logit) < cut_bucket;
  });
  std::sort(above_cut, cut_end, kMoreLikely);
  double mass = mass_before;
  for (auto it = above_cut; it != cut_end; ++it) {
    mass += exp_approx(it->logit - max_logit);
    if (mass >= target_mass) return static_cast<size_t>(it - candidates.begin()) + 1;
  }
  return static_cast<size_t>(cut_end - candidates.begin());  // rounding: the whole bucket
}

}  // namespace

size_t keep_top_k(std::span<Candidate> candidates, int32_t k) {
  const size_t n = candidates.size();
  if (k <= 0 || static_cast<size_t>(k) >= n) return n;
  select_most_likely(candidates, static_cast<size_t>(k), /*sorted=*/false);
  return static_cast<size_t>(k);
}

size_t keep_top_p(std::span<Candidate> candidates, float top_p, float max_logit) {
  const size_t n = candidates.size();
  if (top_p >= 1.0f || n <= 1) return n;

  // Masses are relative to the max, which keeps exp() in range.
  const double target_mass = static_cast<double>(top_p) * sum_exp(candidates, max_logit);

  // Fast path: peaked distributions (the common case) reach the mass within a few dozen
  // candidates, found by a cheap heap selection.
  const size_t head = std::min(n, kTopPHead);
  select_most_likely(candidates, head, /*sorted=*/true);
  double mass = 0.0;
  for (size_t i = 0; i < head; ++i) {
    mass += exp_approx(candidates[i].logit - max_logit);
    if (mass >= target_mass) return i + 1;
  }
  if (head == n) return n;  // rounding left the full mass a hair under target: keep everything
  // Flat distribution: find the cut among the rest in O(n) by buckets.
  return head + keep_mass_by_buckets(candidates.subspan(head), target_mass - mass, max_logit);
}

size_t keep_min_p(std::span<Candidate> candidates, float min_p, float max_logit) {
  if (min_p <= 0.0f) return candidates.size();
  // p_i >= min_p * p_max  <=>  logit_i - max_logit >= log(min_p): no softmax needed.
  const float threshold = max_logit + std::log(min_p);
  // Stable in-place compaction (std::stable_partition may allocate).
  size_t kept = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].logit >= threshold) candidates[kept++] = candidates[i];
  }
  return kept;
}

}  // namespace vela::sampling

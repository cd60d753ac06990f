#pragma once
// Truncation filters of the sampling pipeline (top-k, top-p, min-p) over a candidate array.
// Each filter reorders the array in place so that the kept candidates come first and returns
// how many were kept (what lies past that count is unspecified). Nothing here sorts the whole
// vocabulary (vocabularies reach 150k+): filters select with partial_sort / nth_element /
// bucketing, touching only as many candidates as they need.
// Free functions without state: safe to call from any thread on distinct arrays.
#include <cstddef>
#include <cstdint>
#include <span>

namespace vela::sampling {

// One token still eligible for sampling, with its (penalised, temperature-scaled) logit.
struct Candidate {
  float logit;
  int32_t token;
};

// Strict total order "a is more likely than b": higher logit first, ties to the lower token id,
// so every filter keeps a deterministic set even when logits tie.
inline bool more_likely(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.token < b.token;
}

// Keeps the k most likely candidates in candidates[0, k) (in unspecified order); returns the
// kept count, min(k, size). k <= 0 keeps everything. candidates: [n] with n >= 1.
size_t keep_top_k(std::span<Candidate> candidates, int32_t k);

// Keeps the fewest most likely candidates whose probability mass reaches top_p (the mass of the
// kept candidates other than the least likely one is < top_p, as vLLM's nucleus), moved to the
// front in unspecified order. Probabilities are the softmax over `candidates` only (i.e.
// renormalised after earlier filters). max_logit: the largest logit in `candidates` (finite).
// Never sorts everything: a heap selection of the top 256 settles peaked distributions; flat
// ones are cut in O(n) by bucketing logits and sorting only the bucket holding the boundary.
// top_p >= 1 keeps everything (and reorders nothing). candidates: [n], n >= 1.
size_t keep_top_p(std::span<Candidate> candidates, float top_p, float max_logit);

// Keeps candidates whose probability is at least min_p times the largest one, i.e. whose logit
// is >= max_logit + log(min_p), in their input order.
// min_p <= 0 keeps everything. max_logit: the largest logit in `candidates`. candidates: [n].
size_t keep_min_p(std::span<Candidate> candidates, float min_p, float max_logit);

}  // namespace vela::sampling

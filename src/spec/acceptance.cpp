#include "spec/acceptance.h"

#include <cassert>

namespace vela {

RowVerdict verify_point_proposal(Sampler& sampler, std::span<const float> logits,
                                 int32_t proposal) {
  RowVerdict v;
  v.token = sampler.sample(logits);
  v.accepted = v.token.token == proposal;
  return v;
}

RowVerdict verify_sampled_proposal(Sampler& sampler, std::span<const float> logits,
                                   int32_t proposal, std::span<const float> q,
                                   std::span<float> work) {
  assert(q.size() == logits.size() && work.size() == logits.size());
  std::span<float> p = work;
  sampler.target_probabilities(logits, p);
  const double px = p[size_t(proposal)], qx = q[size_t(proposal)];
  RowVerdict v;
  // u < p/q, written without dividing (q = 0 cannot propose; treat it as certain acceptance
  // only when p > 0).
  if (sampler.uniform() * qx < px) {
    v.token = sampler.describe(logits, proposal);
    v.accepted = true;
    return v;
  }
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const float r = p[i] - q[i];
    p[i] = r > 0.0f ? r : 0.0f;
    total += p[i];
  }
  int32_t token = 0;
  if (total > 0) {
    const double target = sampler.uniform() * total;
    double cumulative = 0;
    int32_t last_positive = -1;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] <= 0.0f) continue;
      cumulative += p[i];
      last_positive = int32_t(i);
      if (target < cumulative) break;
    }
    token = last_positive;
  } else {
    // p == q up to rounding: rejection was a rounding artefact; the proposal is p's draw.
    token = proposal;
  }
  v.token = sampler.describe(logits, token);
  v.accepted = token == proposal;
  return v;
}

RunResult verify_run(Sampler& sampler, std::span<float> rows, std::span<const int32_t> proposals,
                     std::span<const float> q, std::span<float> work, const RowProcessor& process,
                     const TokenSink& emit, int32_t refused) {
  const size_t n_vocab = size_t(sampler.n_vocab());
  assert(rows.size() == (proposals.size() + 1) * n_vocab);
  assert(q.empty() || q.size() == (proposals.size() + (refused >= 0 ? 1 : 0)) * n_vocab);
  assert(refused < 0 || !q.empty());
  RunResult result;
  for (size_t j = 0; j <= proposals.size(); ++j) {
    std::span<float> row = rows.subspan(j * n_vocab, n_vocab);
    if (process) process(row);
    // The last row's proposal is the refused one, if any; else its draw is the bonus token.
    const int32_t proposal = j < proposals.size() ? proposals[j] : refused;
    if (j == proposals.size() && refused >= 0) {
      // Never the token (the grammar rules it out): a draw from the residual.
      const RowVerdict v =
          verify_sampled_proposal(sampler, row, proposal, q.subspan(j * n_vocab, n_vocab), work);
      ++result.n_emitted;
      result.ended = !emit(v.token);
      break;
    }
    const RowVerdict v = q.empty() || proposal < 0
                             ? verify_point_proposal(sampler, row, proposal)
                             : verify_sampled_proposal(sampler, row, proposal,
                                                       q.subspan(j * n_vocab, n_vocab), work);
    ++result.n_emitted;
    if (!emit(v.token)) {
      result.ended = true;
      result.n_accepted += v.accepted;
      break;
    }
    if (!v.accepted) break;
    ++result.n_accepted;
  }
  return result;
}

}  // namespace vela

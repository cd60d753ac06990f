#include "spec/speculation_policy.h"

#include <algorithm>
#include <cmath>

namespace vela {

void AcceptanceEstimate::observe(int32_t n_accepted, int32_t n_tested) {
  accepted = accepted * decay + n_accepted;
  tested = tested * decay + n_tested;
  tested_ever += n_tested;
}

double AcceptanceEstimate::rate(double prior) const {
  return (accepted + prior * prior_tokens) / (tested + prior_tokens);
}

double AcceptanceEstimate::optimistic_rate(double prior) const {
  const double mean = rate(prior);
  const double sd = std::sqrt(mean * (1 - mean) / (tested_ever + prior_tokens + 1));
  return std::min(1.0, mean + kExploration * sd);
}

bool SpeculationPolicy::model_knows_token_cost() const {
  // The per-token coefficient means something only once steps with different token counts
  // were seen.
  return cost_.steps_observed() >= 8 && cost_.decode_token_spread() >= kMinDecodeSpread;
}

double SpeculationPolicy::step_seconds(const StepShape& shape, int32_t draft_passes) const {
  const double draft = draft_pass_seconds_ * draft_passes;
  if (token_cost_known_) return cost_.predict_seconds(shape) + draft;
  return reference_seconds_ *
             (1.0 + token_cost_share_ * std::max(0, shape.tokens() - base_tokens_)) +
         draft;
}

void SpeculationPolicy::begin_step(const StepShape& decodes, double last_step_seconds,
                                   double draft_pass_seconds, int32_t free_proposals) {
  shape_ = decodes;
  base_tokens_ = decodes.tokens();
  reference_seconds_ = last_step_seconds > 0 ? last_step_seconds : 1.0;
  draft_pass_seconds_ = draft_pass_seconds;
  free_proposals_ = free_proposals;
  draft_passes_ = 0;
  expected_tokens_ = decodes.decode_tokens;
  token_cost_known_ = adaptive_ && model_knows_token_cost();
  if (token_cost_known_) {
    const double base = cost_.predict_seconds(decodes);
    if (base > 0) token_cost_share_ = cost_.coefficients()[1] / base;
    token_cost_measured_ = true;
  }
  plain_step_ = adaptive_ && granted_in_step_ && !token_cost_measured_;
  granted_in_step_ = false;
}

void SpeculationPolicy::grant(int32_t position, int32_t k, double expected_gain) {
  shape_.add(position + 1, k, true);
  draft_passes_ = std::max(draft_passes_, k - free_proposals_);
  expected_tokens_ += expected_gain;
  granted_in_step_ = true;
  ever_granted_ = true;
}

int32_t SpeculationPolicy::probe(int32_t position) {
  grant(position, 1, 0);
  return 1;
}

int32_t SpeculationPolicy::choose(int32_t position, int32_t max_k, double acceptance,
                                  double upfront_seconds, int32_t remaining_tokens) {
  if (max_k <= 0) return 0;
  if (!adaptive_) {
    grant(position, max_k, 0);
    return max_k;
  }
  if (plain_step_) return 0;
  const double base_seconds = step_seconds(shape_, draft_passes_);
  double best_rate = base_seconds > 0 ? expected_tokens_ / base_seconds : 0;
  int32_t best_k = 0;
  double best_gain = 0;
  double gain = 0, a_pow = 1;
  for (int32_t k = 1; k <= max_k; ++k) {
    a_pow *= acceptance;
    gain += a_pow;
    StepShape s = shape_;
    s.add(position + 1, k, true);
    const double seconds = step_seconds(s, std::max(draft_passes_, k - free_proposals_));
    if (seconds <= 0) continue;
    const double rate = (expected_tokens_ + gain) / seconds;
    if (rate > best_rate) {
      best_rate = rate;
      best_k = k;
      best_gain = gain;
    }
  }
  // Seconds per token saved, times the tokens left, against the one-off cost.
  const double base_rate = base_seconds > 0 ? expected_tokens_ / base_seconds : 0;
  if (best_k > 0 && upfront_seconds > 0 &&
      !(base_rate > 0 && remaining_tokens * (1.0 / base_rate - 1.0 / best_rate) > upfront_seconds))
    best_k = 0;
  if (best_k > 0) grant(position, best_k, best_gain);
  return best_k;
}

}  // namespace vela

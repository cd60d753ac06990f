#include "sampling/penalty_tracker.h"

#include <iterator>

namespace vela::sampling {

PenaltyTracker::PenaltyTracker(float repetition_penalty, float presence_penalty,
                               float frequency_penalty)
    : repetition_penalty_(repetition_penalty),
      presence_penalty_(presence_penalty),
      frequency_penalty_(frequency_penalty),
      enabled_(repetition_penalty != 1.0f || presence_penalty != 0.0f ||
               frequency_penalty != 0.0f) {}

void PenaltyTracker::set_prompt(std::span<const int32_t> prompt_tokens) {
  if (!enabled_) return;
  // Forget the previous prompt, keeping generated-token counts.
  for (auto it = seen_.begin(); it != seen_.end();) {
    it->second.in_prompt = false;
    it = it->second.output_count == 0 ? seen_.erase(it) : std::next(it);
  }
  // Only the repetition penalty looks at the prompt; skip building the map otherwise.
  if (repetition_penalty_ == 1.0f) return;
  for (const int32_t token : prompt_tokens) seen_[token].in_prompt = true;
}

void PenaltyTracker::add_output(int32_t token) {
  if (!enabled_) return;
  ++seen_[token].output_count;
}

void PenaltyTracker::remove_output(int32_t token) {
  if (!enabled_) return;
  const auto it = seen_.find(token);
  if (it == seen_.end() || it->second.output_count == 0) return;
  if (--it->second.output_count == 0 && !it->second.in_prompt) seen_.erase(it);
}

void PenaltyTracker::apply(std::span<float> logits) const {
  if (!enabled_) return;
  for (const auto& [token, occurrence] : seen_) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    float logit = logits[token];
    // Every tracked token was seen in the prompt or the output, so repetition applies to all.
    if (repetition_penalty_ != 1.0f) {
      logit = logit > 0.0f ? logit / repetition_penalty_ : logit * repetition_penalty_;
    }
    const int32_t count = occurrence.output_count;
    if (count > 0) {
      logit -= frequency_penalty_ * static_cast<float>(count);
      logit -= presence_penalty_;
    }
    logits[token] = logit;
  }
}

}  // namespace vela::sampling

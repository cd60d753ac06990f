#pragma once
// Tracks which tokens a request has seen, for vLLM-style penalties:
//   repetition (prompt + generated tokens): logit / penalty if logit > 0, else logit * penalty;
//   frequency (generated tokens only): logit -= frequency_penalty * count;
//   presence (generated tokens only): logit -= presence_penalty once if count > 0.
// Applied in that order. Counts live in a sparse map keyed by token, so applying costs
// O(distinct tokens seen), not O(vocab) or O(history), per sampled token.
// Thread-safety: not thread-safe; owned by one request's Sampler.
#include <cstdint>
#include <span>
#include <unordered_map>

namespace vela::sampling {

class PenaltyTracker {
 public:
  PenaltyTracker(float repetition_penalty, float presence_penalty, float frequency_penalty);

  // False when every penalty is neutral: then nothing is recorded and apply() is a no-op.
  bool enabled() const { return enabled_; }

  // Replaces the prompt tokens (they count for the repetition penalty only).
  void set_prompt(std::span<const int32_t> prompt_tokens);
  // Records one generated token.
  void add_output(int32_t token);
  // Undoes one add_output(token) (a speculative draft's proposal that is not kept).
  void remove_output(int32_t token);

  // Penalises logits in place. logits: [n_vocab]; tokens outside it are ignored.
  void apply(std::span<float> logits) const;

 private:
  struct Occurrence {
    int32_t output_count = 0;
    bool in_prompt = false;
  };

  float repetition_penalty_;
  float presence_penalty_;
  float frequency_penalty_;
  bool enabled_;
  std::unordered_map<int32_t, Occurrence> seen_;  // token -> occurrences
};

}  // namespace vela::sampling

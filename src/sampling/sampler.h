#pragma once
// Picks the next token from a model's logits, following vLLM's sampler:
//   penalties (repetition on prompt + output, presence/frequency on output)
//   -> stop_token_ids masked while fewer than min_tokens were generated
//   -> temperature -> top-k -> top-p -> min-p -> draw from the renormalised distribution.
// temperature < kGreedyTemperature means greedy argmax of the penalised logits (ties go to the
// lowest token id); the truncation filters are then ignored.
// Reported logprobs are the log-softmax of the *raw* logits (vLLM's default), independent of
// penalties and temperature.
// Thread-safety: not thread-safe; one request's sampler is used by one thread at a time.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sampling/candidate_filters.h"
#include "sampling/penalty_tracker.h"
#include "util/result.h"
#include "vela/sampling_params.h"

namespace vela {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampledToken {
  int32_t token;
  float logprob;                  // log-softmax of the raw logits at `token`
  std::vector<TokenLogprob> top;  // the *params.logprobs most likely tokens (raw logits),
                                  // sorted by descending logprob; empty unless requested
};

class Sampler {
 public:
  // Below this temperature sampling is greedy (vLLM's epsilon).
  static constexpr float kGreedyTemperature = 1e-5f;
  // Upper bound of SamplingParams::logprobs.
  static constexpr int32_t kMaxLogprobs = 20;

  // Checks every field of `params`; the message names the offending parameter.
  static Status validate(const SamplingParams& params);

  // params must pass validate(); n_vocab >= 1. Allocates all work buffers ([n_vocab]) here.
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Prompt tokens count toward the repetition penalty (as vLLM). Replaces any previous prompt.
  void set_prompt(std::span<const int32_t> prompt_tokens);

  // Samples one token. logits: [n_vocab] raw model output (NaN is treated as -inf). Does not
  // record the token: call accept() with the token actually appended to the sequence.
  // allowed: empty, or [ceil(n_vocab / 64)] bits (bit t of word t / 64 = token t may be drawn),
  // a structured-output mask applied before penalties and the other transforms; reported
  // logprobs still come from the raw logits.
  SampledToken sample(std::span<const float> logits, std::span<const uint64_t> allowed = {});

  // Records a generated token for the presence/frequency/repetition penalties.
  void accept(int32_t token);
  // Undoes the last accept(token): a draft model's sampler takes back its proposals.
  void retract(int32_t token);

  // For speculative verification (src/spec): the distribution sample() draws from at this point
  // — after penalties, min_tokens, temperature, top-k, top-p and min-p — normalised into
  // probs: [n_vocab]. Greedy (or no finite logit): one-hot at the argmax. logits: [n_vocab] raw.
  void target_probabilities(std::span<const float> logits, std::span<float> probs);
  // A uniform draw in [0, 1) from this sampler's generator (seeded like sample()).
  double uniform() { return uniform01(); }
  // `token` reported as sample() would had it drawn it: its raw logprob and, when requested,
  // the top logprobs. logits: [n_vocab] raw.
  SampledToken describe(std::span<const float> logits, int32_t token);

  // A structured-output mask for the calls that take none (speculative verification's rows):
  // sample(), target_probabilities() and describe()'s callers then draw as sample(logits,
  // allowed) would. Empty: every token. The bits must stay valid until the next restrict_to().
  void restrict_to(std::span<const uint64_t> allowed) { restriction_ = allowed; }

  int32_t n_vocab() const { return n_vocab_; }
  bool is_greedy() const { return temperature_ < kGreedyTemperature; }

 private:
  // Copies logits into logits_ (NaN as -inf) and returns the raw log-normaliser.
  float load_raw(std::span<const float> logits);
  // Penalties, logit_bias and min_tokens on logits_, after the structured-output mask `allowed`
  // (a bitset over the vocabulary; empty: restriction_, if any).
  void apply_transforms(std::span<const uint64_t> allowed = {});
  int32_t pick_random();
  int32_t draw_full_vocabulary(float max_logit);
  int32_t draw_candidates(std::span<sampling::Candidate> candidates, float max_logit);
  void fill_top_logprobs(float log_z, SampledToken& out);
  double uniform01();

  int32_t n_vocab_;
  float temperature_;
  int32_t top_k_;
  float top_p_;
  float min_p_;
  int32_t n_logprobs_;  // -1 = not requested
  int32_t min_tokens_;
  std::vector<int32_t>
      min_tokens_banned_;  // stop_token_ids, masked while n_accepted_ < min_tokens_
  int32_t n_accepted_ = 0;
  std::vector<std::pair<int32_t, float>> logit_bias_;  // (token, added to its logit)
  std::span<const uint64_t> restriction_;              // restrict_to()'s mask, or empty

  sampling::PenaltyTracker penalties_;
  std::mt19937_64 rng_;

  std::vector<float> logits_;                    // [n_vocab] raw, penalised, scaled, weights
  std::vector<sampling::Candidate> candidates_;  // [n_vocab] filter work array
  std::vector<double> block_sums_;               // [ceil(n_vocab / kSumBlock)] weight sums
  std::vector<TokenLogprob> top_scratch_;        // [n_logprobs] running top-n, by raw logit
};

}  // namespace vela

#pragma once
// How far each request speculates in a step, so that speculation never makes the step slower
// per token. A step that runs N decode tokens in T seconds gives N tokens; k proposals of one
// request add delta(k) seconds of verification (the step-cost model's price of k more tokens
// with logits at that context) and a + a^2 + ... + a^k expected tokens, where a is the
// request's acceptance rate (AcceptanceEstimate::optimistic_rate). The policy takes the k (0 to K)
// with the most tokens per second, deciding request after request so each decision sees the tokens
// already added. A draft model adds its passes: one per proposal position, shared by every sequence
// (batched), so the step pays for the longest run any sequence asked for (less the proposals a
// proposer has without a pass: the MTP block's first). A draft that has not read a sequence's
// prompt yet must first catch up, once: that starts only when the request has enough tokens left
// for the expected saving to repay it. While the cost model cannot tell the price of a token
// with logits from the fixed part of a step (the recent steps all had the same token count: one
// request, always granted the same k), that price is taken as the share of the step it last had,
// kPriorTokenCost before it was ever measured; until then, every step after one that verified
// proposals verifies none, so the model sees steps of another count.
// Thread-safety: not synchronised; the engine thread owns it.
#include <cstdint>

#include "sched/step_cost_model.h"

namespace vela {

// Running acceptance rate of proposals: of one request, with the engine's experience as its
// prior, or of all requests together, with kFirstPrior as its prior. Counts are of proposals
// tested (accepted, plus the one rejected), decayed so recent runs weigh more.
struct AcceptanceEstimate {
  // The engine's guess before any proposal was tested.
  static constexpr double kFirstPrior = 0.5;
  // One request's estimate: the prior weighs as 4 proposals, each run's counts decay by 0.9.
  static constexpr double kRequestPriorTokens = 4, kRequestDecay = 0.9;
  // All requests': the prior weighs as 4 proposals and a run's counts decay by 0.995, so one
  // request's few unlucky first runs cannot turn everyone's prior to 0 (nor its own: its
  // estimate is what it saw weighed against the engine's, which would then be the same runs).
  static constexpr double kEnginePriorTokens = 4, kEngineDecay = 0.995;

  double accepted = 0;  // decayed counts
  double tested = 0;
  double tested_ever = 0;  // not decayed
  double prior_tokens = kRequestPriorTokens;
  double decay = kRequestDecay;

  static AcceptanceEstimate for_engine() {
    return {.prior_tokens = kEnginePriorTokens, .decay = kEngineDecay};
  }
  void observe(int32_t n_accepted, int32_t n_tested);
  // Acceptance rate per tested proposal, `prior` weighing as prior_tokens proposals.
  double rate(double prior) const;
  // rate() raised by kExploration standard deviations of a Beta posterior over all the
  // proposals tested: what the policy decides on, so that a request whose first few runs were
  // unlucky keeps proposing until its counts say it is worse (the bonus shrinks as they grow).
  double optimistic_rate(double prior) const;
  static constexpr double kExploration = 1.0;
};

class SpeculationPolicy {
 public:
  // Extra token's cost relative to the step before the cost model ever could say.
  static constexpr double kPriorTokenCost = 0.1;
  // The cost model's decode_token_spread() from which its price of a token is used.
  static constexpr double kMinDecodeSpread = 2;

  // `cost`: the engine's step-cost model (must outlive the policy); adaptive = false always
  // grants the proposals.
  SpeculationPolicy(const StepCostModel& cost, bool adaptive) : cost_(cost), adaptive_(adaptive) {}

  // Starts a step whose plain decodes are `decodes` (one token each). last_step_seconds: the
  // previous step's measured time; draft_pass_seconds: one proposal pass (0 = proposals cost no
  // pass); free_proposals: proposals of a run that need no pass (Proposer::free_proposals).
  void begin_step(const StepShape& decodes, double last_step_seconds, double draft_pass_seconds,
                  int32_t free_proposals = 0);
  // Proposal tokens (<= max_k) a request whose next token sits at position `position` verifies
  // this step at acceptance rate `acceptance`; the chosen tokens join the step's shape.
  // upfront_seconds: a one-off cost of starting (a draft model catching up on the prompt), paid
  // only if the time the request's remaining_tokens save at the chosen rate exceeds it.
  int32_t choose(int32_t position, int32_t max_k, double acceptance, double upfront_seconds = 0,
                 int32_t remaining_tokens = 0);
  // One proposal granted whatever its predicted gain, joining the step's shape: a draft-model
  // request the policy has kept from drafting for kReprobeSteps steps tries again, since its
  // acceptance estimate only moves with proposals (n-gram requests check an unverified proposal
  // against each sampled token instead, for free).
  int32_t probe(int32_t position);
  static constexpr int32_t kReprobeSteps = 16;
  // The token's price was never measured yet and proposals were granted: steps alternate plain
  // and granted (see above). A policy that never granted (every request's proposal priced above
  // its gain, as under load) is not measuring.
  bool measuring() const { return adaptive_ && !token_cost_measured_ && ever_granted_; }

 private:
  double step_seconds(const StepShape& shape, int32_t draft_passes) const;
  // k proposals at `position` join the step, expected to add expected_gain tokens.
  void grant(int32_t position, int32_t k, double expected_gain);
  bool model_knows_token_cost() const;

  const StepCostModel& cost_;
  bool adaptive_;
  StepShape shape_;
  int32_t base_tokens_ = 0;  // the plain decodes' tokens
  double reference_seconds_ = 1;
  double draft_pass_seconds_ = 0;
  int32_t free_proposals_ = 0;
  int32_t draft_passes_ = 0;                   // passes of the longest run granted so far this step
  double expected_tokens_ = 0;                 // tokens the planned step gives, in expectation
  bool granted_in_step_ = false;               // the step begun last was granted proposals
  bool ever_granted_ = false;                  // some step was
  bool plain_step_ = false;                    // this step grants none (see above)
  bool token_cost_known_ = false;              // the cost model prices this step's tokens
  bool token_cost_measured_ = false;           // it ever did
  double token_cost_share_ = kPriorTokenCost;  // an extra token's cost over the step's, last known
};

}  // namespace vela

#pragma once
// How long an engine step takes, predicted from what it computes. The scheduler asks it how many
// prefill tokens fit next to the running decodes under a step-time target; the engine teaches
// it every step's measured wall time.
//
// A step's time on a CPU is close to linear in four terms: a fixed part (reading every weight
// once, threads waking up), a part per decode token (its share of each matmul plus a row of the
// output head), a part per prefill token (matmul share only; chunks produce at most one logits
// row) and a part per position the attention reads (K/V bytes and score arithmetic). The model
// fits those four non-negative coefficients by least squares over the steps seen, older steps
// weighing exponentially less, so it follows slow changes; when its predictions are off in the
// same direction for several steps in a row (the machine's speed moved: other load, a thermal
// or frequency change) it discards most of its history and refits from the new steps.
// Thread-safety: not synchronised; the engine thread owns it.
#include <array>
#include <cstdint>

namespace vela {

// What one step computes, in the terms its cost depends on.
struct StepShape {
  int32_t decode_tokens = 0;   // requests computing their one remaining token (each gets logits)
  int32_t prefill_tokens = 0;  // prompt chunks, and recomputation after a preemption
  int64_t context_reads = 0;   // sum over the step's tokens of the positions each attends to

  // Tokens [start, start + n) of one request. `decode`: the request's only pending token.
  void add(int32_t start, int32_t n, bool decode);
  int32_t tokens() const { return decode_tokens + prefill_tokens; }
};

// The prediction interface the scheduler sees (a fake in tests).
class StepCostEstimator {
 public:
  virtual ~StepCostEstimator() = default;
  // False until enough steps were seen for predictions to mean something.
  virtual bool ready() const = 0;
  virtual double predict_seconds(const StepShape& shape) const = 0;
};

class StepCostModel final : public StepCostEstimator {
 public:
  static constexpr int kTerms = 4;  // fixed, per decode token, per prefill token, per read

  bool ready() const override;
  double predict_seconds(const StepShape& shape) const override;

  // Adds a measured step and refits.
  void observe(const StepShape& shape, double seconds);

  // Seconds per unit of each term: [fixed, decode token, prefill token, context read].
  const std::array<double, kTerms>& coefficients() const { return coef_; }
  uint64_t steps_observed() const { return n_observed_; }
  // How well the steps seen tell a decode token's price apart from the other terms: the
  // weighted sum of squares of each step's decode-token count less what the other terms'
  // features predict of it (tokens^2; about 0 while every step had the same count, as when one
  // request decodes alone). The decode coefficient means little below ~1.
  double decode_token_spread() const;
  uint64_t drift_resets() const { return n_resets_; }

 private:
  static std::array<double, kTerms> features(const StepShape& shape);
  void fit();

  // Exponentially weighted normal equations: gram_ = sum w x x^T, moment_ = sum w x y.
  std::array<double, kTerms * kTerms> gram_{};
  std::array<double, kTerms> moment_{};
  std::array<double, kTerms> coef_{};
  uint64_t n_observed_ = 0;
  uint64_t n_with_decode_ = 0, n_with_prefill_ = 0;
  int32_t drift_run_ = 0;  // consecutive predictions off by more than the drift ratio, one sign
  uint64_t n_resets_ = 0;
};

}  // namespace vela

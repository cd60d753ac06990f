#pragma once
// Where speculative proposals come from. Each engine step asks one Proposer for the next tokens of
// its running decodes; the engine verifies them (acceptance.h) and tells the proposer what became
// of each sequence. The methods differ in what a proposal costs and what they keep:
//  - a lookup (prompt lookup, a test's oracle) costs no pass: it proposes first and the
//    speculation policy then decides how many of the proposals to verify;
//  - a model (a draft model, the target's multi-token-prediction block) runs passes: the policy
//    grants each sequence a length first, priced by pass_seconds, and the proposer runs its
//    passes for all granted sequences at once;
//  - a proposer that reads the target's hidden states (the MTP block) follows every target pass:
//    the engine hands it the final hidden states of the rows each pass computed.
// A new method is one new class.
// Thread-safety: not synchronised; the engine thread owns a proposer.
#include <cstdint>
#include <span>

#include "sampling/sampler.h"
#include "util/result.h"

namespace vela {

// One sequence to propose for, this step.
struct ProposalRequest {
  uint64_t id = 0;
  std::span<const int32_t> tokens;  // [n] prompt and output so far (all verified)
  int32_t n_prompt = 0;             // tokens[0, n_prompt) are the prompt
  const SamplingParams* params = nullptr;
  // [blocks] the sequence's KV block ids in the target's cache (one group), for a proposer that
  // keeps its own rows under the target's blocks (the MTP block); empty for the others.
  std::span<const int32_t> block_table;
  int32_t max_k = 0;  // proposals wanted at most
  // Results.
  int32_t n_proposed = 0;
  std::span<int32_t> proposals;  // [max_k]
  std::span<float> q;            // [max_k, n_vocab] when drawn from a distribution, else empty
};

// What one target pass computed for a sequence, for a proposer that follows passes.
struct PassRows {
  uint64_t id = 0;
  std::span<const int32_t> tokens;       // [n] the sequence's tokens after the step (verified)
  std::span<const int32_t> block_table;  // [blocks] its KV block ids in the target's cache
  int32_t first_position = 0;            // of the pass's first row for it
  // Rows whose hidden states stand: those the pass computed that the sequence kept (a
  // verification's accepted proposals and the row after them), each followed by a known token.
  int32_t n_rows = 0;
  // [n_rows, n_embd] the target's final hidden states, or [n_rows, k * n_embd] its inputs of the
  // k layers the proposer follows
  std::span<const float> hidden;
  // It samples its next token from the last row's successor and may be granted proposals next
  // step: a proposer computes its first proposal only for these.
  bool decoding = false;
  // A decoding sequence the policy keeps from speculating: a proposer may hold these rows and
  // follow them together with the sequence's next rows that are not deferrable, in position
  // order.
  bool deferrable = false;
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // True when proposals cost passes (the policy grants a length before propose); false when they
  // are free to look at (the policy chooses among what propose gave).
  virtual bool runs_passes() const = 0;
  // Proposals a sequence gets before any pass of this step (the MTP block's first comes from
  // following the last target pass): a run of k proposals costs k - free_proposals() passes.
  virtual int32_t free_proposals() const { return 0; }
  // Seconds of one proposal pass over every sequence: measured, or estimated from the target's
  // last step (target_step_seconds) until measured.
  virtual double pass_seconds(double target_step_seconds) const {
    (void)target_step_seconds;
    return 0;
  }
  // A one-off cost before the sequence can propose (a draft model reading the prompt): seconds,
  // given pass_seconds as priced this step. 0 when none.
  virtual double upfront_seconds(uint64_t id, int32_t n_tokens, double pass_seconds) const {
    (void)id, (void)n_tokens, (void)pass_seconds;
    return 0;
  }
  // Fills proposals (and q where they are drawn from a distribution) of each request. A request
  // may get fewer than max_k, or none.
  virtual Status propose(std::span<ProposalRequest> requests) = 0;

  // Whether follow() wants the target's hidden states of every pass.
  virtual bool follows_passes() const { return false; }
  // Target layers whose inputs (the residual stream entering each) follow() wants for each row,
  // concatenated, instead of the final hidden state; empty: the final hidden state.
  virtual std::span<const int32_t> followed_layer_inputs() const { return {}; }
  // The rows one target pass computed, after its tokens were sampled and verified.
  virtual Status follow(std::span<const PassRows> rows) {
    (void)rows;
    return {};
  }
  // The sequence's first n_valid tokens are verified: state past them is dropped.
  virtual void rollback(uint64_t id, int32_t n_valid) { (void)id, (void)n_valid; }
  // The sequence was preempted: what it holds goes back (it is rebuilt when it resumes).
  virtual void drop_kv(uint64_t id) { (void)id; }
  // The sequence finished.
  virtual void release(uint64_t id) { (void)id; }
  // KV blocks of its own cache held by sequences (tests; 0 for a proposer without one).
  virtual int32_t blocks_in_use() const { return 0; }
};

}  // namespace vela

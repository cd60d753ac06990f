#pragma once
// Verification of proposed tokens against the target model: a speculating request's pass gives
// K + 1 logits rows (after its last verified token and after each of its K proposals); row j
// decides the token at that position, and row j + 1 counts only if row j accepted proposal j.
// Acceptance keeps the target's distribution exactly, after all of the request's sampling
// transforms (penalties, temperature, top-k/p, min-p):
//  - a deterministic proposal x (n-gram lookup: q is a point mass at x) is checked by drawing
//    the target's own token y from the row and accepting when y == x. P(accept) = p(x), and a
//    rejected y is distributed as p restricted to y != x — the normalised residual
//    max(0, p - q) of rejection sampling. Greedy requests reduce to argmax == x, and a seed
//    draws exactly the tokens plain decoding would.
//  - a proposal drawn from a distribution q (a draft model's, after the same transforms) is
//    accepted with probability min(1, p(x) / q(x)); on rejection the token is drawn from the
//    normalised residual max(0, p - q).
// Free functions; they use only the sampler and buffers given (one request at a time).
#include <cstdint>
#include <functional>
#include <span>

#include "sampling/sampler.h"

namespace vela {

// The token one row gives the sequence.
struct RowVerdict {
  SampledToken token;
  bool accepted = false;  // token is the proposal: the next row may be verified
};

// Row against a deterministic proposal. logits: [n_vocab] raw.
RowVerdict verify_point_proposal(Sampler& sampler, std::span<const float> logits, int32_t proposal);

// Row against a proposal drawn from q: [n_vocab] (normalised, q[proposal] > 0). work: [n_vocab].
RowVerdict verify_sampled_proposal(Sampler& sampler, std::span<const float> logits,
                                   int32_t proposal, std::span<const float> q,
                                   std::span<float> work);

// Per-row logits processor (e.g. a constraint mask): called on each row just before it is
// verified, after the previous row's token was emitted, so a processor that follows the
// sequence's state sees every token before the row. Empty = none.
using RowProcessor = std::function<void(std::span<float> logits)>;
// Receives each token the run gives, in order; the owner records it (Sampler::accept included)
// and returns false when the sequence ends there (EOS, stop string, length): nothing after it
// is emitted.
using TokenSink = std::function<bool(const SampledToken& token)>;

struct RunResult {
  int32_t n_emitted = 0;   // tokens given to the sink
  int32_t n_accepted = 0;  // of them, proposals
  bool ended = false;      // the sink ended the sequence
};

// Verifies proposals row by row. rows: [proposals.size() + 1, n_vocab] raw logits (modified in
// place by `process`); q: [proposals.size(), n_vocab] the distributions they were drawn from, or
// empty for deterministic proposals; work: [n_vocab] (used with q). Emits the accepted
// proposals and then the first rejected row's token, or the bonus token drawn from the last row
// when every proposal was accepted.
// refused: a proposal drawn for the last row (from q's extra row: q is then
// [proposals.size() + 1, n_vocab]) that was cut before verification because the request's
// grammar rules it out. The last row is verified against it (p(refused) is 0 under the mask, so
// the draw comes from the residual max(0, p - q)): cutting the run where a draw fell outside the
// grammar and drawing that row from p would favour the tokens q makes likely. -1: none.
RunResult verify_run(Sampler& sampler, std::span<float> rows, std::span<const int32_t> proposals,
                     std::span<const float> q, std::span<float> work, const RowProcessor& process,
                     const TokenSink& emit, int32_t refused = -1);

}  // namespace vela

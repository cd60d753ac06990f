#pragma once
// Proposals that cost no pass: a function of a sequence's tokens. Prompt lookup (ngram_proposer.h)
// is one; a caller's oracle (tests, replayed acceptance in benchmarks) is another.
// Thread-safety: not synchronised; the engine thread owns it (the function is called there).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "spec/proposer.h"

namespace vela {

// Proposes up to out.size() tokens to follow a request's `tokens` (prompt and output so far);
// returns how many it wrote. Proposals are deterministic (verified as point masses).
using TokenLookup = std::function<int32_t(uint64_t request_id, std::span<const int32_t> tokens,
                                          std::span<int32_t> out)>;

class LookupProposer final : public Proposer {
 public:
  explicit LookupProposer(TokenLookup lookup) : lookup_(std::move(lookup)) {}
  // Prompt lookup with suffixes of min_n to max_n tokens.
  static std::unique_ptr<Proposer> ngram(int32_t min_n, int32_t max_n);

  bool runs_passes() const override { return false; }
  Status propose(std::span<ProposalRequest> requests) override;

 private:
  TokenLookup lookup_;
};

}  // namespace vela

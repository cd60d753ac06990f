#include "spec/lookup_proposer.h"

#include <algorithm>

#include "spec/ngram_proposer.h"

namespace vela {

std::unique_ptr<Proposer> LookupProposer::ngram(int32_t min_n, int32_t max_n) {
  return std::make_unique<LookupProposer>(
      [min_n, max_n](uint64_t, std::span<const int32_t> tokens, std::span<int32_t> out) {
        return propose_ngram(tokens, min_n, max_n, out);
      });
}

Status LookupProposer::propose(std::span<ProposalRequest> requests) {
  for (ProposalRequest& r : requests) {
    r.q = {};
    const std::span<int32_t> out = r.proposals.first(size_t(std::max(0, r.max_k)));
    r.n_proposed = out.empty() ? 0 : std::clamp(lookup_(r.id, r.tokens, out), 0, r.max_k);
  }
  return {};
}

}  // namespace vela

#pragma once
// A grammar bound to a vocabulary, with the token masks computed so far.
//
// The allowed-token set of a matcher state is the union, over its stacks, of what each stack
// allows. For a stack, the top kContextDepth entries decide most tokens: walking the vocabulary
// trie from that sub-stack classifies each token as accepted (consumed inside the sub-stack),
// rejected, or context-dependent (the sub-stack completes mid-token, so the entries below it
// decide). Accepted sets are computed once per sub-stack and kept; only the context-dependent
// tokens are checked against the full stack at run time (xgrammar's split). Whole-state masks
// are cached too, since a JSON document revisits the same few states (inside a string, between
// members) many times.
//
// Thread-safety: all methods are safe to call concurrently (an internal mutex guards the
// caches); the grammar and vocabulary are immutable.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "constraint/grammar.h"
#include "constraint/grammar_matcher.h"
#include "constraint/token_vocabulary.h"

namespace vela::constraint {

inline constexpr size_t kContextDepth = 4;

struct MaskStats {
  uint64_t state_hits = 0, state_misses = 0;
  uint64_t substack_tables = 0;  // sub-stacks classified so far
  uint64_t context_checks = 0;   // context-dependent tokens checked against a full stack
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  const StackSet& initial() const { return initial_; }

  // Fills `mask` ([mask_words] bits, bit t = token t allowed) for `state`. End-of-generation
  // tokens are allowed when the state is accepting.
  void fill_mask(const StackSet& state, std::span<uint64_t> mask) const;
  // Advances `state` over token `id`'s bytes (an end-of-generation token leaves it unchanged);
  // false when the token is not allowed.
  bool advance_token(StackSet& state, int32_t id) const;

  MaskStats stats() const;

 private:
  // What one sub-stack allows, independent of the stack below it.
  struct SubstackTable {
    std::vector<uint64_t> accepted_bits;  // [mask_words], or empty when sparse
    std::vector<int32_t> accepted_ids;    // when sparse
    std::vector<int32_t> context_dependent;
  };
  const SubstackTable& table_for(const Stack& stack) const;  // mutex held
  SubstackTable classify(const Stack& substack, bool truncated) const;
  void compute_mask(const StackSet& state, std::span<uint64_t> mask) const;  // mutex held

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  StackSet initial_;

  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, SubstackTable> tables_;
  mutable std::unordered_map<std::string, std::vector<uint64_t>> state_masks_;
  mutable size_t state_mask_bytes_ = 0;
  mutable MaskStats stats_;
};

}  // namespace vela::constraint

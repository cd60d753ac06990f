#include "constraint/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace vela::constraint {

namespace {

// Whole-state masks kept per grammar, in bytes; the cache restarts when full.
constexpr size_t kStateMaskBudget = 64u << 20;

void set_bit(std::span<uint64_t> mask, int32_t id) {
  mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
}

bool has_bit(std::span<const uint64_t> mask, int32_t id) {
  return (mask[size_t(id) >> 6] >> (id & 63)) & 1;
}

void append_u32(std::string& key, uint32_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string state_key(const StackSet& state) {
  std::string key;
  for (const Stack& s : state) {
    append_u32(key, uint32_t(s.size()));
    for (uint32_t p : s) append_u32(key, p);
  }
  return key;
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), initial_(initial_stacks(grammar_)) {}

MaskStats CompiledGrammar::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

namespace {

// The matcher's states met during one vocabulary walk, numbered, with their transitions
// filled in on first use: the walk then costs a table lookup per trie edge (a lazily built
// DFA over the sub-stack's reachable states).
class StateGraph {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;

  explicit StateGraph(const Grammar& g) : g_(g) {}

  int32_t intern(StackSet&& s) {
    std::string key = state_key(s);
    auto [it, added] = ids_.try_emplace(std::move(key), int32_t(states_.size()));
    if (added) {
      accepting_.push_back(is_accepting(s));
      continues_.push_back(can_continue(s));
      states_.push_back(std::move(s));
      next_.emplace_back();
      next_.back().fill(kUnknown);
    }
    return it->second;
  }

  int32_t step(int32_t state, uint8_t byte) {
    int32_t& n = next_[size_t(state)][byte];
    if (n == kUnknown) {
      StackSet out;
      advance_stacks(g_, states_[size_t(state)], byte, out);
      const int32_t id = out.empty() ? kDead : intern(std::move(out));
      next_[size_t(state)][byte] = id;  // `n` may dangle after intern() grew next_
      return id;
    }
    return n;
  }

  bool accepting(int32_t s) const { return s >= 0 && accepting_[size_t(s)]; }
  bool continues(int32_t s) const { return s >= 0 && continues_[size_t(s)]; }

 private:
  const Grammar& g_;
  std::vector<StackSet> states_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<uint8_t> accepting_, continues_;
};

}  // namespace

CompiledGrammar::SubstackTable CompiledGrammar::classify(const Stack& substack,
                                                         bool truncated) const {
  // Walk the sorted vocabulary as a trie: level[d] = state after the first d bytes of the
  // current token; entries up to `valid` are shared with the previous token's prefix.
  const TokenVocabulary& v = *vocab_;
  const auto& ids = v.sorted_ids();
  const auto& lcp = v.common_prefix();
  StateGraph graph(grammar_);
  std::vector<int32_t> level(1, graph.intern(StackSet{substack}));
  // completed_before[d]: some level j < d held a completed sub-stack (the bytes from j on
  // belong to whatever is below it).
  std::vector<uint8_t> completed_before(1, 0);
  size_t valid = 0;
  SubstackTable t;
  std::vector<int32_t> accepted;
  for (size_t i = 0; i < ids.size();) {
    const int32_t id = ids[i];
    const std::string_view piece = v.piece(id);
    valid = std::min<size_t>(valid, lcp[i]);
    size_t d = valid;
    if (level.size() < piece.size() + 1) {
      level.resize(piece.size() + 1);
      completed_before.resize(piece.size() + 1);
    }
    while (d < piece.size() && graph.continues(level[d])) {
      level[d + 1] = graph.step(level[d], static_cast<uint8_t>(piece[d]));
      completed_before[d + 1] = completed_before[d] | uint8_t(graph.accepting(level[d]));
      ++d;
    }
    valid = d;
    if (d == piece.size() && level[d] != StateGraph::kDead) {
      accepted.push_back(id);
      ++i;
      continue;
    }
    // Stopped at level d before the end of the token: every following token that shares these
    // d bytes stops there too.
    const bool context = truncated && (completed_before[d] || graph.accepting(level[d]));
    size_t j = i;
    do {
      if (context) t.context_dependent.push_back(ids[j]);
      ++j;
    } while (j < ids.size() && lcp[j] >= d && v.piece(ids[j]).size() > d);
    i = j;
  }
  if (accepted.size() * 32 > size_t(v.n_vocab())) {
    t.accepted_bits.assign(v.mask_words(), 0);
    for (int32_t id : accepted) set_bit(t.accepted_bits, id);
  } else {
    t.accepted_ids = std::move(accepted);
  }
  return t;
}

const CompiledGrammar::SubstackTable& CompiledGrammar::table_for(const Stack& stack) const {
  const size_t depth = std::min(stack.size(), kContextDepth);
  const bool truncated = stack.size() > kContextDepth;
  std::string key(1, truncated ? 'T' : 'F');
  for (size_t i = stack.size() - depth; i < stack.size(); ++i) append_u32(key, stack[i]);
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second;
  Stack sub(stack.end() - std::ptrdiff_t(depth), stack.end());
  ++stats_.substack_tables;
  return tables_.emplace(std::move(key), classify(sub, truncated)).first->second;
}

void CompiledGrammar::compute_mask(const StackSet& state, std::span<uint64_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0);
  for (const Stack& stack : state) {
    if (stack.empty()) {
      for (int32_t id : vocab_->end_of_generation()) set_bit(mask, id);
      continue;
    }
    const SubstackTable& t = table_for(stack);
    if (!t.accepted_bits.empty()) {
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= t.accepted_bits[w];
    } else {
      for (int32_t id : t.accepted_ids) set_bit(mask, id);
    }
    for (int32_t id : t.context_dependent) {
      if (has_bit(mask, id)) continue;
      ++stats_.context_checks;
      StackSet one{stack};
      if (advance_bytes(grammar_, one, vocab_->piece(id))) set_bit(mask, id);
    }
  }
}

void CompiledGrammar::fill_mask(const StackSet& state, std::span<uint64_t> mask) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key = state_key(state);
  auto it = state_masks_.find(key);
  if (it != state_masks_.end()) {
    ++stats_.state_hits;
    std::memcpy(mask.data(), it->second.data(), mask.size() * sizeof(uint64_t));
    return;
  }
  ++stats_.state_misses;
  compute_mask(state, mask);
  const size_t bytes = key.size() + mask.size() * sizeof(uint64_t);
  if (state_mask_bytes_ + bytes > kStateMaskBudget) {
    state_masks_.clear();
    state_mask_bytes_ = 0;
  }
  state_mask_bytes_ += bytes;
  state_masks_.emplace(std::move(key), std::vector<uint64_t>(mask.begin(), mask.end()));
}

bool CompiledGrammar::advance_token(StackSet& state, int32_t id) const {
  if (id < 0 || id >= vocab_->n_vocab()) return false;
  const auto& eog = vocab_->end_of_generation();
  if (std::find(eog.begin(), eog.end(), id) != eog.end()) return is_accepting(state);
  const std::string_view piece = vocab_->piece(id);
  if (piece.empty()) return false;
  return advance_bytes(grammar_, state, piece);
}

}  // namespace vela::constraint

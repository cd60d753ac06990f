#pragma once
// Test helper: whether a compiled grammar accepts a whole text (from its start state, every byte
// matched, ending in an accepting state).
#include <string_view>

#include "constraint/grammar_matcher.h"

namespace vela::test {

inline bool grammar_accepts(const constraint::Grammar& g, std::string_view text) {
  constraint::StackSet state = constraint::initial_stacks(g);
  return constraint::advance_bytes(g, state, text) && constraint::is_accepting(state);
}

}  // namespace vela::test

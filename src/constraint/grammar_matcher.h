#pragma once
// Runs a Grammar over bytes as a set of pushdown stacks (one per live parse, as llama.cpp's
// grammar sampler): a stack holds grammar positions, its back() is the terminal to match next
// and the entries below are where to return when the rule above completes. An empty stack
// means the whole grammar (or, for a sub-stack, its rule) is complete.
// Right recursion does not grow a stack (a rule reference that ends its alternative is a tail
// call), identical stacks are merged, and stack count and depth are capped, so an ambiguous or
// hostile grammar costs bounded time per byte. Capping only drops parses, so every state the
// matcher reports live still has a way to complete.
// Free functions over an immutable Grammar; no shared state.
#include <cstdint>
#include <string_view>
#include <vector>

#include "constraint/grammar.h"

namespace vela::constraint {

using Stack = std::vector<uint32_t>;  // grammar positions, back() = next terminal
using StackSet = std::vector<Stack>;  // sorted, unique

inline constexpr size_t kMaxStacks = 256;
inline constexpr size_t kMaxStackDepth = 2048;

// The stacks that start the grammar's root rule.
StackSet initial_stacks(const Grammar& g);
// Every stack (whose back() is a terminal or that is empty) reachable from `stack` without
// consuming a byte, added to `out` (unsorted; call normalize afterwards).
void expand_stack(const Grammar& g, Stack stack, StackSet& out);
// The stacks after consuming `byte`; empty when no parse accepts it.
void advance_stacks(const Grammar& g, const StackSet& in, uint8_t byte, StackSet& out);
// Consumes `bytes` in order; false (and `state` unchanged) when some byte is rejected.
bool advance_bytes(const Grammar& g, StackSet& state, std::string_view bytes);
// Sorts, merges and caps.
void normalize(StackSet& stacks);
// Some parse is complete (an empty stack).
bool is_accepting(const StackSet& stacks);
// Some parse can still consume a byte.
bool can_continue(const StackSet& stacks);

}  // namespace vela::constraint

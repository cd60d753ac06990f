#include "constraint/grammar_matcher.h"

#include <algorithm>

namespace vela::constraint {

void expand_stack(const Grammar& g, Stack stack, StackSet& out) {
  // Worklist closure. `seen` catches cycles of rules that can derive the empty string.
  StackSet work, seen;
  work.push_back(std::move(stack));
  while (!work.empty()) {
    Stack s = std::move(work.back());
    work.pop_back();
    if (s.empty() || g.at(s.back()).kind == Element::kBytes) {
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
      continue;
    }
    if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
    if (seen.size() >= 4 * kMaxStacks) continue;
    seen.push_back(s);
    const uint32_t pos = s.back();
    const Element& e = g.at(pos);
    s.pop_back();
    if (e.kind == Element::kEnd) {
      work.push_back(std::move(s));
      continue;
    }
    // A rule reference: return to the next element unless it ends the alternative.
    if (g.at(pos + 1).kind != Element::kEnd) s.push_back(pos + 1);
    if (s.size() >= kMaxStackDepth) continue;
    for (const uint32_t alt : g.alternatives[e.value]) {
      Stack t = s;
      t.push_back(alt);
      work.push_back(std::move(t));
    }
  }
}

void normalize(StackSet& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacks) stacks.resize(kMaxStacks);
}

StackSet initial_stacks(const Grammar& g) {
  StackSet out;
  for (const uint32_t alt : g.alternatives[g.root]) expand_stack(g, Stack{alt}, out);
  normalize(out);
  return out;
}

void advance_stacks(const Grammar& g, const StackSet& in, uint8_t byte, StackSet& out) {
  out.clear();
  for (const Stack& s : in) {
    if (s.empty() || !g.bytes_at(s.back()).has(byte)) continue;
    Stack t = s;
    t.back() += 1;
    expand_stack(g, std::move(t), out);
  }
  normalize(out);
}

bool advance_bytes(const Grammar& g, StackSet& state, std::string_view bytes) {
  StackSet cur = state, next;
  for (const char c : bytes) {
    advance_stacks(g, cur, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  state.swap(cur);
  return true;
}

bool is_accepting(const StackSet& stacks) {
  return !stacks.empty() && stacks.front().empty();  // sorted: the empty stack comes first
}

bool can_continue(const StackSet& stacks) {
  return !stacks.empty() && !stacks.back().empty();
}

}  // namespace vela::constraint

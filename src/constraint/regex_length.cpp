#include "constraint/regex_length.h"

#include <algorithm>
#include <unordered_map>

#include "constraint/regex_ast.h"

namespace vela::constraint {

namespace {

// The position automaton of a regex tree: positions are the character leaves (repetitions
// unrolled, each copy its own positions); follow[p] lists the positions that may come next.
class PositionAutomaton {
 public:
  struct Part {
    bool nullable = true;
    std::vector<uint32_t> first, last;
  };

  // False when the unrolled tree has more positions or links than the product could hold.
  bool build(const RegexNode& root) {
    root_ = part(root);
    return !overflow_;
  }

  const Part& root() const { return root_; }
  size_t size() const { return atoms_.size(); }
  const std::string& atom(uint32_t p) const { return *atoms_[p]; }
  std::vector<uint32_t>& follow(uint32_t p) { return follow_[p]; }

 private:
  void link(const std::vector<uint32_t>& from, const std::vector<uint32_t>& to) {
    edges_ += from.size() * to.size();
    if (edges_ > kMaxLengthProductTransitions) overflow_ = true;
    if (overflow_) return;
    for (uint32_t p : from) follow_[p].insert(follow_[p].end(), to.begin(), to.end());
  }

  Part concat(Part a, Part b) {
    link(a.last, b.first);
    Part out;
    out.nullable = a.nullable && b.nullable;
    out.first = std::move(a.first);
    if (a.nullable) out.first.insert(out.first.end(), b.first.begin(), b.first.end());
    out.last = std::move(b.last);
    if (b.nullable) out.last.insert(out.last.end(), a.last.begin(), a.last.end());
    return out;
  }

  Part part(const RegexNode& node) {
    if (overflow_) return {};
    switch (node.kind) {
      case RegexNode::kAtom: {
        if (atoms_.size() >= kMaxLengthProductStates) {
          overflow_ = true;
          return {};
        }
        const uint32_t p = uint32_t(atoms_.size());
        atoms_.push_back(&node.atom);
        follow_.emplace_back();
        return {false, {p}, {p}};
      }
      case RegexNode::kConcat: {
        Part out;
        for (const RegexNode& c : node.children) out = concat(std::move(out), part(c));
        return out;
      }
      case RegexNode::kAlternation: {
        Part out;
        out.nullable = false;
        for (const RegexNode& c : node.children) {
          Part alt = part(c);
          out.nullable = out.nullable || alt.nullable;
          out.first.insert(out.first.end(), alt.first.begin(), alt.first.end());
          out.last.insert(out.last.end(), alt.last.begin(), alt.last.end());
        }
        return out;
      }
      case RegexNode::kRepeat: {
        // x{m,n} = x^m (x (x ...)?)?, and x{m,} = x^m x*: after k copies the next character
        // starts copy k + 1 or ends the repetition.
        const RegexNode& child = node.children[0];
        Part tail;
        if (node.unbounded) {
          tail = part(child);
          link(tail.last, tail.first);
          tail.nullable = true;
        } else {
          for (uint32_t i = node.min; i < node.max && !overflow_; ++i) {
            tail = concat(part(child), std::move(tail));
            tail.nullable = true;
          }
        }
        for (uint32_t i = 0; i < node.min && !overflow_; ++i)
          tail = concat(part(child), std::move(tail));
        return tail;
      }
    }
    return {};
  }

  std::vector<const std::string*> atoms_;
  std::vector<std::vector<uint32_t>> follow_;
  Part root_;
  size_t edges_ = 0;
  bool overflow_ = false;
};

Error too_large() {
  return make_error("pattern combined with minLength/maxLength needs more than " +
                    std::to_string(kMaxLengthProductStates) + " grammar states or " +
                    std::to_string(kMaxLengthProductTransitions) +
                    " transitions; use smaller length bounds or a simpler pattern");
}

}  // namespace

Result<GbnfRules> regex_with_length_to_gbnf(std::string_view pattern, bool json_string_content,
                                            const LengthBounds& bounds,
                                            const std::string& rule_prefix) {
  auto tree = parse_regex(pattern, json_string_content);
  if (!tree) return tree.error();
  PositionAutomaton automaton;
  if (!automaton.build(*tree)) return too_large();
  const uint32_t start = uint32_t(automaton.size());  // before the first character
  std::vector<bool> final_position(start + 1, false);
  for (uint32_t p : automaton.root().last) final_position[p] = true;
  final_position[start] = automaton.root().nullable;
  std::vector<uint32_t> start_follow = automaton.root().first;
  for (uint32_t p = 0; p < start; ++p) {
    std::vector<uint32_t>& f = automaton.follow(p);
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
  }
  std::sort(start_follow.begin(), start_follow.end());
  start_follow.erase(std::unique(start_follow.begin(), start_follow.end()), start_follow.end());

  // Product states (position, characters read), found breadth first from (start, 0).
  const uint64_t top = bounds.has_max ? bounds.max : bounds.min;
  std::vector<std::pair<uint32_t, uint64_t>> states = {{start, 0}};
  std::vector<std::vector<uint32_t>> next(1);
  std::unordered_map<uint64_t, uint32_t> index = {{uint64_t(start) * (top + 1), 0}};
  size_t transitions = 0;
  for (uint32_t s = 0; s < states.size(); ++s) {
    const auto [p, read] = states[s];
    if (bounds.has_max && read == bounds.max) continue;
    const uint64_t after = std::min(read + 1, top);
    for (uint32_t q : p == start ? start_follow : automaton.follow(p)) {
      const uint64_t key = uint64_t(q) * (top + 1) + after;
      auto [it, added] = index.try_emplace(key, uint32_t(states.size()));
      if (added) {
        if (states.size() >= kMaxLengthProductStates) return too_large();
        states.push_back({q, after});
        next.emplace_back();
      }
      if (++transitions > kMaxLengthProductTransitions) return too_large();
      next[s].push_back(it->second);
    }
  }
  // Live states: accepting, or with a transition to a live one.
  std::vector<std::vector<uint32_t>> previous(states.size());
  for (uint32_t s = 0; s < states.size(); ++s)
    for (uint32_t t : next[s]) previous[t].push_back(s);
  const auto accepting = [&](uint32_t s) {
    return final_position[states[s].first] && states[s].second >= bounds.min;
  };
  std::vector<bool> live(states.size(), false);
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < states.size(); ++s)
    if (accepting(s)) {
      live[s] = true;
      work.push_back(s);
    }
  while (!work.empty()) {
    const uint32_t t = work.back();
    work.pop_back();
    for (uint32_t s : previous[t])
      if (!live[s]) {
        live[s] = true;
        work.push_back(s);
      }
  }
  if (!live[0])
    return make_error("no string matches the pattern with a length (in characters) in [" +
                      std::to_string(bounds.min) + ", " +
                      (bounds.has_max ? std::to_string(bounds.max) : "unbounded") + "]");

  // One rule per live state: a character leaf then the state after it, or the end.
  GbnfRules out;
  std::vector<bool> atom_written(start, false);
  const auto state_name = [&](uint32_t s) { return rule_prefix + "-s" + std::to_string(s); };
  for (uint32_t s = 0; s < states.size(); ++s) {
    if (!live[s]) continue;
    std::string body;
    for (uint32_t t : next[s]) {
      if (!live[t]) continue;
      const uint32_t q = states[t].first;
      const std::string atom_name = rule_prefix + "-c" + std::to_string(q);
      if (!atom_written[q]) {
        atom_written[q] = true;
        out.rules.push_back({atom_name, automaton.atom(q)});
      }
      body += (body.empty() ? "" : " | ") + atom_name + " " + state_name(t);
    }
    if (accepting(s)) body += body.empty() ? "\"\"" : " | \"\"";
    out.rules.push_back({state_name(s), body});
  }
  out.expression = state_name(0);
  return out;
}

}  // namespace vela::constraint

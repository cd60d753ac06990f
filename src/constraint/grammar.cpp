#include "constraint/grammar.h"

#include <algorithm>

namespace vela::constraint {

uint32_t GrammarBuilder::rule(const std::string& name) {
  if (auto it = name_index_.find(name); it != name_index_.end()) return it->second;
  return add(name);
}

uint32_t GrammarBuilder::fresh_rule(const std::string& base) {
  return add(base + "-" + std::to_string(names_.size()));
}

uint32_t GrammarBuilder::add(std::string name) {
  const uint32_t id = uint32_t(names_.size());
  name_index_[name] = id;  // of rules sharing a name, rule() finds the last one added
  names_.push_back(std::move(name));
  rules_.emplace_back();
  defined_.push_back(false);
  return id;
}

Status GrammarBuilder::define(uint32_t rule, std::vector<std::vector<Element>> alternatives) {
  if (defined_[rule]) return make_error("rule '" + names_[rule] + "' is defined twice");
  for (const auto& alt : alternatives) n_elements_ += alt.size() + 1;
  if (n_elements_ > kMaxGrammarElements || names_.size() > kMaxGrammarRules)
    return make_error("the grammar is too large (over " + std::to_string(kMaxGrammarElements) +
                      " elements or " + std::to_string(kMaxGrammarRules) + " rules)");
  rules_[rule] = std::move(alternatives);
  defined_[rule] = true;
  return {};
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  // Most sets repeat (single characters, digit classes): share them.
  auto [it, added] = set_index_.try_emplace(set.bits, uint32_t(sets_.size()));
  if (added) sets_.push_back(set);
  return Element{Element::kBytes, it->second};
}

Element GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.add(b);
  return bytes(s);
}

Result<Grammar> GrammarBuilder::finish(const std::string& root_name) {
  const size_t n = names_.size();
  uint32_t root = uint32_t(n);
  for (size_t i = 0; i < n; ++i)
    if (names_[i] == root_name) root = uint32_t(i);
  if (root == n) return make_error("the grammar has no '" + root_name + "' rule");
  for (size_t i = 0; i < n; ++i)
    if (!defined_[i]) return make_error("rule '" + names_[i] + "' is used but not defined");

  // Productive rules (derive some finite string): a fixpoint. Alternatives that use an
  // unproductive rule can never complete, so they are dropped; a rule left without any is an
  // error, because the matcher must never enter a state it cannot finish.
  std::vector<bool> productive(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const auto& alt : rules_[r]) {
        const bool ok = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind != Element::kRule || productive[e.value];
        });
        if (ok) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  if (!productive[root]) return make_error("the grammar derives no finite string");
  for (size_t r = 0; r < n; ++r) {
    auto& alts = rules_[r];
    std::erase_if(alts, [&](const std::vector<Element>& alt) {
      return std::any_of(alt.begin(), alt.end(), [&](const Element& e) {
        return e.kind == Element::kRule && !productive[e.value];
      });
    });
  }

  // Left recursion (a rule reaching itself before consuming a byte) would make the matcher's
  // expansion grow without bound: refuse it, naming the rule.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r]) {
        const bool ok = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == Element::kRule && nullable[e.value];
        });
        if (ok) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Edges r -> s where s can come first in r; `tail` when s also ends its alternative (a
  // tail call, which does not grow the matcher's stack). A cycle through a non-tail edge is
  // left recursion; cycles of tail calls alone (e.g. (a*)*) are harmless.
  struct Edge {
    uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> leftmost(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (size_t i = 0; i < alt.size(); ++i) {
        const Element& e = alt[i];
        if (e.kind != Element::kRule) break;
        leftmost[r].push_back({e.value, i + 1 == alt.size()});
        if (!nullable[e.value]) break;
      }
  // Tarjan's strongly connected components, iteratively.
  std::vector<int64_t> index(n, -1), low(n, 0);
  std::vector<uint32_t> component(n, 0), scc_stack;
  std::vector<bool> on_stack(n, false);
  std::vector<std::pair<uint32_t, size_t>> dfs;
  int64_t counter = 0;
  uint32_t n_components = 0;
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    dfs.push_back({uint32_t(start), 0});
    while (!dfs.empty()) {
      auto& [r, next] = dfs.back();
      if (next == 0 && index[r] < 0) {
        index[r] = low[r] = counter++;
        scc_stack.push_back(r);
        on_stack[r] = true;
      }
      if (next < leftmost[r].size()) {
        const uint32_t s = leftmost[r][next++].to;
        if (index[s] < 0) {
          dfs.push_back({s, 0});
        } else if (on_stack[s]) {
          low[r] = std::min(low[r], index[s]);
        }
        continue;
      }
      if (low[r] == index[r]) {
        while (true) {
          const uint32_t s = scc_stack.back();
          scc_stack.pop_back();
          on_stack[s] = false;
          component[s] = n_components;
          if (s == r) break;
        }
        ++n_components;
      }
      const uint32_t done = r;
      dfs.pop_back();
      if (!dfs.empty()) low[dfs.back().first] = std::min(low[dfs.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : leftmost[r])
      if (!e.tail && component[e.to] == component[r])
        return make_error("rule '" + names_[r] + "' is left-recursive");

  Grammar g;
  g.root = root;
  g.rule_names = names_;
  g.byte_sets = std::move(sets_);
  g.alternatives.resize(n);
  g.elements.reserve(n_elements_);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : rules_[r]) {
      g.alternatives[r].push_back(uint32_t(g.elements.size()));
      g.elements.insert(g.elements.end(), alt.begin(), alt.end());
      g.elements.push_back(Element{Element::kEnd, 0});
    }
  }
  return g;
}

}  // namespace vela::constraint

#pragma once
// A GBNF expression together with the named rules it refers to, for generators that need rules
// of their own inside a larger grammar (the caller chooses a prefix that keeps names unique).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vela::constraint {

struct GbnfRules {
  std::string expression;                                  // matches the language
  std::vector<std::pair<std::string, std::string>> rules;  // name, body: what it refers to
};

// `gbnf` with every rule name prefixed by `prefix` (literals, classes, repetition counts and
// comments left as they are), so that grammars can be joined: its root becomes prefix + "root".
std::string prefix_gbnf_rules(std::string_view gbnf, const std::string& prefix);

}  // namespace vela::constraint

#pragma once
// A GBNF expression together with the named rules it refers to, for generators that need rules
// of their own inside a larger grammar (the caller chooses a prefix that keeps names unique).
#include <string>
#include <utility>
#include <vector>

namespace vela::constraint {

struct GbnfRules {
  std::string expression;                                  // matches the language
  std::vector<std::pair<std::string, std::string>> rules;  // name, body: what it refers to
};

}  // namespace vela::constraint

#pragma once
// A JSON string (quotes included) whose value is none of the given names: the keys an object's
// additional members may use when its named properties have schemas of their own. The keys are
// written without escapes (every character as itself), so a key's text and its decoded value
// agree and comparing the text against the names is exact; names holding characters that must
// be escaped ('"', '\', controls) can never be matched and need no exclusion.
// The names become a prefix tree over code points with one rule per node: at a node, the key
// may end (unless the node spells a name), continue into a child, or continue with any other
// character and then anything.
// Free functions; no thread-safety concerns.
#include <string>
#include <vector>

#include "constraint/gbnf_rules.h"

namespace vela::constraint {

// Rule names start with `rule_prefix` followed by '-'.
GbnfRules json_key_other_than(const std::vector<std::string>& names,
                              const std::string& rule_prefix);

}  // namespace vela::constraint

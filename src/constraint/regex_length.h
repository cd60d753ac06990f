#pragma once
// A regular expression intersected with a length bound in code points, as GBNF rules: the
// strings the pattern matches whose length lies in [min, max] (JSON Schema's pattern together
// with minLength / maxLength). The pattern becomes a position (Glushkov) automaton, one state per
// character leaf and no empty moves, whose product with a counter of the characters read so far
// (0..max, or saturating at min when there is no maximum) is written as one rule per live state;
// states that cannot reach an accepting one are dropped.
// Patterns and bounds whose product exceeds kMaxLengthProductStates states or
// kMaxLengthProductTransitions transitions are errors that say so.
// Free functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>

#include "constraint/gbnf_rules.h"
#include "util/result.h"

namespace vela::constraint {

inline constexpr size_t kMaxLengthProductStates = 100'000;
inline constexpr size_t kMaxLengthProductTransitions = 500'000;

struct LengthBounds {
  uint64_t min = 0;
  uint64_t max = 0;
  bool has_max = false;
};

// Rule names start with `rule_prefix` followed by '-'. In JSON-string mode the result describes
// the content of a JSON string literal, as regex_to_gbnf's does, and lengths count characters of
// the decoded string (an escape such as \n is one).
Result<GbnfRules> regex_with_length_to_gbnf(std::string_view pattern, bool json_string_content,
                                            const LengthBounds& bounds,
                                            const std::string& rule_prefix);

}  // namespace vela::constraint

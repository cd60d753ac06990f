#pragma once
// A regular expression (the common ECMAScript/Python subset) parsed into a tree whose leaves
// each match exactly one code point, written as a GBNF expression:
//   literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ \. ...), . (any character but
//   newline), classes [a-z] [^...] with \d \w \s inside, \d \D \w \W \s \S, groups ( ) (?: )
//   (?<name> ) (?P<name> ), alternation |, and the quantifiers * + ? {m} {m,} {m,n} (lazy forms
//   accepted; laziness does not change the language).
// The pattern is matched against the whole text: a leading '^' and a trailing '$' are accepted
// and ignored. Backreferences, lookaround and anchors inside the pattern are errors naming the
// construct.
// In JSON-string mode the leaves describe characters of the *content* of a JSON string
// literal: '"', '\' and controls are written as JSON escapes, and classes leave them out; a
// leaf is still one character of the decoded string.
// Free functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace vela::constraint {

struct RegexNode {
  enum Kind : uint8_t { kAtom, kConcat, kAlternation, kRepeat };
  Kind kind = kConcat;
  std::string atom;                 // kAtom: GBNF expression matching one code point
  std::vector<RegexNode> children;  // kConcat (empty: the empty string), kAlternation, kRepeat
  uint32_t min = 0;                 // kRepeat: at least min copies of children[0]
  uint32_t max = 0;                 // kRepeat: at most max copies, unless unbounded
  bool unbounded = false;
};

Result<RegexNode> parse_regex(std::string_view pattern, bool json_string_content);

}  // namespace vela::constraint

#pragma once
// A regular expression (the common ECMAScript/Python subset) as a GBNF expression, matched
// against the whole text (anchors at the ends are accepted and ignored):
//   literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ \. ...), . (any character but
//   newline), classes [a-z] [^...] with \d \w \s inside, \d \D \w \W \s \S, groups ( ) (?: )
//   (?<name> ) (?P<name> ), alternation |, and the quantifiers * + ? {m} {m,} {m,n} (lazy forms
//   accepted; laziness does not change the language).
// Backreferences, lookaround and anchors inside the pattern are errors naming the construct.
// In JSON-string mode the expression describes the *content* of a JSON string literal: the
// characters '"', '\' and controls are written as JSON escapes, and classes leave them out.
// Free functions; no thread-safety concerns.
#include <string>
#include <string_view>

#include "util/result.h"

namespace vela::constraint {

Result<std::string> regex_to_gbnf(std::string_view pattern, bool json_string_content);

// `bytes` as a GBNF string literal, quotes included.
std::string gbnf_literal(std::string_view bytes);

}  // namespace vela::constraint

#pragma once
// GBNF, the EBNF dialect of llama.cpp grammars, compiled to a byte Grammar:
//   rule-name ::= alternative | alternative ...      (root ::= ... is the start rule)
//   "literal" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [a-z0-9_] and [^...] character
//   classes over code points, . (any character), rule references, ( groups ), and the
//   postfix operators * + ? {m} {m,} {m,n}. # starts a comment to the end of the line.
// A rule ends at a newline unless inside parentheses, after `|` or `::=`, or when the next line
// starts with `|`. Errors name the line and what was expected.
// Free functions; no thread-safety concerns.
#include <string_view>

#include "constraint/grammar.h"
#include "util/result.h"

namespace vela::constraint {

// Largest repetition count ({m,n}) accepted.
inline constexpr uint32_t kMaxRepetition = 100'000;
// Deepest nesting of parenthesized groups accepted.
inline constexpr size_t kMaxGroupNesting = 1000;

Result<Grammar> compile_gbnf(std::string_view text);

}  // namespace vela::constraint

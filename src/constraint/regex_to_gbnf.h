#pragma once
// A regular expression (the subset parse_regex accepts, see regex_ast.h) as a GBNF expression,
// matched against the whole text. In JSON-string mode the expression describes the *content* of
// a JSON string literal: the characters '"', '\' and controls are written as JSON escapes, and
// classes leave them out.
// Free functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace vela::constraint {

Result<std::string> regex_to_gbnf(std::string_view pattern, bool json_string_content);

// `bytes` as a GBNF string literal, quotes included.
std::string gbnf_literal(std::string_view bytes);
// Code point `cp` as a GBNF escape (\UHHHHHHHH), for character classes.
std::string gbnf_char_escape(uint32_t cp);

}  // namespace vela::constraint

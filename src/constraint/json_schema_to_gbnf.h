#pragma once
// JSON Schema (the subset structured-output APIs use) as a GBNF grammar whose language is a
// subset of the documents the schema accepts:
//   type (one or a list), properties / required (members in the schema's order, the required
//   ones always, the optional ones each present or left out, in any combination; required keys
//   that are not in properties follow them, with the additionalProperties schema),
//   additionalProperties (absent or false: no other members; true or a schema: extra members
//   after the named ones, under keys written without escapes and unlike every named key),
//   items / prefixItems / minItems / maxItems, enum / const (any length; at most
//   kMaxEnumBytes of JSON text in all), anyOf, oneOf (as anyOf: exact when no value satisfies
//   two branches, e.g. branches of different types or with different const / enum values of a
//   discriminator property; otherwise values of the overlap are accepted too), allOf with one
//   member, $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion allowed),
//   minLength / maxLength (in characters of the decoded string: an escape such as \n is one),
//   pattern (matched against the whole string) and format (date, time, date-time, uuid, email,
//   ipv4), also together with minLength / maxLength (the pattern's automaton times a length
//   counter, see regex_length.h; refused when that needs too many states), and integer /
//   number bounds (minimum, maximum and their exclusive forms; numbers with bounds take integer
//   values, or decimals whose integer part keeps them inside the bounds: within [0, 1] "0.25",
//   within [-2, 3] "-1.75", not "2.5" for a maximum of 2.5).
// Keywords that would need more (not, if/then/else, patternProperties, uniqueItems,
// multipleOf, minProperties, ...) are errors naming the keyword and its location, so a request
// never silently gets output its schema rejects.
// Numbers have at most 16 integer digits, 15 fraction digits and a 3-digit exponent, so a
// sampler cannot stay inside a number forever.
// Free functions; no thread-safety concerns.
#include <string>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace vela::constraint {

struct JsonGrammarOptions {
  // Whitespace between JSON tokens: compact (at most one space after ':' and ','), or a small
  // fixed allowance of spaces, tabs and newlines (at most kLooseWhitespace characters).
  bool compact_whitespace = true;
};
inline constexpr int kLooseWhitespace = 8;
// Most JSON text an enum's values (together) or a const may have.
inline constexpr size_t kMaxEnumBytes = 1 << 20;

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        const JsonGrammarOptions& options = {});
// Any JSON object ({"type": "json_object"}).
std::string json_object_gbnf(const JsonGrammarOptions& options = {});

}  // namespace vela::constraint

#pragma once
// Tokens -> Template, following Jinja2's grammar: statements for, if/elif/else, set (and
// block set, namespace attributes), macro, call, filter, with, break/continue, do, print,
// block/generation/autoescape bodies; the full expression grammar (conditional expressions,
// and/or/not, comparison chains, in/not in, arithmetic, ~, filters, tests, calls, subscripts,
// slices, list/tuple/dict literals).
// Nesting is bounded (statements, expression depth, parser recursion) so hostile input gives
// a syntax error rather than exhausting the stack.
// Thread-safety: stateless function.
#include <string_view>

#include "template/ast.h"

namespace vela::jinja {

inline constexpr int kMaxStatementNesting = 100;
inline constexpr int kMaxExpressionDepth = 150;

// Throws RenderError("syntax error (line N): ...") on invalid templates.
Template parse_template(std::string_view source);

}  // namespace vela::jinja

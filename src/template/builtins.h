#pragma once
// The engine's built-in vocabulary: operators, filters, tests, methods of str/list/dict, and
// the global functions (range, namespace, dict, joiner, cycler, raise_exception,
// strftime_now). Each lookup returns null / false for unknown names so the interpreter can
// report them where they are used.
// Thread-safety: stateless lookups; the functions act on the calling render's Interpreter.
#include <optional>
#include <string_view>

#include "template/ast.h"
#include "template/interpreter.h"

namespace vela::jinja {

// ---- operators (operators.cpp) ----
Value binary_op(Interpreter& in, BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);
// Python's obj[start:stop:step] for lists, tuples and strings.
Value slice_value(Interpreter& in, const Value& obj, std::optional<int64_t> start,
                  std::optional<int64_t> stop, std::optional<int64_t> step);

// ---- filters (filters.cpp, filters_seq.cpp) and tests (tests.cpp) ----
using FilterFn = Value (*)(Interpreter& in, const Value& v, Args& args);
using TestFn = bool (*)(Interpreter& in, const Value& v, Args& args);
FilterFn find_filter(std::string_view name);
FilterFn find_sequence_filter(std::string_view name);
TestFn find_test(std::string_view name);

// ---- methods (methods.cpp) ----
// Whether `self` (a str, list, tuple or dict) has a method `name`.
bool has_method(const Value& self, std::string_view name);
// Calls it; only valid when has_method() is true.
Value call_method(Interpreter& in, const Value& self, std::string_view name, Args& args);

// ---- global functions (globals.cpp) ----
BuiltinFn find_global(std::string_view name);

}  // namespace vela::jinja

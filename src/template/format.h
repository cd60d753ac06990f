#pragma once
// Text forms of values, as Python prints them: str() (what `{{ x }}` outputs), repr(), float
// repr, JSON (the chat-template `tojson` filter), and the `%` / str.format string formatting.
// Thread-safety: stateless functions, safe from any thread.
#include <string>
#include <string_view>
#include <vector>

#include "template/value.h"

namespace vela::jinja {

// Python's repr(float): shortest round-trip digits, "1.0", "1e+16", "inf", "nan".
std::string python_float_repr(double f);
// Python's str(): strings as they are, None -> "None", True -> "True", containers via repr.
std::string to_str(const Value& v);
void append_str(std::string& out, const Value& v);
// Python's repr().
std::string repr(const Value& v, int depth = 0);
void append_repr(std::string& out, const Value& v, int depth = 0);
// Python's repr() of a string: quote choice and escapes.
void append_string_repr(std::string& out, std::string_view s);

struct JsonOptions {
  std::string indent;  // used when `pretty`
  bool pretty = false;
  bool sort_keys = false;
  std::string item_separator = ", ";  // Python's defaults: ", " and ": " (or "," when pretty)
  std::string key_separator = ": ";
};
// json.dumps(v, ensure_ascii=False, ...) as the chat-template tojson filter calls it: no HTML
// escaping, keys in insertion order unless sort_keys. Fails for values JSON cannot hold.
std::string to_json(const Value& v, const JsonOptions& options);
// A JSON string literal with json.dumps' escapes (non-ASCII kept).
void append_json_string(std::string& out, std::string_view s);

// Python's `format % args`: `args` is a tuple of positional values or, for %(name)s, a dict.
std::string percent_format(std::string_view format, const Value& args);
// Python's str.format with positional and keyword arguments.
std::string brace_format(std::string_view format, const std::vector<Value>& args,
                         const std::vector<std::pair<std::string, Value>>& kwargs);

}  // namespace vela::jinja

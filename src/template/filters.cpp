// Jinja's scalar and string filters (upper, trim, replace, indent, default, int, round,
// tojson, ...). Like Jinja, string filters first convert their input with str(); undefined
// inputs become "".
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "template/builtins.h"
#include "template/format.h"
#include "template/text.h"

namespace vela::jinja {

namespace {

int64_t int_option(const Args& args, size_t i, std::string_view name, int64_t fallback) {
  const Value* v = args.get(i, name);
  if (!v) return fallback;
  if (!v->is_int()) fail("'" + std::string(name) + "' must be an integer");
  return v->as_int();
}

bool bool_option(const Args& args, size_t i, std::string_view name, bool fallback) {
  const Value* v = args.get(i, name);
  return v ? truthy(*v) : fallback;
}

Value f_upper(Interpreter&, const Value& v, Args&) {
  return Value::string(str_upper(to_str(v)));
}
Value f_lower(Interpreter&, const Value& v, Args&) {
  return Value::string(str_lower(to_str(v)));
}
Value f_capitalize(Interpreter&, const Value& v, Args&) {
  return Value::string(str_capitalize(to_str(v)));
}

// Jinja's title: words begin after runs of [-\s({[<]; other characters are lowercased.
Value f_title(Interpreter&, const Value& v, Args&) {
  std::string out;
  bool word_start = true;
  for (char32_t c : decode_utf8(to_str(v))) {
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
    if (sep) {
      append_utf8(out, c);
      word_start = true;
    } else {
      append_utf8(out, word_start ? to_upper(c) : to_lower(c));
      word_start = false;
    }
  }
  return Value::string(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, Args& args) {
  args.check("trim", 1, {"chars"});
  const Value* chars = args.get(0, "chars");
  std::string set;
  const bool have = chars && !chars->is_none();
  if (have) set = to_str(*chars);
  return Value::string(str_strip(to_str(v), have ? &set : nullptr, true, true));
}

Value f_replace(Interpreter& in, const Value& v, Args& args) {
  args.check("replace", 3, {"old", "new", "count"});
  const Value* from = args.get(0, "old");
  const Value* to = args.get(1, "new");
  if (!from || !to) fail("replace() needs 'old' and 'new'");
  const std::string s = to_str(v), a = to_str(*from), b = to_str(*to);
  const Value* count = args.get(2, "count");
  const int64_t n = (count && !count->is_none()) ? int_option(args, 2, "count", -1) : -1;
  in.check_size(s.size() + (a.empty() ? utf8_length(s) + 1 : str_count(s, a)) * b.size());
  return Value::string(str_replace(s, a, b, n));
}

Value f_center(Interpreter& in, const Value& v, Args& args) {
  args.check("center", 1, {"width"});
  Args method_args;
  method_args.positional.push_back(Value::integer(int_option(args, 0, "width", 80)));
  Value s = Value::string(to_str(v));
  return call_method(in, s, "center", method_args);
}

Value f_indent(Interpreter& in, const Value& v, Args& args) {
  args.check("indent", 3, {"width", "first", "blank"});
  if (v.is_undefined()) fail(v.undefined_message());
  if (!v.is_string()) fail(std::string("indent expects a string, not ") + type_name(v));
  std::string indention;
  const Value* w = args.get(0, "width");
  if (w && w->is_string()) {
    indention = w->str();
  } else {
    const int64_t n = w ? int_option(args, 0, "width", 4) : 4;
    in.check_size(static_cast<size_t>(std::max<int64_t>(n, 0)));
    indention.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
  }
  const bool first = bool_option(args, 1, "first", false);
  const bool blank = bool_option(args, 2, "blank", false);
  const std::string s = to_str(v) + "\n";
  const std::vector<std::string> lines = str_splitlines(s, false);
  in.check_size(s.size() + lines.size() * indention.size());
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

Value f_truncate(Interpreter&, const Value& v, Args& args) {
  args.check("truncate", 4, {"length", "killwords", "end", "leeway"});
  const int64_t length = int_option(args, 0, "length", 255);
  const bool killwords = bool_option(args, 1, "killwords", false);
  const Value* end_v = args.get(2, "end");
  const std::string end = end_v ? to_str(*end_v) : "...";
  const int64_t leeway = int_option(args, 3, "leeway", 5);
  const auto end_len = static_cast<int64_t>(utf8_length(end));
  if (length < end_len) fail("expected length >= " + std::to_string(end_len));
  if (leeway < 0) fail("expected leeway >= 0");
  if (v.is_undefined()) return v;
  if (!v.is_string() && !v.is_list_like() && !v.is_mapping()) {
    fail(std::string("object of type '") + type_name(v) + "' has no len()");
  }
  // Jinja measures len() of whatever it gets: short lists and dicts come back unchanged.
  if ((v.is_list_like() && static_cast<int64_t>(v.list_obj()->items.size()) <= length + leeway) ||
      (v.is_mapping() && static_cast<int64_t>(v.dict_obj()->entries.size()) <= length + leeway)) {
    return v;
  }
  const std::string s = to_str(v);
  if (static_cast<int64_t>(utf8_length(s)) <= length + leeway) return Value::string(s);
  std::string head = utf8_substr(s, 0, length - end_len);
  if (!killwords) {
    const size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head.resize(sp);
  }
  return Value::string(head + end);
}

Value f_wordcount(Interpreter&, const Value& v, Args&) {
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : decode_utf8(to_str(v))) {
    const bool w = is_alnum(c) || c == '_';
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

Value f_escape(Interpreter&, const Value& v, Args&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

Value f_striptags(Interpreter&, const Value& v, Args&) {
  // Remove <...> tags and <!-- --> comments, then collapse whitespace (as Jinja does).
  const std::string s = to_str(v);
  std::string text;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t e = s.find("-->", i + 4);
      if (e != std::string::npos) {
        i = e + 2;
        continue;
      }
    }
    if (s[i] == '<') {
      const size_t e = s.find('>', i + 1);
      if (e != std::string::npos) {
        i = e;
        continue;
      }
    }
    text.push_back(s[i]);
  }
  std::string out;
  for (const std::string& w : str_split(text, nullptr, -1)) {
    if (!out.empty()) out.push_back(' ');
    out += w;
  }
  return Value::string(std::move(out));
}

Value f_safe(Interpreter&, const Value& v, Args&) {
  return v;
}
Value f_string(Interpreter&, const Value& v, Args&) {
  return Value::string(to_str(v));
}
Value f_pprint(Interpreter&, const Value& v, Args&) {
  return Value::string(repr(v));
}

Value f_format(Interpreter& in, const Value& v, Args& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    fail("can't handle positional and keyword arguments at the same time");
  }
  Value params;
  if (!args.keyword.empty()) {
    DictObj* d = in.heap().new_dict();
    for (const auto& [k, val] : args.keyword) {
      in.heap().charge(kDictEntryCost);
      d->set(Value::string(k), val);
    }
    params = Value::dict(d);
  } else {
    params = in.new_tuple(args.positional);
  }
  return in.new_string(percent_format(to_str(v), params));
}

Value f_default(Interpreter&, const Value& v, Args& args) {
  args.check("default", 2, {"default_value", "boolean"});
  const bool boolean = bool_option(args, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) {
    return args.get_or(0, "default_value", Value::string(""));
  }
  return v;
}

Value f_abs(Interpreter&, const Value& v, Args&) {
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) fail("integer result too large");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_number()) return Value::number(std::fabs(v.as_double()));
  fail(std::string("bad operand type for abs(): '") + type_name(v) + "'");
}

// Python's float(str): whitespace around, underscores between digits, inf/nan words.
bool parse_python_float(const std::string& raw, double* out) {
  std::string s = str_strip(raw, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !isdigit(static_cast<unsigned char>(s[i + 1]))) {
        return false;
      }
      continue;
    }
    clean.push_back(s[i]);
  }
  if (clean.empty()) return false;
  const std::string lower = str_lower(clean);
  const std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    *out = body == "nan" ? NAN : INFINITY;
    if (lower[0] == '-') *out = -*out;
    return true;
  }
  for (char c : body) {
    if (!(isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) {
      return false;
    }
  }
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return end && *end == '\0';
}

// Python's int(str, base).
bool parse_python_int(const std::string& raw, int base, int64_t* out) {
  std::string s = str_strip(raw, nullptr, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (base == 16 || base == 8 || base == 2 || base == 0) {
    if (i + 1 < s.size() && s[i] == '0') {
      const char p = static_cast<char>(s[i + 1] | 0x20);
      const int b = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (b && (base == 0 || base == b)) {
        base = b;
        i += 2;
      }
    }
    if (base == 0) base = 10;
  }
  if (i >= s.size()) return false;
  int64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && prev_digit && i + 1 < s.size()) {
      prev_digit = false;
      continue;
    }
    const char c = static_cast<char>(s[i] | 0x20);
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return false;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return false;
    prev_digit = true;
  }
  if (!prev_digit) return false;
  *out = neg ? -v : v;
  return true;
}

Value f_int(Interpreter&, const Value& v, Args& args) {
  args.check("int", 2, {"default", "base"});
  const Value fallback = args.get_or(0, "default", Value::integer(0));
  const int64_t base = int_option(args, 1, "base", 10);
  if (v.is_undefined()) fail(v.undefined_message());  // Python's int(Undefined) raises
  if (v.is_int()) return Value::integer(v.as_int());
  double d;
  if (v.kind() == Kind::kFloat) {
    d = v.as_double();
  } else if (v.is_string()) {
    int64_t i;
    if (base >= 0 && base <= 36 && base != 1 &&
        parse_python_int(v.str(), static_cast<int>(base), &i)) {
      return Value::integer(i);
    }
    if (!parse_python_float(v.str(), &d)) return fallback;
  } else {
    return fallback;
  }
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
  return Value::integer(static_cast<int64_t>(std::trunc(d)));
}

Value f_float(Interpreter&, const Value& v, Args& args) {
  args.check("float", 1, {"default"});
  if (v.is_undefined()) fail(v.undefined_message());
  if (v.is_number()) return Value::number(v.as_double());
  double d;
  if (v.is_string() && parse_python_float(v.str(), &d)) return Value::number(d);
  return args.get_or(0, "default", Value::number(0.0));
}

Value f_round(Interpreter&, const Value& v, Args& args) {
  args.check("round", 2, {"precision", "method"});
  const int64_t precision = int_option(args, 0, "precision", 0);
  const std::string method = to_str(args.get_or(1, "method", Value::string("common")));
  if (method != "common" && method != "ceil" && method != "floor") {
    fail("method must be common, ceil or floor");
  }
  if (!v.is_number()) fail(std::string("type ") + type_name(v) + " doesn't define __round__");
  if (method == "common" && v.is_int()) {
    if (precision >= 0) return Value::integer(v.as_int());
    const double p = std::pow(10.0, static_cast<double>(-precision));
    return Value::integer(static_cast<int64_t>(std::nearbyint(v.as_double() / p) * p));
  }
  const double x = v.as_double();
  if (!std::isfinite(x)) return Value::number(x);
  if (method != "common") {
    const double p = std::pow(10.0, static_cast<double>(precision));
    return Value::number((method == "ceil" ? std::ceil(x * p) : std::floor(x * p)) / p);
  }
  if (precision > 300) return Value::number(x);
  if (precision < 0) {
    const double p = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(x / p) * p);
  }
  if (precision == 0) return Value::number(std::nearbyint(x));
  // printf rounds the exact binary value half-to-even, as Python's round() does.
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
  return Value::number(std::strtod(buf, nullptr));
}

Value f_tojson(Interpreter& in, const Value& v, Args& args) {
  args.check("tojson", 1, {"indent", "ensure_ascii", "separators", "sort_keys"});
  JsonOptions o;
  const Value* indent = args.get(0, "indent");
  if (indent && !indent->is_none()) {
    o.pretty = true;
    o.item_separator.assign(1, ',');
    if (indent->is_string()) {
      o.indent = indent->str();
    } else if (indent->is_int()) {
      o.indent.assign(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 1000)), ' ');
    } else {
      fail("tojson indent must be an integer or a string");
    }
  }
  if (const Value* seps = args.get(kKeywordOnly, "separators"); seps && !seps->is_none()) {
    std::vector<Value> parts = in.iterate(*seps);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      fail("tojson separators must be a pair of strings");
    }
    o.item_separator = parts[0].str();
    o.key_separator = parts[1].str();
  }
  o.sort_keys = bool_option(args, kKeywordOnly, "sort_keys", false);
  if (bool_option(args, kKeywordOnly, "ensure_ascii", false)) {
    fail("tojson(ensure_ascii=true) is not supported");
  }
  return in.new_string(to_json(v, o));
}

Value f_attr(Interpreter& in, const Value& v, Args& args) {
  const Value* name = args.get(0, "name");
  if (!name || !name->is_string()) fail("attr() needs an attribute name");
  // Python attributes only: a dict's keys are items, not attributes.
  if (v.is_mapping() && !has_method(v, name->str())) {
    return Value::undefined("'dict object' has no attribute '" + name->str() + "'");
  }
  return in.get_attr(v, name->str());
}

struct Entry {
  const char* name;
  FilterFn fn;
};
constexpr Entry kFilters[] = {
    {"upper", f_upper},
    {"lower", f_lower},
    {"capitalize", f_capitalize},
    {"title", f_title},
    {"trim", f_trim},
    {"replace", f_replace},
    {"center", f_center},
    {"indent", f_indent},
    {"truncate", f_truncate},
    {"wordcount", f_wordcount},
    {"escape", f_escape},
    {"e", f_escape},
    {"forceescape", f_escape},
    {"striptags", f_striptags},
    {"safe", f_safe},
    {"string", f_string},
    {"pprint", f_pprint},
    {"format", f_format},
    {"default", f_default},
    {"d", f_default},
    {"abs", f_abs},
    {"int", f_int},
    {"float", f_float},
    {"round", f_round},
    {"tojson", f_tojson},
    {"attr", f_attr},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& e : kFilters) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

}  // namespace vela::jinja

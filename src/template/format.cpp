#include "template/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "template/text.h"

namespace vela::jinja {

std::string python_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+17" (shortest round-trip digits)
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    i = 1;
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e_pos; ++k) {
    if (sci[k] != '.') digits.push_back(sci[k]);
  }
  const int exp = std::atoi(sci.c_str() + e_pos + 1);
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(exp) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1);
      out += '.';
      out += digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out += ebuf;
  return out;
}

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kString:
      out += v.str();
      return;
    default:
      append_repr(out, v, 0);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || c == 0x180E || (c >= 0x2000 && c <= 0x200F)) return false;
  if ((c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF0 && c <= 0xFFFB)) return false;
  if (c == 0xFFFE || c == 0xFFFF || c >= 0xE0000) return false;
  return true;
}

void check_depth(int depth) {
  if (depth > kMaxValueDepth) fail("value nested too deeply (or contains itself)");
}

}  // namespace

void append_string_repr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out.push_back(quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back(quote);
}

void append_repr(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Kind::kFloat:
      out += python_float_repr(v.as_double());
      return;
    case Kind::kString:
      append_string_repr(out, v.str());
      return;
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = v.kind() == Kind::kTuple;
      const auto& items = v.list_obj()->items;
      out += tuple ? '(' : '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        append_repr(out, items[i], depth + 1);
      }
      if (tuple && items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      const bool ns = v.kind() == Kind::kNamespace;
      if (ns) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.dict_obj()->entries) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k, depth + 1);
        out += ": ";
        append_repr(out, val, depth + 1);
      }
      out += '}';
      if (ns) out += '>';
      return;
    }
    case Kind::kFunc:
      if (v.func_obj()->type == FuncObj::Type::kMacro) {
        out += "<Macro '" + v.func_obj()->name + "'>";
      } else {
        out += "<function " + v.func_obj()->name + ">";
      }
      return;
    case Kind::kLoop:
      out += "<LoopContext>";
      return;
  }
}

std::string repr(const Value& v, int depth) {
  std::string out;
  append_repr(out, v, depth);
  return out;
}

// ---- JSON ----

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

namespace {

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return k.str();
    case Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Kind::kNone:
      return "null";
    case Kind::kInt:
      return std::to_string(k.as_int());
    case Kind::kFloat:
      return python_float_repr(k.as_double());
    default:
      fail(std::string("keys must be str, int, float, bool or None, not ") + type_name(k));
  }
}

void newline_indent(std::string& out, const JsonOptions& o, int level) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) out += o.indent;
}

void append_json(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Kind::kFloat: {
      const double f = v.as_double();
      if (std::isnan(f)) {
        out += "NaN";
      } else if (std::isinf(f)) {
        out += f < 0 ? "-Infinity" : "Infinity";
      } else {
        out += python_float_repr(f);
      }
      return;
    }
    case Kind::kString:
      append_json_string(out, v.str());
      return;
    case Kind::kList:
    case Kind::kTuple: {
      const auto& items = v.list_obj()->items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.pretty) newline_indent(out, o, depth + 1);
        append_json(out, items[i], o, depth + 1);
      }
      if (o.pretty) newline_indent(out, o, depth);
      out.push_back(']');
      return;
    }
    case Kind::kDict: {
      const auto& entries = v.dict_obj()->entries;
      if (entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> order;
      order.reserve(entries.size());
      for (const auto& e : entries) order.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(order.begin(), order.end(),
                         [](const auto* a, const auto* b) { return less(a->first, b->first); });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* e : order) {
        if (!first) out += o.item_separator;
        first = false;
        if (o.pretty) newline_indent(out, o, depth + 1);
        append_json_string(out, json_key(e->first));
        out += o.key_separator;
        append_json(out, e->second, o, depth + 1);
      }
      if (o.pretty) newline_indent(out, o, depth);
      out.push_back('}');
      return;
    }
    default:
      fail(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  append_json(out, v, options, 0);
  return out;
}

// ---- printf-style formatting ----

namespace {

struct Spec {
  bool left = false, plus = false, space = false, zero = false, alt = false;
  int width = -1, precision = -1;
};

std::string pad(std::string body, const Spec& s, bool numeric) {
  const size_t len = utf8_length(body);
  if (s.width < 0 || len >= static_cast<size_t>(s.width)) return body;
  const size_t n = static_cast<size_t>(s.width) - len;
  if (s.left) return body + std::string(n, ' ');
  if (s.zero && numeric) {
    size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    return body.substr(0, sign) + std::string(n, '0') + body.substr(sign);
  }
  return std::string(n, ' ') + body;
}

std::string format_number(const Value& v, char conv, const Spec& s) {
  if (!v.is_number()) {
    fail(std::string("%") + conv + " format: a real number is required, not " + type_name(v));
  }
  std::string body;
  char buf[512];
  if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
    const double d = v.as_double();
    const int64_t n = v.kind() == Kind::kFloat ? static_cast<int64_t>(std::trunc(d)) : v.as_int();
    const unsigned long long mag =
        n < 0 ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
    const char* f = conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : conv == 'o' ? "%llo" : "%llu";
    std::snprintf(buf, sizeof(buf), f, mag);
    body = buf;
    if (s.alt && conv != 'd' && conv != 'i') body = std::string("0") + conv + body;
    if (n < 0) body = "-" + body;
  } else {
    const int prec = s.precision < 0 ? 6 : std::min(s.precision, 100);
    const char fmt[] = {'%', '.', '*', conv, 0};
    std::snprintf(buf, sizeof(buf), fmt, prec, v.as_double());
    body = buf;
  }
  if (body[0] != '-') {
    if (s.plus) {
      body = "+" + body;
    } else if (s.space) {
      body = " " + body;
    }
  }
  return pad(body, s, true);
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args) {
  std::vector<Value> positional;
  const DictObj* mapping = nullptr;
  // Python treats any non-tuple, non-string argument with __getitem__ (lists too) as a
  // possible mapping: it is the single positional value and leftovers are not an error.
  bool lenient = false;
  if (args.kind() == Kind::kTuple) {
    positional = args.list_obj()->items;
  } else {
    if (args.kind() == Kind::kDict) mapping = args.dict_obj();
    lenient = args.kind() == Kind::kDict || args.kind() == Kind::kList || args.is_undefined();
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) fail("not enough arguments for format string");
    return positional[next++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    const Value* named = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      named = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!named) fail("format key not found: " + std::string(fmt.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    Spec s;
    for (; i < fmt.size(); ++i) {
      const char c = fmt[i];
      if (c == '-')
        s.left = true;
      else if (c == '+')
        s.plus = true;
      else if (c == ' ')
        s.space = true;
      else if (c == '0')
        s.zero = true;
      else if (c == '#')
        s.alt = true;
      else
        break;
    }
    auto read_int = [&](int& dst) {
      if (i < fmt.size() && fmt[i] == '*') {
        const Value& w = take();
        if (!w.is_int()) fail("* wants int");
        dst = static_cast<int>(std::min<int64_t>(w.as_int(), 1 << 20));
        ++i;
        return;
      }
      int n = -1;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        n = (n < 0 ? 0 : n) * 10 + (fmt[i] - '0');
        if (n > (1 << 20)) fail("format width too large");
        ++i;
      }
      if (n >= 0) dst = n;
    };
    read_int(s.width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      s.precision = 0;
      read_int(s.precision);
    }
    while (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    const Value& v = named ? *named : take();
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string body = conv == 's' ? to_str(v) : repr(v);
        if (s.precision >= 0) body = utf8_substr(body, 0, s.precision);
        out += pad(body, s, false);
        break;
      }
      case 'c': {
        std::string body;
        if (v.is_string() && utf8_length(v.str()) == 1) {
          body = v.str();
        } else if (v.is_int() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
          append_utf8(body, static_cast<char32_t>(v.as_int()));
        } else {
          fail("%c requires an int or a single character");
        }
        out += pad(body, s, false);
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        out += format_number(v, conv, s);
        break;
      default:
        fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (!lenient && next < positional.size()) {
    fail("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

// One replacement field's format spec: [[fill]align][sign][0][width][.precision][type].
std::string apply_format_spec(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  const std::u32string cps = decode_utf8(spec);
  size_t i = 0;
  char32_t fill = ' ';
  char align = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    fill = cps[0];
    align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    align = static_cast<char>(cps[0]);
    i = 1;
  }
  Spec s;
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) {
    s.plus = cps[i] == '+';
    s.space = cps[i] == ' ';
    ++i;
  }
  if (i < cps.size() && cps[i] == '0') {
    s.zero = true;
    ++i;
  }
  int width = -1;
  while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
    width = (width < 0 ? 0 : width) * 10 + static_cast<int>(cps[i] - '0');
    if (width > (1 << 20)) fail("format width too large");
    ++i;
  }
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    s.precision = 0;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
      s.precision = s.precision * 10 + static_cast<int>(cps[i] - '0');
      if (s.precision > 100) fail("format precision too large");
      ++i;
    }
  }
  char type = 0;
  if (i < cps.size()) type = static_cast<char>(cps[i++]);
  if (i != cps.size()) fail("invalid format specifier");
  std::string body;
  if (type == 0 || type == 's') {
    body = to_str(v);
    if (s.precision >= 0) body = utf8_substr(body, 0, s.precision);
    if (!align) align = v.is_number() ? '>' : '<';
  } else {
    if (type == 'n') type = 'd';
    Spec num = s;
    num.width = -1;
    body = format_number(v, type, num);
    if (!align) align = s.zero ? '=' : '>';
    if (s.zero && fill == ' ' && align == '=') fill = '0';
  }
  const size_t len = utf8_length(body);
  if (width < 0 || len >= static_cast<size_t>(width)) return body;
  const size_t n = static_cast<size_t>(width) - len;
  std::string fill_s;
  append_utf8(fill_s, fill);
  auto repeat = [&](size_t k) {
    std::string r;
    for (size_t j = 0; j < k; ++j) r += fill_s;
    return r;
  };
  switch (align) {
    case '<':
      return body + repeat(n);
    case '^':
      return repeat(n / 2) + body + repeat(n - n / 2);
    case '=': {
      const size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+')) ? 1 : 0;
      return body.substr(0, sign) + repeat(n) + body.substr(sign);
    }
    default:
      return repeat(n) + body;
  }
}

}  // namespace

std::string brace_format(std::string_view fmt, const std::vector<Value>& args,
                         const std::vector<std::pair<std::string, Value>>& kwargs) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        fail("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) fail("Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec;
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) fail("invalid conversion in format string");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.size()) fail("Replacement index out of range for positional args");
      v = &args[auto_index++];
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t idx = 0;
      for (char d : field) {
        if (d < '0' || d > '9') fail("unsupported format field");
        idx = idx * 10 + static_cast<size_t>(d - '0');
        if (idx > args.size()) break;
      }
      if (idx >= args.size()) fail("Replacement index out of range for positional args");
      v = &args[idx];
    } else {
      for (const auto& [name, val] : kwargs) {
        if (name == field) v = &val;
      }
      if (!v) fail("format key not found: '" + std::string(field) + "'");
    }
    if (conversion == 'r' || conversion == 'a') {
      out += apply_format_spec(Value::string(repr(*v)), spec);
    } else if (conversion == 's' || conversion == 0) {
      out += apply_format_spec(conversion == 's' ? Value::string(to_str(*v)) : *v, spec);
    } else {
      fail("unknown conversion in format string");
    }
  }
  return out;
}

}  // namespace vela::jinja

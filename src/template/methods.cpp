// Methods of str, list, tuple and dict that chat templates call (`content.strip()`,
// `tool.items()`, `names.append(x)`, ...), with Python's semantics. Unlike Hugging Face's
// immutable sandbox, the list/dict mutators (append, pop, update, ...) are allowed: templates
// written for other engines use them, and the heap makes cycles harmless.
#include <algorithm>
#include <cstring>

#include "template/builtins.h"
#include "template/format.h"
#include "template/text.h"

namespace vela::jinja {

namespace {

constexpr const char* kStrMethods[] = {
    "strip",        "lstrip",      "rstrip",  "split",   "rsplit",    "splitlines",
    "startswith",   "endswith",    "upper",   "lower",   "title",     "capitalize",
    "swapcase",     "casefold",    "replace", "find",    "rfind",     "index",
    "rindex",       "count",       "join",    "format",  "isdigit",   "isalpha",
    "isalnum",      "isspace",     "isupper", "islower", "isnumeric", "isdecimal",
    "zfill",        "center",      "ljust",   "rjust",   "partition", "rpartition",
    "removeprefix", "removesuffix"};
constexpr const char* kListMethods[] = {"append", "extend",  "insert", "pop",  "remove", "index",
                                        "count",  "reverse", "sort",   "copy", "clear"};
constexpr const char* kTupleMethods[] = {"index", "count"};
constexpr const char* kDictMethods[] = {"items",  "keys",       "values", "get",   "pop",
                                        "update", "setdefault", "copy",   "clear", "popitem"};

template <size_t N>
bool in_table(const char* const (&table)[N], std::string_view name) {
  for (const char* m : table) {
    if (name == m) return true;
  }
  return false;
}

const std::string& str_arg(const Args& args, size_t i, std::string_view name,
                           std::string_view method) {
  const Value* v = args.get(i, name);
  if (!v || !v->is_string()) {
    fail(std::string(method) + "() argument must be str, not " + (v ? type_name(*v) : "nothing"));
  }
  return v->str();
}

int64_t int_arg(const Args& args, size_t i, std::string_view name, int64_t fallback) {
  const Value* v = args.get(i, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_int())
    fail(std::string("'") + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->as_int();
}

// Optional `chars` argument of strip(): null for whitespace.
const std::string* chars_arg(const Args& args) {
  const Value* v = args.get(0, "chars");
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) fail("strip arg must be None or str");
  return &v->str();
}

// Code-point index of byte offset `pos` in s.
int64_t cp_index(const std::string& s, size_t pos) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, pos)));
}

Value strings_to_list(Interpreter& in, std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return in.new_list(std::move(items));
}

template <class Pred>
bool all_chars(const std::string& s, Pred pred) {
  const std::u32string cps = decode_utf8(s);
  if (cps.empty()) return false;
  for (char32_t c : cps) {
    if (!pred(c)) return false;
  }
  return true;
}

std::string justify(Interpreter& in, const std::string& s, const Args& args, char how) {
  const int64_t width = int_arg(args, 0, "width", 0);
  std::string fill = " ";
  if (const Value* f = args.get(1, "fillchar")) {
    if (!f->is_string() || utf8_length(f->str()) != 1) {
      fail("The fill character must be exactly one character long");
    }
    fill = f->str();
  }
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return s;
  const auto pad = static_cast<size_t>(width - len);
  in.check_size(pad * fill.size() + s.size());
  size_t left = 0;
  if (how == 'r') left = pad;
  if (how == 'c') left = pad / 2 + (pad & static_cast<size_t>(width) & 1);
  std::string out;
  for (size_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (size_t i = left; i < pad; ++i) out += fill;
  return out;
}

Value string_method(Interpreter& in, const std::string& s, std::string_view name, Args& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(str_strip(s, chars_arg(args), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = args.get(0, "sep");
    const std::string* sep_s = nullptr;
    if (sep && !sep->is_none()) {
      if (!sep->is_string()) fail("must be str or None");
      if (sep->str().empty()) fail("empty separator");
      sep_s = &sep->str();
    }
    const int64_t maxsplit = int_arg(args, 1, "maxsplit", -1);
    return strings_to_list(
        in, name == "split" ? str_split(s, sep_s, maxsplit) : str_rsplit(s, sep_s, maxsplit));
  }
  if (name == "splitlines") {
    const Value* keep = args.get(0, "keepends");
    return strings_to_list(in, str_splitlines(s, keep && truthy(*keep)));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* arg = args.get(0, "prefix");
    if (!arg) fail(std::string(name) + "() takes at least 1 argument");
    std::vector<Value> options;
    if (arg->kind() == Kind::kTuple) {
      options = arg->list_obj()->items;
    } else {
      options.push_back(*arg);
    }
    for (const Value& o : options) {
      if (!o.is_string()) fail(std::string(name) + " first arg must be str or a tuple of str");
      const std::string& p = o.str();
      if (p.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, p.size(), p) == 0
                               : s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return Value::boolean(true);
      }
    }
    return Value::boolean(false);
  }
  if (name == "upper") return Value::string(str_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(str_lower(s));
  if (name == "title") return Value::string(str_title(s));
  if (name == "capitalize") return Value::string(str_capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (char32_t c : decode_utf8(s)) append_utf8(out, is_upper(c) ? to_lower(c) : to_upper(c));
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    const std::string& from = str_arg(args, 0, "old", name);
    const std::string& to = str_arg(args, 1, "new", name);
    const int64_t count = int_arg(args, 2, "count", -1);
    if (!to.empty() && !from.empty()) {
      in.check_size(s.size() + str_count(s, from) * to.size());
    } else if (from.empty()) {
      in.check_size(s.size() + (utf8_length(s) + 1) * to.size());
    }
    return Value::string(str_replace(s, from, to, count));
  }
  if (name == "find" || name == "index" || name == "rfind" || name == "rindex") {
    const std::string& sub = str_arg(args, 0, "sub", name);
    const bool reverse = name[0] == 'r';
    const size_t pos = reverse ? s.rfind(sub) : s.find(sub);
    if (pos == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, pos));
  }
  if (name == "count")
    return Value::integer(static_cast<int64_t>(str_count(s, str_arg(args, 0, "x", name))));
  if (name == "join") {
    const Value* it = args.get(0, "iterable");
    if (!it) fail("join() takes exactly one argument");
    std::string out;
    size_t i = 0;
    for (const Value& v : in.iterate(*it)) {
      if (!v.is_string()) {
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(v) +
             " found");
      }
      if (i++) out += s;
      out += v.str();
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return in.new_string(brace_format(s, args.positional, args.keyword));
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return Value::boolean(all_chars(s, is_digit));
  }
  if (name == "isalpha") return Value::boolean(all_chars(s, is_alpha));
  if (name == "isalnum") return Value::boolean(all_chars(s, is_alnum));
  if (name == "isspace") return Value::boolean(all_chars(s, is_space));
  if (name == "isupper" || name == "islower") {
    const bool want_upper = name == "isupper";
    bool cased = false;
    for (char32_t c : decode_utf8(s)) {
      if (want_upper ? is_lower(c) : is_upper(c)) return Value::boolean(false);
      cased = cased || is_upper(c) || is_lower(c);
    }
    return Value::boolean(cased);
  }
  if (name == "zfill") {
    const int64_t width = int_arg(args, 0, "width", 0);
    const auto len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return Value::string(s);
    in.check_size(static_cast<size_t>(width));
    const size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    return Value::string(s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') +
                         s.substr(sign));
  }
  if (name == "center") return Value::string(justify(in, s, args, 'c'));
  if (name == "ljust") return Value::string(justify(in, s, args, 'l'));
  if (name == "rjust") return Value::string(justify(in, s, args, 'r'));
  if (name == "partition" || name == "rpartition") {
    const std::string& sep = str_arg(args, 0, "sep", name);
    if (sep.empty()) fail("empty separator");
    const size_t pos = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (pos == std::string::npos) {
      return name == "partition"
                 ? in.new_tuple({Value::string(s), Value::string(""), Value::string("")})
                 : in.new_tuple({Value::string(""), Value::string(""), Value::string(s)});
    }
    return in.new_tuple({Value::string(s.substr(0, pos)), Value::string(sep),
                         Value::string(s.substr(pos + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& a = str_arg(args, 0, "prefix", name);
    if (name == "removeprefix") {
      return Value::string(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    }
    if (a.size() <= s.size() && s.compare(s.size() - a.size(), a.size(), a) == 0) {
      return Value::string(s.substr(0, s.size() - a.size()));
    }
    return Value::string(s);
  }
  fail("'str' object has no attribute '" + std::string(name) + "'");
}

// Python's list/tuple index normalization for insert/pop.
int64_t normalize_index(int64_t i, size_t size) {
  return i < 0 ? i + static_cast<int64_t>(size) : i;
}

Value list_method(Interpreter& in, const Value& self, std::string_view name, Args& args) {
  auto& items = self.list_obj()->items;
  const Value* a0 = args.get(0, "x");
  if (name == "index" || name == "count") {
    if (!a0) fail(std::string(name) + "() takes exactly one argument");
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], *a0)) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") fail(repr(*a0) + " is not in list");
    return Value::integer(count);
  }
  if (name == "append") {
    if (!a0) fail("append() takes exactly one argument");
    in.heap().charge(1);
    items.push_back(*a0);
    return Value::none();
  }
  if (name == "extend") {
    if (!a0) fail("extend() takes exactly one argument");
    std::vector<Value> more = in.iterate(*a0);
    in.heap().charge(more.size());
    items.insert(items.end(), more.begin(), more.end());
    return Value::none();
  }
  if (name == "insert") {
    const Value* v = args.get(1, "object");
    if (!v) fail("insert expected 2 arguments");
    int64_t i = std::clamp<int64_t>(normalize_index(int_arg(args, 0, "index", 0), items.size()), 0,
                                    static_cast<int64_t>(items.size()));
    in.heap().charge(1);
    items.insert(items.begin() + i, *v);
    return Value::none();
  }
  if (name == "pop") {
    if (items.empty()) fail("pop from empty list");
    const int64_t i = normalize_index(int_arg(args, 0, "index", -1), items.size());
    if (i < 0 || i >= static_cast<int64_t>(items.size())) fail("pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "remove") {
    if (!a0) fail("remove() takes exactly one argument");
    for (size_t i = 0; i < items.size(); ++i) {
      if (equals(items[i], *a0)) {
        items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
        return Value::none();
      }
    }
    fail("list.remove(x): x not in list");
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  if (name == "sort") {
    args.check("sort", 0, {"reverse"});
    const bool rev = truthy(args.get_or(kKeywordOnly, "reverse", Value::boolean(false)));
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& a, const Value& b) { return rev ? less(b, a) : less(a, b); });
    return Value::none();
  }
  if (name == "copy") return in.new_list(items);
  if (name == "clear") {
    items.clear();
    return Value::none();
  }
  fail("'list' object has no attribute '" + std::string(name) + "'");
}

Value dict_method(Interpreter& in, const Value& self, std::string_view name, Args& args) {
  DictObj& d = *self.dict_obj();
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    out.reserve(d.entries.size());
    for (const auto& [k, v] : d.entries) {
      if (name == "items") {
        out.push_back(in.new_tuple({k, v}));
      } else {
        out.push_back(name == "keys" ? k : v);
      }
    }
    return in.new_list(std::move(out));
  }
  const Value* key = args.get(0, "key");
  if (name == "get" || name == "setdefault") {
    if (!key) fail(std::string(name) + "() takes at least 1 argument");
    if (key->kind() == Kind::kList || key->kind() == Kind::kDict) {
      fail(std::string("unhashable type: '") + type_name(*key) + "'");
    }
    if (const Value* v = d.find(*key)) return *v;
    Value fallback = args.get_or(1, "default", Value::none());
    if (name == "setdefault") {
      in.heap().charge(kDictEntryCost);
      d.set(*key, fallback);
    }
    return fallback;
  }
  if (name == "pop") {
    if (!key) fail("pop expected at least 1 argument");
    if (const Value* v = d.find(*key)) {
      Value out = *v;
      d.erase(*key);
      return out;
    }
    if (const Value* fallback = args.get(1, "default")) return *fallback;
    fail("KeyError: " + repr(*key));
  }
  if (name == "popitem") {
    if (d.entries.empty()) fail("popitem(): dictionary is empty");
    auto [k, v] = d.entries.back();
    d.erase(k);
    return in.new_tuple({k, v});
  }
  if (name == "update") {
    if (!args.positional.empty()) {
      const Value& other = args.positional[0];
      if (other.is_mapping()) {
        for (const auto& [k, v] : other.dict_obj()->entries) {
          in.heap().charge(kDictEntryCost);
          d.set(k, v);
        }
      } else {
        for (const Value& pair : in.iterate(other)) {
          std::vector<Value> kv = in.iterate(pair);
          if (kv.size() != 2) fail("dictionary update sequence element has wrong length");
          in.heap().charge(kDictEntryCost);
          d.set(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [k, v] : args.keyword) {
      in.heap().charge(kDictEntryCost);
      d.set(Value::string(k), v);
    }
    return Value::none();
  }
  if (name == "copy") {
    DictObj* c = in.heap().new_dict();
    in.heap().charge(d.entries.size() * kDictEntryCost);
    c->entries = d.entries;
    c->index = d.index;
    return Value::dict(c);
  }
  if (name == "clear") {
    d.entries.clear();
    d.index.clear();
    return Value::none();
  }
  fail("'dict' object has no attribute '" + std::string(name) + "'");
}

}  // namespace

bool has_method(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Kind::kString:
      return in_table(kStrMethods, name);
    case Kind::kList:
      return in_table(kListMethods, name);
    case Kind::kTuple:
      return in_table(kTupleMethods, name);
    case Kind::kDict:
      return in_table(kDictMethods, name);
    default:
      return false;
  }
}

Value call_method(Interpreter& in, const Value& self, std::string_view name, Args& args) {
  switch (self.kind()) {
    case Kind::kString:
      return string_method(in, self.str(), name, args);
    case Kind::kList:
    case Kind::kTuple:
      return list_method(in, self, name, args);
    case Kind::kDict:
      return dict_method(in, self, name, args);
    default:
      fail(std::string("'") + type_name(self) + "' object has no attribute '" + std::string(name) +
           "'");
  }
}

}  // namespace vela::jinja

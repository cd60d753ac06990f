// Jinja's sequence filters: length, first/last, join, list, items, dictsort, sort, unique,
// min/max/sum, reverse, map, select/reject, selectattr/rejectattr, batch.
// Jinja returns generators from map/select/reverse; here they return lists, which render
// the same through |list, |join, loops and length.
#include <algorithm>
#include <optional>

#include "template/builtins.h"
#include "template/format.h"
#include "template/text.h"

namespace vela::jinja {

namespace {

bool bool_option(const Args& args, size_t i, std::string_view name, bool fallback) {
  const Value* v = args.get(i, name);
  return v ? truthy(*v) : fallback;
}

// Jinja's attribute path "a.b.0": each part looked up with getitem (digits as integers).
class AttrPath {
 public:
  AttrPath(const Value* attribute) {
    if (!attribute || attribute->is_none()) return;
    if (!attribute->is_string()) {
      parts_.push_back(*attribute);
      return;
    }
    const std::string& s = attribute->str();
    size_t start = 0;
    while (true) {
      const size_t dot = s.find('.', start);
      const std::string part = s.substr(start, dot == std::string::npos ? dot : dot - start);
      bool digits = !part.empty();
      for (char c : part) digits = digits && c >= '0' && c <= '9';
      if (digits && part.size() < 18) {
        parts_.push_back(Value::integer(std::stoll(part)));
      } else {
        parts_.push_back(Value::string(part));
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  bool empty() const { return parts_.empty(); }
  Value get(Interpreter& in, Value item, const Value* fallback = nullptr) const {
    for (const Value& part : parts_) {
      item = in.get_item(item, part);
      if (fallback && item.is_undefined()) item = *fallback;
    }
    return item;
  }

 private:
  std::vector<Value> parts_;
};

// Jinja's ignore_case: strings compare lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(str_lower(v.str()));
  return v;
}

Value f_length(Interpreter&, const Value& v, Args&) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return Value::integer(0);
    case Kind::kString:
      return Value::integer(static_cast<int64_t>(utf8_length(v.str())));
    case Kind::kList:
    case Kind::kTuple:
      return Value::integer(static_cast<int64_t>(v.list_obj()->items.size()));
    case Kind::kDict:
      return Value::integer(static_cast<int64_t>(v.dict_obj()->entries.size()));
    default:
      fail(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

Value f_first(Interpreter& in, const Value& v, Args&) {
  if (v.is_list_like()) {
    const auto& items = v.list_obj()->items;
    if (!items.empty()) return items.front();
  } else {
    std::vector<Value> items = in.iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interpreter& in, const Value& v, Args&) {
  if (v.is_list_like()) {
    const auto& items = v.list_obj()->items;
    if (!items.empty()) return items.back();
  } else {
    std::vector<Value> items = in.iterate(v);
    if (!items.empty()) return items.back();
  }
  return Value::undefined("No last item, sequence was empty.");
}

Value f_join(Interpreter& in, const Value& v, Args& args) {
  args.check("join", 2, {"d", "attribute"});
  const std::string sep = to_str(args.get_or(0, "d", Value::string("")));
  const AttrPath path(args.get(1, "attribute"));
  std::string out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    append_str(out, path.empty() ? item : path.get(in, item));
    in.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_list(Interpreter& in, const Value& v, Args&) {
  return in.new_list(in.iterate(v));
}

Value f_items(Interpreter& in, const Value& v, Args&) {
  if (v.is_undefined()) return in.new_list({});
  if (!v.is_mapping()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict_obj()->entries) out.push_back(in.new_tuple({k, val}));
  return in.new_list(std::move(out));
}

Value f_dictsort(Interpreter& in, const Value& v, Args& args) {
  args.check("dictsort", 3, {"case_sensitive", "by", "reverse"});
  if (!v.is_mapping()) fail("dictsort needs a mapping");
  const bool cs = bool_option(args, 0, "case_sensitive", false);
  const std::string by = to_str(args.get_or(1, "by", Value::string("key")));
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  const bool rev = bool_option(args, 2, "reverse", false);
  auto entries = v.dict_obj()->entries;
  const bool by_key = by == "key";
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    const Value ka = sort_key(by_key ? a.first : a.second, cs);
    const Value kb = sort_key(by_key ? b.first : b.second, cs);
    return rev ? less(kb, ka) : less(ka, kb);
  });
  std::vector<Value> out;
  for (const auto& [k, val] : entries) out.push_back(in.new_tuple({k, val}));
  return in.new_list(std::move(out));
}

Value f_sort(Interpreter& in, const Value& v, Args& args) {
  args.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
  const bool rev = bool_option(args, 0, "reverse", false);
  const bool cs = bool_option(args, 1, "case_sensitive", false);
  // attribute may list several comma-separated paths; the key is then a tuple.
  std::vector<AttrPath> paths;
  if (const Value* attr = args.get(2, "attribute"); attr && !attr->is_none()) {
    if (attr->is_string()) {
      const std::string& s = attr->str();
      size_t start = 0;
      while (true) {
        const size_t comma = s.find(',', start);
        const Value piece =
            Value::string(s.substr(start, comma == std::string::npos ? comma : comma - start));
        paths.emplace_back(&piece);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      paths.emplace_back(attr);
    }
  }
  std::vector<Value> items = in.iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  keyed.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Value key;
    if (paths.empty()) {
      key = sort_key(items[i], cs);
    } else if (paths.size() == 1) {
      key = sort_key(paths[0].get(in, items[i]), cs);
    } else {
      std::vector<Value> parts;
      for (const AttrPath& p : paths) parts.push_back(sort_key(p.get(in, items[i]), cs));
      key = in.new_tuple(std::move(parts));
    }
    keyed.emplace_back(std::move(key), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return rev ? less(b.first, a.first) : less(a.first, b.first);
  });
  std::vector<Value> out;
  out.reserve(items.size());
  for (const auto& [key, i] : keyed) out.push_back(items[i]);
  return in.new_list(std::move(out));
}

Value f_unique(Interpreter& in, const Value& v, Args& args) {
  args.check("unique", 2, {"case_sensitive", "attribute"});
  const bool cs = bool_option(args, 0, "case_sensitive", false);
  const AttrPath path(args.get(1, "attribute"));
  std::vector<Value> out;
  std::vector<Value> seen;
  for (const Value& item : in.iterate(v)) {
    const Value key = sort_key(path.empty() ? item : path.get(in, item), cs);
    if (key.kind() == Kind::kList || key.kind() == Kind::kDict) {
      fail(std::string("unhashable type: '") + type_name(key) + "'");
    }
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return in.new_list(std::move(out));
}

Value min_or_max(Interpreter& in, const Value& v, Args& args, bool want_max) {
  args.check(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const bool cs = bool_option(args, 0, "case_sensitive", false);
  const AttrPath path(args.get(1, "attribute"));
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(path.empty() ? items[0] : path.get(in, items[0]), cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(path.empty() ? items[i] : path.get(in, items[i]), cs);
    if (want_max ? less(best_key, key) : less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}
Value f_min(Interpreter& in, const Value& v, Args& args) {
  return min_or_max(in, v, args, false);
}
Value f_max(Interpreter& in, const Value& v, Args& args) {
  return min_or_max(in, v, args, true);
}

Value f_sum(Interpreter& in, const Value& v, Args& args) {
  args.check("sum", 2, {"attribute", "start"});
  const AttrPath path(args.get(0, "attribute"));
  Value total = args.get_or(1, "start", Value::integer(0));
  for (const Value& item : in.iterate(v)) {
    total = binary_op(in, BinOp::kAdd, total, path.empty() ? item : path.get(in, item));
  }
  return total;
}

Value f_reverse(Interpreter& in, const Value& v, Args&) {
  if (v.is_string()) {
    std::u32string cps = decode_utf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(encode_utf8(cps));
  }
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return in.new_list(std::move(items));
}

Value f_map(Interpreter& in, const Value& v, Args& args) {
  std::vector<Value> out;
  if (!truthy(v)) return in.new_list({});  // Jinja maps nothing over a falsy value
  if (args.positional.empty()) {
    const Value* attr = args.get(kKeywordOnly, "attribute");
    if (!attr) fail("map requires a filter argument");
    const Value* fallback = args.get(kKeywordOnly, "default");
    for (const auto& [k, val] : args.keyword) {
      if (k != "attribute" && k != "default") fail("Unexpected keyword argument '" + k + "'");
    }
    const AttrPath path(attr);
    for (const Value& item : in.iterate(v)) out.push_back(path.get(in, item, fallback));
    return in.new_list(std::move(out));
  }
  if (!args.positional[0].is_string()) fail("map filter name must be a string");
  const std::string name = args.positional[0].str();
  Args rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : in.iterate(v)) {
    Args call_args = rest;
    out.push_back(in.apply_filter(name, item, call_args));
  }
  return in.new_list(std::move(out));
}

Value select_or_reject(Interpreter& in, const Value& v, Args& args, bool select, bool by_attr) {
  size_t off = 0;
  std::optional<AttrPath> path;
  if (by_attr) {
    if (args.positional.empty()) fail("Missing parameter for attribute name");
    path.emplace(&args.positional[0]);
    off = 1;
  }
  std::string test;
  if (args.positional.size() > off) {
    if (!args.positional[off].is_string()) fail("test name must be a string");
    test = args.positional[off].str();
  }
  Args rest;
  if (args.positional.size() > off + 1) {
    rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off + 1),
                           args.positional.end());
  }
  rest.keyword = args.keyword;
  std::vector<Value> out;
  if (!truthy(v)) return in.new_list({});
  for (const Value& item : in.iterate(v)) {
    const Value subject = path ? path->get(in, item) : item;
    bool ok;
    if (test.empty()) {
      ok = truthy(subject);
    } else {
      Args call_args = rest;
      ok = in.apply_test(test, subject, call_args);
    }
    if (ok == select) out.push_back(item);
  }
  return in.new_list(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, true, false);
}
Value f_reject(Interpreter& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, false, false);
}
Value f_selectattr(Interpreter& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, true, true);
}
Value f_rejectattr(Interpreter& in, const Value& v, Args& a) {
  return select_or_reject(in, v, a, false, true);
}

Value f_batch(Interpreter& in, const Value& v, Args& args) {
  args.check("batch", 2, {"linecount", "fill_with"});
  const Value count = args.get_or(0, "linecount", Value::undefined("batch needs a count"));
  if (!count.is_int() || count.as_int() <= 0) fail("batch linecount must be a positive integer");
  const auto n = static_cast<size_t>(count.as_int());
  const Value* fill = args.get(1, "fill_with");
  std::vector<Value> out, current;
  for (const Value& item : in.iterate(v)) {
    current.push_back(item);
    if (current.size() == n) {
      out.push_back(in.new_list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (fill && !fill->is_none()) {
      while (current.size() < n) current.push_back(*fill);
    }
    out.push_back(in.new_list(std::move(current)));
  }
  return in.new_list(std::move(out));
}

struct Entry {
  const char* name;
  FilterFn fn;
};
constexpr Entry kFilters[] = {
    {"length", f_length},
    {"count", f_length},
    {"first", f_first},
    {"last", f_last},
    {"join", f_join},
    {"list", f_list},
    {"items", f_items},
    {"dictsort", f_dictsort},
    {"sort", f_sort},
    {"unique", f_unique},
    {"min", f_min},
    {"max", f_max},
    {"sum", f_sum},
    {"reverse", f_reverse},
    {"map", f_map},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"batch", f_batch},
};

}  // namespace

FilterFn find_sequence_filter(std::string_view name) {
  for (const auto& e : kFilters) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

}  // namespace vela::jinja

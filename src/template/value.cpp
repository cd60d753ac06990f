#include "template/value.h"

#include <cmath>

#include "template/format.h"

namespace vela::jinja {

void fail(std::string message) {
  throw RenderError{std::move(message)};
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  return string(std::make_shared<const std::string>(std::move(s)));
}
Value Value::string(StrPtr s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::object(Kind kind, Object* p) {
  Value v;
  v.kind_ = kind;
  v.p_ = p;
  return v;
}
Value Value::list(ListObj* l) { return object(Kind::kList, l); }
Value Value::tuple(ListObj* l) { return object(Kind::kTuple, l); }
Value Value::dict(DictObj* d) { return object(Kind::kDict, d); }
Value Value::ns(DictObj* d) { return object(Kind::kNamespace, d); }
Value Value::func(FuncObj* f) { return object(Kind::kFunc, f); }
Value Value::loop(LoopObj* l) { return object(Kind::kLoop, l); }

std::string Value::undefined_message() const {
  if (s_ && !s_->empty()) return *s_;
  return "undefined value";
}

// ---- DictObj ----

const Value* DictObj::find(const Value& key) const {
  auto it = index.find(key_of(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value* DictObj::find(std::string_view key) const {
  std::string k;
  k.reserve(key.size() + 1);
  k.push_back('s');
  k.append(key);
  auto it = index.find(k);
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictObj::set(const Value& key, Value value) {
  std::string k = key_of(key);
  auto it = index.find(k);
  if (it != index.end()) {
    entries[it->second].second = std::move(value);
    return;
  }
  index.emplace(std::move(k), entries.size());
  entries.emplace_back(key, std::move(value));
}

bool DictObj::erase(const Value& key) {
  auto it = index.find(key_of(key));
  if (it == index.end()) return false;
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(it->second));
  index.clear();
  for (size_t i = 0; i < entries.size(); ++i) index.emplace(key_of(entries[i].first), i);
  return true;
}

// ---- Heap ----

ListObj* Heap::new_list() {
  return make<ListObj>();
}
DictObj* Heap::new_dict() {
  return make<DictObj>();
}

void Heap::charge(size_t n) {
  items_ += n;
  if (items_ > max_items_) fail("template exceeded its memory budget (too many values)");
}

// ---- Python semantics ----

namespace {
// Prefix + body, built by append (GCC 12 warns falsely on `"x" + std::string`).
std::string tagged(char tag, std::string_view body) {
  std::string k;
  k.reserve(body.size() + 1);
  k.push_back(tag);
  k.append(body);
  return k;
}
}  // namespace

std::string key_of(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return tagged('s', v.str());
    case Kind::kNone:
      return "0";
    case Kind::kBool:
    case Kind::kInt:
      return tagged('n', std::to_string(v.as_int()));
    case Kind::kFloat: {
      const double f = v.as_double();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18) {
        return tagged('n', std::to_string(static_cast<int64_t>(f)));
      }
      return tagged('f', python_float_repr(f));
    }
    case Kind::kTuple: {
      std::string k = "t(";
      for (const Value& item : v.list_obj()->items) {
        k += key_of(item);
        k += '\x1f';
      }
      return k + ")";
    }
    default:
      fail(std::string("unhashable type: '") + type_name(v) + "'");
  }
}

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kFunc:
      return "function";
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  return std::string(type_name(v)) + " object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.as_bool();
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_double() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !v.list_obj()->items.empty();
    case Kind::kDict:
      return !v.dict_obj()->entries.empty();
    default:
      return true;
  }
}

namespace {
void check_depth(int depth) {
  if (depth > kMaxValueDepth) fail("value nested too deeply (or contains itself)");
}
}  // namespace

bool equals(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) {
      return a.as_double() == b.as_double();
    }
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str_ptr() == b.str_ptr() || a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple: {
      const auto& x = a.list_obj()->items;
      const auto& y = b.list_obj()->items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const DictObj* x = a.dict_obj();
      const DictObj* y = b.dict_obj();
      if (x->entries.size() != y->entries.size()) return false;
      for (const auto& [k, val] : x->entries) {
        const Value* other = y->find(k);
        if (!other || !equals(val, *other, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();  // identity for namespaces, functions, loops
  }
}

bool less(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) {
      return a.as_double() < b.as_double();
    }
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code points
  if (a.kind() == b.kind() && a.is_list_like()) {
    const auto& x = a.list_obj()->items;
    const auto& y = b.list_obj()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i], depth + 1)) return less(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) fail(a.undefined_message());
  if (b.is_undefined()) fail(b.undefined_message());
  fail(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" +
       type_name(b) + "'");
}

int compare(const Value& a, const Value& b) {
  if (less(a, b)) return -1;
  if (less(b, a)) return 1;
  return 0;
}

}  // namespace vela::jinja

#pragma once
// Values of the template language: the part of Python's object model chat templates use.
// Scalars and strings live in the Value itself (strings shared, immutable); lists, dicts,
// namespaces, functions and loop objects are owned by a per-render Heap and referenced by raw
// pointer. That keeps Python's aliasing (`ns.x = ...`, list.append) and makes teardown flat:
// destroying a render's heap never recurses, even for cyclic or deeply nested data.
// Errors inside the engine are thrown as RenderError and converted to vela::Result at the
// public boundary (chat_template.cpp); nothing escapes the library.
// Thread-safety: a Value and a Heap belong to one render on one thread.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vela::jinja {

// Thrown by the engine; `message` is what the user sees.
struct RenderError {
  std::string message;
  bool raised_by_template = false;  // raise_exception(msg): `message` is exactly msg
};
[[noreturn]] void fail(std::string message);

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kDict,
  kNamespace,
  kFunc,
  kLoop,
};

struct Object {
  virtual ~Object() = default;
};
struct ListObj;
struct DictObj;
struct FuncObj;
struct LoopObj;

using StrPtr = std::shared_ptr<const std::string>;

class Value {
 public:
  Value() : i_(0) {}
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value string(StrPtr s);
  // `hint` is the error message used when the undefined value is misused.
  static Value undefined(std::string hint);
  static Value list(ListObj* l);
  static Value tuple(ListObj* l);
  static Value dict(DictObj* d);
  static Value ns(DictObj* d);
  static Value func(FuncObj* f);
  static Value loop(LoopObj* l);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  // Python ints include bools.
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_list_like() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_mapping() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *s_; }
  const StrPtr& str_ptr() const { return s_; }
  ListObj* list_obj() const;
  DictObj* dict_obj() const;
  FuncObj* func_obj() const;
  LoopObj* loop_obj() const;
  const void* identity() const { return p_; }
  // The message for misusing an undefined value.
  std::string undefined_message() const;

 private:
  static Value object(Kind kind, Object* p);  // the heap-object kinds

  Kind kind_ = Kind::kUndefined;
  union {
    bool b_;
    int64_t i_;
    double f_;
    Object* p_;
  };
  StrPtr s_;  // string payload, or an undefined value's hint
};

struct ListObj : Object {
  std::vector<Value> items;
};

class Interpreter;
struct Args;
struct MacroStmt;
struct ForStmt;
struct Scope;
using BuiltinFn = Value (*)(Interpreter& in, Args& args);

// Everything callable: global functions, macros (and call-block callers), bound methods.
struct FuncObj : Object {
  enum class Type : uint8_t { kBuiltin, kMacro, kMethod } type = Type::kBuiltin;
  std::string name;                  // function, macro or method name (for messages)
  BuiltinFn builtin = nullptr;       // kBuiltin
  const MacroStmt* macro = nullptr;  // kMacro: parameters and body
  std::shared_ptr<Scope> closure;    // kMacro: the scope the macro was defined in
  Value self;                        // kMethod: the receiver
};

// Jinja's `loop` variable; also callable for recursive loops.
struct LoopObj : Object {
  ListObj* items = nullptr;  // the (filtered) sequence being iterated
  size_t length = 0;         // its length when the loop started
  size_t index0 = 0;
  int depth0 = 0;
  const ForStmt* node = nullptr;  // for loop(...) recursion
  std::shared_ptr<Scope> scope;   // the scope the loop runs in
  Value last_changed;             // loop.changed() state
  bool has_changed = false;
};

// Insertion-ordered like Python's dict. Keys are hashable scalars; `index` maps a canonical
// key (see key_of) to a position in `entries`.
struct DictObj : Object {
  std::vector<std::pair<Value, Value>> entries;
  std::unordered_map<std::string, size_t> index;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
  bool erase(const Value& key);
};

inline ListObj* Value::list_obj() const {
  return static_cast<ListObj*>(p_);
}
inline DictObj* Value::dict_obj() const {
  return static_cast<DictObj*>(p_);
}
inline FuncObj* Value::func_obj() const {
  return static_cast<FuncObj*>(p_);
}
inline LoopObj* Value::loop_obj() const {
  return static_cast<LoopObj*>(p_);
}

// Owns a render's objects; charges every stored element against a budget so hostile
// templates cannot exhaust memory.
class Heap {
 public:
  explicit Heap(size_t max_items) : max_items_(max_items) {}
  ListObj* new_list();
  DictObj* new_dict();
  template <class T>
  T* make() {
    charge((sizeof(T) + sizeof(Value) - 1) / sizeof(Value));
    auto obj = std::make_unique<T>();
    T* raw = obj.get();
    objects_.push_back(std::move(obj));
    return raw;
  }
  // Account for `n` more units (one unit ~ one stored Value) kept until the render ends;
  // fails past the budget.
  void charge(size_t n);

 private:
  std::vector<std::unique_ptr<Object>> objects_;
  size_t items_ = 0;
  size_t max_items_;
};

// Budget units of one dict entry: key, value and its index node.
inline constexpr size_t kDictEntryCost = 3;

// The canonical hash key of a scalar (Python: 1 == 1.0 == True hash alike); fails for
// unhashable values (lists, dicts).
std::string key_of(const Value& v);

// Python's type name, for messages ("str", "int", "NoneType", "list", ...).
const char* type_name(const Value& v);
// Jinja's description of an object in undefined-attribute messages ("dict object", "None").
std::string object_description(const Value& v);

bool truthy(const Value& v);
// Python ==, recursing into containers (depth-limited).
bool equals(const Value& a, const Value& b, int depth = 0);
// Python <: numbers, strings, lists/tuples lexicographically; fails for other mixes.
bool less(const Value& a, const Value& b, int depth = 0);
// -1, 0, 1 by `less` and `equals`.
int compare(const Value& a, const Value& b);

// Values nested deeper than this (by data built at render time, or cycles) are an error.
inline constexpr int kMaxValueDepth = 512;

}  // namespace vela::jinja

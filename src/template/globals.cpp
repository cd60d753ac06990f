// Global functions: Jinja's range/namespace/dict plus the two that chat-template hosts add,
// raise_exception(msg) and strftime_now(fmt).
#include <ctime>

#include "template/builtins.h"
#include "template/format.h"

namespace vela::jinja {

namespace {

// Jinja's sandbox refuses larger ranges.
constexpr int64_t kMaxRange = 100000;

Value fn_range(Interpreter& in, Args& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  std::vector<int64_t> a;
  for (const Value& v : args.positional) {
    if (!v.is_int()) {
      fail(std::string("'") + type_name(v) + "' object cannot be interpreted as an integer");
    }
    a.push_back(v.as_int());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (a.size() == 1) {
    stop = a[0];
  } else if (a.size() == 2 || a.size() == 3) {
    start = a[0];
    stop = a[1];
    if (a.size() == 3) step = a[2];
  } else {
    fail("range expected 1 to 3 arguments, got " + std::to_string(a.size()));
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  int64_t n = 0;
  if (step > 0 && start < stop) n = (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) n = (start - stop - 1) / (-step) + 1;
  if (n > kMaxRange) {
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) items.push_back(Value::integer(start + i * step));
  return in.new_list(std::move(items));
}

// dict(mapping_or_pairs?, **kwargs) into `d`.
void fill_dict(Interpreter& in, DictObj* d, Args& args, const char* what) {
  if (args.positional.size() > 1) fail(std::string(what) + " expected at most 1 argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.kind() == Kind::kDict || src.kind() == Kind::kNamespace) {
      for (const auto& [k, v] : src.dict_obj()->entries) {
        in.heap().charge(kDictEntryCost);
        d->set(k, v);
      }
    } else {
      for (const Value& pair : in.iterate(src)) {
        std::vector<Value> kv = in.iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has wrong length");
        in.heap().charge(kDictEntryCost);
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) {
    in.heap().charge(kDictEntryCost);
    d->set(Value::string(k), v);
  }
}

Value fn_namespace(Interpreter& in, Args& args) {
  DictObj* d = in.heap().new_dict();
  fill_dict(in, d, args, "namespace");
  return Value::ns(d);
}

Value fn_dict(Interpreter& in, Args& args) {
  DictObj* d = in.heap().new_dict();
  fill_dict(in, d, args, "dict");
  return Value::dict(d);
}

Value fn_raise_exception(Interpreter&, Args& args) {
  const Value msg = args.get_or(0, "message", Value::string(""));
  throw RenderError{to_str(msg), true};
}

Value fn_strftime_now(Interpreter& in, Args& args) {
  const Value fmt = args.get_or(0, "format", Value::undefined("strftime_now() needs a format"));
  if (!fmt.is_string()) fail("strftime_now() argument must be str");
  if (fmt.str().empty()) return Value::string("");
  if (fmt.str().size() > 256) fail("strftime_now() format too long");
  char buf[4096];
  const size_t n = std::strftime(buf, sizeof(buf), fmt.str().c_str(), &in.now());
  return Value::string(std::string(buf, n));
}

}  // namespace

BuiltinFn find_global(std::string_view name) {
  if (name == "range") return fn_range;
  if (name == "namespace") return fn_namespace;
  if (name == "dict") return fn_dict;
  if (name == "raise_exception") return fn_raise_exception;
  if (name == "strftime_now") return fn_strftime_now;
  return nullptr;
}

}  // namespace vela::jinja

// Python's arithmetic, `in` and slicing on template values.
#include <cmath>

#include "template/builtins.h"
#include "template/format.h"
#include "template/text.h"

namespace vela::jinja {

namespace {

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::kAdd && (a.is_string() || a.is_list_like())) {
    fail(std::string("can only concatenate ") + type_name(a) + " (not \"" + type_name(b) +
         "\") to " + type_name(a));
  }
  fail(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) +
       "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
  fail("integer result too large");
}

// Python's float divmod: returns floor division and sets `mod`.
double float_floordiv(double a, double b, double* mod_out) {
  if (b == 0.0) fail("float floor division by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  if (mod_out) *mod_out = mod;
  return floordiv;
}

Value repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const size_t n = seq.str().size();
    if (n && static_cast<uint64_t>(times) > (1ULL << 40) / n) in.check_size(SIZE_MAX);
    in.check_size(n * static_cast<size_t>(times));
    std::string out;
    out.reserve(n * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  const auto& items = seq.list_obj()->items;
  if (!items.empty() && static_cast<uint64_t>(times) > (1ULL << 40) / items.size()) {
    in.heap().charge(SIZE_MAX / 2);
  }
  in.heap().charge(items.size() * static_cast<size_t>(times));
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.kind() == Kind::kTuple ? in.new_tuple(std::move(out)) : in.new_list(std::move(out));
}

}  // namespace

Value binary_op(Interpreter& in, BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail(a.undefined_message());
  // str % Undefined is Python string formatting with an (empty) mapping-like argument.
  if (op == BinOp::kMod && a.is_string()) return in.new_string(percent_format(a.str(), b));
  if (b.is_undefined()) fail(b.undefined_message());
  const bool ints = a.is_int() && b.is_int();
  const bool nums = a.is_number() && b.is_number();
  switch (op) {
    case BinOp::kAdd:
      if (ints) {
        int64_t r;
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (nums) return Value::number(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) {
        in.check_size(a.str().size() + b.str().size());
        return Value::string(a.str() + b.str());
      }
      if (a.is_list_like() && a.kind() == b.kind()) {
        std::vector<Value> items = a.list_obj()->items;
        const auto& more = b.list_obj()->items;
        items.insert(items.end(), more.begin(), more.end());
        return a.kind() == Kind::kTuple ? in.new_tuple(std::move(items))
                                        : in.new_list(std::move(items));
      }
      break;
    case BinOp::kSub:
      if (ints) {
        int64_t r;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (nums) return Value::number(a.as_double() - b.as_double());
      break;
    case BinOp::kMul:
      if (ints) {
        int64_t r;
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (nums) return Value::number(a.as_double() * b.as_double());
      if ((a.is_string() || a.is_list_like()) && b.is_int()) return repeat(in, a, b.as_int());
      if ((b.is_string() || b.is_list_like()) && a.is_int()) return repeat(in, b, a.as_int());
      break;
    case BinOp::kDiv:
      if (nums) {
        if (b.as_double() == 0.0) fail("division by zero");
        return Value::number(a.as_double() / b.as_double());
      }
      break;
    case BinOp::kFloorDiv:
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) overflow();
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
      }
      if (nums) return Value::number(float_floordiv(a.as_double(), b.as_double(), nullptr));
      break;
    case BinOp::kMod:
      if (a.is_string()) {
        return in.new_string(percent_format(a.str(), b));
      }
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (y == -1) return Value::integer(0);
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::integer(r);
      }
      if (nums) {
        if (b.as_double() == 0.0) fail("float modulo");
        double mod;
        float_floordiv(a.as_double(), b.as_double(), &mod);
        return Value::number(mod);
      }
      break;
    case BinOp::kPow:
      if (ints && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int(), r = 1;
        while (e > 0) {
          if (e & 1) {
            if (__builtin_mul_overflow(r, base, &r)) overflow();
          }
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
        }
        return Value::integer(r);
      }
      if (nums) {
        if (a.as_double() == 0.0 && b.as_double() < 0) {
          fail("0.0 cannot be raised to a negative power");
        }
        return Value::number(std::pow(a.as_double(), b.as_double()));
      }
      break;
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail(v.undefined_message());
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is_number()) return Value::number(-v.as_double());
  fail(std::string("bad operand type for unary -: '") + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail(v.undefined_message());
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.is_number()) return v;
  fail(std::string("bad operand type for unary +: '") + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string()) {
        fail(std::string("'in <string>' requires string as left operand, not ") + type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
    case Kind::kTuple:
      for (const Value& v : container.list_obj()->items) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
      if (item.kind() == Kind::kList || item.kind() == Kind::kDict) {
        fail(std::string("unhashable type: '") + type_name(item) + "'");
      }
      if (item.is_undefined() || item.kind() == Kind::kFunc || item.kind() == Kind::kNamespace ||
          item.kind() == Kind::kLoop) {
        return false;
      }
      return container.dict_obj()->find(item) != nullptr;
    default:
      fail(std::string("argument of type '") + type_name(container) + "' is not iterable");
  }
}

Value slice_value(Interpreter& in, const Value& obj, std::optional<int64_t> start_opt,
                  std::optional<int64_t> stop_opt, std::optional<int64_t> step_opt) {
  const int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  std::u32string cps;
  const bool ascii_string = obj.is_string() && utf8_length(obj.str()) == obj.str().size();
  int64_t len;
  if (obj.is_string()) {
    if (!ascii_string) cps = decode_utf8(obj.str());
    len = static_cast<int64_t>(ascii_string ? obj.str().size() : cps.size());
  } else {
    len = static_cast<int64_t>(obj.list_obj()->items.size());
  }
  const int64_t lower = step > 0 ? 0 : -1;
  const int64_t upper = step > 0 ? len : len - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t start = clamp(start_opt, step > 0 ? lower : upper);
  const int64_t stop = clamp(stop_opt, step > 0 ? upper : lower);
  if (obj.is_string()) {
    std::string out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (ascii_string) {
        out.push_back(obj.str()[static_cast<size_t>(i)]);
      } else {
        append_utf8(out, cps[static_cast<size_t>(i)]);
      }
    }
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  const auto& items = obj.list_obj()->items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(items[static_cast<size_t>(i)]);
  }
  return obj.kind() == Kind::kTuple ? in.new_tuple(std::move(out)) : in.new_list(std::move(out));
}

}  // namespace vela::jinja

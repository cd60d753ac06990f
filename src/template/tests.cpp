// Jinja's tests (`x is defined`, `x is divisibleby 3`, ...), with Python's type rules: bools
// are numbers but not integers, undefined values are iterable, strings are sequences.
#include <cmath>

#include "template/builtins.h"
#include "template/format.h"
#include "template/text.h"

namespace vela::jinja {

namespace {

const Value& arg0(const Args& args, std::string_view test) {
  if (args.positional.empty()) fail("test '" + std::string(test) + "' needs an argument");
  return args.positional[0];
}

bool t_defined(Interpreter&, const Value& v, Args&) {
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, Args&) {
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, Args&) {
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, Args&) {
  return v.is_bool();
}
bool t_true(Interpreter&, const Value& v, Args&) {
  return v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, Args&) {
  return v.is_bool() && !v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, Args&) {
  return v.kind() == Kind::kInt;
}
bool t_float(Interpreter&, const Value& v, Args&) {
  return v.kind() == Kind::kFloat;
}
bool t_number(Interpreter&, const Value& v, Args&) {
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, Args&) {
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, Args&) {
  return v.is_mapping();
}

bool t_iterable(Interpreter&, const Value& v, Args&) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kDict:
    case Kind::kLoop:
      return true;
    default:
      return false;
  }
}

// Jinja's sequence test: iterable with a length (a loop object is iterable only).
bool t_sequence(Interpreter& in, const Value& v, Args& a) {
  return v.kind() != Kind::kLoop && t_iterable(in, v, a);
}

bool t_callable(Interpreter&, const Value& v, Args&) {
  return v.kind() == Kind::kFunc || v.kind() == Kind::kLoop || v.is_undefined();
}

bool t_sameas(Interpreter&, const Value& v, Args& args) {
  const Value& o = arg0(args, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return v.as_bool() == o.as_bool();
    case Kind::kInt:
      return v.as_int() == o.as_int();
    case Kind::kFloat:
      return false;
    case Kind::kString:
      return v.str() == o.str();  // Python interns the short strings templates compare
    default:
      return v.identity() == o.identity();
  }
}

bool t_escaped(Interpreter&, const Value&, Args&) {
  return false;
}

Value modulo(Interpreter& in, const Value& v, const Value& by) {
  return binary_op(in, BinOp::kMod, v, by);
}

bool t_odd(Interpreter& in, const Value& v, Args&) {
  if (v.is_string()) fail("odd test needs a number");
  return equals(modulo(in, v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interpreter& in, const Value& v, Args&) {
  if (v.is_string()) fail("even test needs a number");
  return equals(modulo(in, v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interpreter& in, const Value& v, Args& args) {
  const Value& by = arg0(args, "divisibleby");
  if (v.is_string() || by.is_string()) fail("divisibleby test needs numbers");
  return equals(modulo(in, v, by), Value::integer(0));
}

bool t_eq(Interpreter&, const Value& v, Args& args) {
  return equals(v, arg0(args, "eq"));
}
bool t_ne(Interpreter&, const Value& v, Args& args) {
  return !equals(v, arg0(args, "ne"));
}
bool t_lt(Interpreter&, const Value& v, Args& args) {
  return less(v, arg0(args, "lt"));
}
bool t_gt(Interpreter&, const Value& v, Args& args) {
  return less(arg0(args, "gt"), v);
}
bool t_le(Interpreter&, const Value& v, Args& args) {
  const Value& o = arg0(args, "le");
  return less(v, o) || equals(v, o);
}
bool t_ge(Interpreter&, const Value& v, Args& args) {
  const Value& o = arg0(args, "ge");
  return less(o, v) || equals(v, o);
}
bool t_in(Interpreter&, const Value& v, Args& args) {
  return contains(arg0(args, "in"), v);
}

bool t_lower(Interpreter&, const Value& v, Args&) {
  bool cased = false;
  for (char32_t c : decode_utf8(to_str(v))) {
    if (is_upper(c)) return false;
    cased = cased || is_lower(c);
  }
  return cased;
}
bool t_upper(Interpreter&, const Value& v, Args&) {
  bool cased = false;
  for (char32_t c : decode_utf8(to_str(v))) {
    if (is_lower(c)) return false;
    cased = cased || is_upper(c);
  }
  return cased;
}

bool t_filter(Interpreter&, const Value& v, Args&) {
  return v.is_string() && (find_filter(v.str()) || find_sequence_filter(v.str()));
}
bool t_test(Interpreter&, const Value& v, Args&) {
  return v.is_string() && find_test(v.str()) != nullptr;
}

struct Entry {
  const char* name;
  TestFn fn;
};
constexpr Entry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"sameas", t_sameas},
    {"escaped", t_escaped},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"lower", t_lower},
    {"upper", t_upper},
    {"filter", t_filter},
    {"test", t_test},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& e : kTests) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

}  // namespace vela::jinja

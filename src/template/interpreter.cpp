#include "template/interpreter.h"

#include <optional>

#include "template/builtins.h"
#include "template/format.h"
#include "template/text.h"

namespace vela::jinja {

// ---- Scope and Args ----

Value* Scope::find_local(std::string_view name) {
  for (auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  if (Value* slot = find_local(name)) {
    *slot = std::move(v);
    return;
  }
  vars.emplace_back(std::string(name), std::move(v));
}

const Value* Args::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Args::get_or(size_t index, std::string_view name, Value fallback) const {
  const Value* v = get(index, name);
  return v ? *v : std::move(fallback);
}

void Args::check(std::string_view function, size_t max_positional,
                 std::initializer_list<std::string_view> keywords) const {
  if (positional.size() > max_positional) {
    fail(std::string(function) + "() takes at most " + std::to_string(max_positional) +
         " positional argument(s) (" + std::to_string(positional.size()) + " given)");
  }
  for (const auto& [k, v] : keyword) {
    bool known = false;
    for (std::string_view allowed : keywords) known = known || allowed == k;
    if (!known) fail(std::string(function) + "() got an unexpected keyword argument '" + k + "'");
  }
}

// ---- Interpreter ----

Interpreter::Interpreter(const Limits& limits, const std::tm& now)
    : limits_(limits), now_(now), heap_(limits.max_items) {}

std::string Interpreter::render(const Template& tmpl, const Value& context) {
  auto root = std::make_shared<Scope>();
  if (context.is_mapping()) {
    for (const auto& [k, v] : context.dict_obj()->entries) {
      if (k.is_string()) root->set(k.str(), v);
    }
  }
  std::string out;
  out_ = &out;
  ScopeSwap swap(*this, root);
  exec_body(tmpl.body);
  out_ = nullptr;
  return out;
}

Value Interpreter::new_list(std::vector<Value> items) {
  ListObj* l = heap_.new_list();
  heap_.charge(items.size());
  l->items = std::move(items);
  return Value::list(l);
}

Value Interpreter::new_tuple(std::vector<Value> items) {
  ListObj* l = heap_.new_list();
  heap_.charge(items.size());
  l->items = std::move(items);
  return Value::tuple(l);
}

Value Interpreter::new_string(std::string s) {
  check_size(s.size());
  return Value::string(std::move(s));
}

void Interpreter::check_size(size_t n) const {
  if (n > limits_.max_output_bytes) fail("template built a string larger than the output limit");
}

std::shared_ptr<Scope> Interpreter::child_scope() const {
  auto s = std::make_shared<Scope>();
  s->parent = scope_;
  return s;
}

void Interpreter::write(std::string_view s) {
  out_->append(s);
  if (out_->size() > limits_.max_output_bytes) fail("template output exceeds the size limit");
}

void Interpreter::write_value(const Value& v) {
  append_str(*out_, v);
  if (out_->size() > limits_.max_output_bytes) fail("template output exceeds the size limit");
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
    case Kind::kTuple:
      return v.list_obj()->items;
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict_obj()->entries.size());
      for (const auto& e : v.dict_obj()->entries) keys.push_back(e.first);
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      const std::u32string cps = decode_utf8(v.str());
      if (cps.size() > limits_.max_items) fail("string too long to iterate");
      chars.reserve(cps.size());
      for (char32_t c : cps) {
        std::string s;
        append_utf8(s, c);
        chars.push_back(Value::string(std::move(s)));
      }
      return chars;
    }
    default:
      fail(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

// ---- attribute and item access (Jinja's sandboxed getattr / getitem) ----

Value Interpreter::get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail(obj.undefined_message());
  auto missing = [&] {
    return Value::undefined("'" + object_description(obj) + "' has no attribute '" +
                            std::string(name) + "'");
  };
  if (!name.empty() && name[0] == '_') {
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                            type_name(obj) + "' object is unsafe.");
  }
  if (has_method(obj, name)) {
    FuncObj* f = heap_.make<FuncObj>();
    f->type = FuncObj::Type::kMethod;
    f->name = std::string(name);
    f->self = obj;
    return Value::func(f);
  }
  switch (obj.kind()) {
    case Kind::kDict:
    case Kind::kNamespace: {
      const Value* v = obj.dict_obj()->find(name);
      if (v) return *v;
      if (obj.kind() == Kind::kNamespace) {
        return Value::undefined("'jinja2.utils.Namespace object' has no attribute '" +
                                std::string(name) + "'");
      }
      return missing();
    }
    case Kind::kLoop:
      return loop_attr(*obj.loop_obj(), name);
    default:
      return missing();
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(obj.undefined_message());
  auto no_element = [&] {
    if (key.is_string()) {
      return Value::undefined("'" + object_description(obj) + "' has no attribute '" + key.str() +
                              "'");
    }
    return Value::undefined(object_description(obj) + " has no element " + repr(key));
  };
  switch (obj.kind()) {
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kString: {
      if (!key.is_int()) break;
      if (obj.is_string()) {
        const std::u32string cps = decode_utf8(obj.str());
        int64_t i = key.as_int();
        const auto n = static_cast<int64_t>(cps.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return no_element();
        std::string s;
        append_utf8(s, cps[static_cast<size_t>(i)]);
        return Value::string(std::move(s));
      }
      const auto& items = obj.list_obj()->items;
      int64_t i = key.as_int();
      const auto n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return no_element();
      return items[static_cast<size_t>(i)];
    }
    case Kind::kDict: {
      if (key.is_string() || key.is_number() || key.is_none() || key.kind() == Kind::kTuple) {
        if (const Value* v = obj.dict_obj()->find(key)) return *v;
      }
      break;
    }
    default:
      break;
  }
  if (key.is_string()) {
    Value attr = get_attr(obj, key.str());
    if (!attr.is_undefined()) return attr;
  }
  return no_element();
}

Value Interpreter::loop_attr(const LoopObj& loop, std::string_view name) {
  const auto& items = loop.items->items;
  const auto n = static_cast<int64_t>(loop.length);
  const auto available = static_cast<int64_t>(items.size());
  const auto i = static_cast<int64_t>(loop.index0);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(loop.depth0 + 1);
  if (name == "depth0") return Value::integer(loop.depth0);
  if (name == "previtem") {
    return i > 0 && i - 1 < available ? items[static_cast<size_t>(i - 1)]
                                      : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n && i + 1 < available ? items[static_cast<size_t>(i + 1)]
                                          : Value::undefined("there is no next item");
  }
  if (name == "cycle" || name == "changed") {
    FuncObj* f = heap_.make<FuncObj>();
    f->type = FuncObj::Type::kMethod;
    f->name = std::string(name);
    f->self = Value::loop(const_cast<LoopObj*>(&loop));
    return Value::func(f);
  }
  return Value::undefined("'LoopContext object' has no attribute '" + std::string(name) + "'");
}

// ---- calls ----

Value Interpreter::call(const Value& callee, Args& args) {
  switch (callee.kind()) {
    case Kind::kFunc: {
      const FuncObj& f = *callee.func_obj();
      switch (f.type) {
        case FuncObj::Type::kBuiltin:
          return f.builtin(*this, args);
        case FuncObj::Type::kMacro:
          return call_macro(f, args);
        case FuncObj::Type::kMethod:
          if (f.self.kind() == Kind::kLoop) {
            LoopObj& loop = *f.self.loop_obj();
            if (f.name == "cycle") {
              if (args.positional.empty()) fail("no items for cycling given");
              return args.positional[loop.index0 % args.positional.size()];
            }
            // changed(*values): true when the values differ from the previous call's.
            Value now = new_tuple(args.positional);
            const bool changed = !loop.has_changed || !equals(now, loop.last_changed);
            loop.last_changed = now;
            loop.has_changed = true;
            return Value::boolean(changed);
          }
          return call_method(*this, f.self, f.name, args);
      }
      break;
    }
    case Kind::kLoop: {
      const LoopObj& loop = *callee.loop_obj();
      if (!loop.node || !loop.node->recursive) {
        fail("Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
      }
      if (args.positional.size() != 1) fail("loop() takes exactly one argument");
      Capture capture(*this);
      ScopeSwap swap(*this, loop.scope);
      exec_for(*loop.node, args.positional[0], loop.depth0 + 1);
      return Value::string(capture.take());
    }
    case Kind::kUndefined:
      fail(callee.undefined_message());
    default:
      break;
  }
  fail(std::string("'") + type_name(callee) + "' object is not callable");
}

Value Interpreter::call_macro(const FuncObj& f, Args& args) {
  DepthGuard guard(*this);
  const MacroStmt& m = *f.macro;
  auto scope = std::make_shared<Scope>();
  scope->parent = f.closure;
  ScopeSwap swap(*this, scope);
  const size_t n_params = m.params.size();
  const size_t first_default = n_params - m.defaults.size();
  std::vector<bool> used(args.keyword.size(), false);
  for (size_t i = 0; i < n_params; ++i) {
    const std::string& name = m.params[i];
    if (i < args.positional.size()) {
      scope->set(name, args.positional[i]);
      continue;
    }
    bool found = false;
    for (size_t k = 0; k < args.keyword.size(); ++k) {
      if (args.keyword[k].first == name) {
        scope->set(name, args.keyword[k].second);
        used[k] = true;
        found = true;
      }
    }
    if (found) continue;
    if (i >= first_default) {
      scope->set(name, eval(*m.defaults[i - first_default]));  // may use earlier parameters
    } else {
      scope->set(name, Value::undefined("parameter '" + name + "' was not provided"));
    }
  }
  std::vector<Value> extra;
  for (size_t i = n_params; i < args.positional.size(); ++i) extra.push_back(args.positional[i]);
  scope->set("varargs", new_tuple(std::move(extra)));
  DictObj* kwargs = heap_.new_dict();
  for (size_t k = 0; k < args.keyword.size(); ++k) {
    if (used[k]) continue;
    if (args.keyword[k].first == "caller") {
      scope->set("caller", args.keyword[k].second);
      continue;
    }
    heap_.charge(kDictEntryCost);
    kwargs->set(Value::string(args.keyword[k].first), args.keyword[k].second);
  }
  scope->set("kwargs", Value::dict(kwargs));
  Capture capture(*this);
  exec_body(m.body);
  return Value::string(capture.take());
}

Args Interpreter::eval_args(const CallArgs& a) {
  Args args;
  args.positional.reserve(a.positional.size());
  for (const auto& e : a.positional) args.positional.push_back(eval(*e));
  if (a.star_args) {
    for (Value& v : iterate(eval(*a.star_args))) args.positional.push_back(std::move(v));
  }
  for (const auto& [name, e] : a.keyword) args.keyword.emplace_back(name, eval(*e));
  if (a.star_kwargs) {
    const Value d = eval(*a.star_kwargs);
    if (!d.is_mapping()) fail("argument after ** must be a mapping");
    for (const auto& [k, v] : d.dict_obj()->entries) {
      if (!k.is_string()) fail("keywords must be strings");
      args.keyword.emplace_back(k.str(), v);
    }
  }
  return args;
}

Value Interpreter::eval_call(const CallExpr& e) {
  if (e.callee->kind == ExprKind::kGetAttr) {
    // obj.method(...): call str/list/dict methods directly, without a bound-method object.
    const auto& ga = static_cast<const GetAttrExpr&>(*e.callee);
    Value obj = eval(*ga.obj);
    if (has_method(obj, ga.name)) {
      Args args = eval_args(e.args);
      return call_method(*this, obj, ga.name, args);
    }
    Value fn = get_attr(obj, ga.name);
    Args args = eval_args(e.args);
    return call(fn, args);
  }
  Value fn = eval(*e.callee);
  Args args = eval_args(e.args);
  return call(fn, args);
}

Value Interpreter::apply_filter(std::string_view name, const Value& v, Args& args) {
  FilterFn fn = find_filter(name);
  if (!fn) fn = find_sequence_filter(name);
  if (!fn) fail("no filter named '" + std::string(name) + "'");
  return fn(*this, v, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& v, Args& args) {
  TestFn fn = find_test(name);
  if (!fn) fail("no test named '" + std::string(name) + "'");
  return fn(*this, v, args);
}

Value Interpreter::eval_filter(const FilterExpr& f, const Value* base) {
  Value v;
  if (!f.obj) {
    v = *base;
  } else if (f.obj->kind == ExprKind::kFilter && base) {
    v = eval_filter(static_cast<const FilterExpr&>(*f.obj), base);
  } else {
    v = eval(*f.obj);
  }
  Args args = eval_args(f.args);
  return apply_filter(f.name, v, args);
}

// ---- expressions ----

Value Interpreter::lookup(const std::string& name) {
  for (Scope* s = scope_.get(); s; s = s->parent.get()) {
    if (Value* v = s->find_local(name)) return *v;
  }
  if (BuiltinFn fn = find_global(name)) {
    for (FuncObj* f : globals_) {
      if (f->builtin == fn) return Value::func(f);
    }
    FuncObj* f = heap_.make<FuncObj>();
    f->type = FuncObj::Type::kBuiltin;
    f->name = name;
    f->builtin = fn;
    globals_.push_back(f);
    return Value::func(f);
  }
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::eval_compare(const CompareExpr& e) {
  Value left = eval(*e.first);
  for (const auto& [op, expr] : e.rest) {
    Value right = eval(*expr);
    bool ok = false;
    switch (op) {
      case CmpOp::kEq:
        ok = equals(left, right);
        break;
      case CmpOp::kNe:
        ok = !equals(left, right);
        break;
      case CmpOp::kLt:
        ok = less(left, right);
        break;
      case CmpOp::kLtEq:
        ok = less(left, right) || equals(left, right);
        break;
      case CmpOp::kGt:
        ok = less(right, left);
        break;
      case CmpOp::kGtEq:
        ok = less(right, left) || equals(left, right);
        break;
      case CmpOp::kIn:
        ok = contains(right, left);
        break;
      case CmpOp::kNotIn:
        ok = !contains(right, left);
        break;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_slice(const Value& obj, const SliceExpr& s) {
  auto bound = [&](const ExprPtr& e) -> std::optional<int64_t> {
    if (!e) return std::nullopt;
    Value v = eval(*e);
    if (v.is_none()) return std::nullopt;
    if (!v.is_int()) fail("slice indices must be integers or None");
    return v.as_int();
  };
  auto start = bound(s.start);
  auto stop = bound(s.stop);
  auto step = bound(s.step);
  if (obj.is_undefined()) fail(obj.undefined_message());
  if (!obj.is_list_like() && !obj.is_string()) {
    return Value::undefined(object_description(obj) + " has no element slice");
  }
  return slice_value(*this, obj, start, stop, step);
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(*this);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::kConst:
      return static_cast<const ConstExpr&>(e).value;
    case ExprKind::kName:
      return lookup(static_cast<const NameExpr&>(e).name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& i : static_cast<const SeqExpr&>(e).items) items.push_back(eval(*i));
      return e.kind == ExprKind::kList ? new_list(std::move(items)) : new_tuple(std::move(items));
    }
    case ExprKind::kDict: {
      DictObj* d = heap_.new_dict();
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        Value key = eval(*k);
        heap_.charge(kDictEntryCost);
        d->set(key, eval(*v));
      }
      return Value::dict(d);
    }
    case ExprKind::kGetAttr: {
      const auto& g = static_cast<const GetAttrExpr&>(e);
      return get_attr(eval(*g.obj), g.name);
    }
    case ExprKind::kGetItem: {
      const auto& g = static_cast<const GetItemExpr&>(e);
      Value obj = eval(*g.obj);
      if (g.index->kind == ExprKind::kSlice) {
        return eval_slice(obj, static_cast<const SliceExpr&>(*g.index));
      }
      return get_item(obj, eval(*g.index));
    }
    case ExprKind::kCall:
      return eval_call(static_cast<const CallExpr&>(e));
    case ExprKind::kFilter:
      return eval_filter(static_cast<const FilterExpr&>(e), nullptr);
    case ExprKind::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      Value v = eval(*t.obj);
      Args args = eval_args(t.args);
      return Value::boolean(apply_test(t.name, v, args));
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*static_cast<const UnaryExpr&>(e).operand)));
    case ExprKind::kNeg:
      return negate(eval(*static_cast<const UnaryExpr&>(e).operand));
    case ExprKind::kPos:
      return unary_plus(eval(*static_cast<const UnaryExpr&>(e).operand));
    case ExprKind::kBinary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      Value l = eval(*b.lhs);
      Value r = eval(*b.rhs);
      return binary_op(*this, b.op, l, r);
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      Value l = eval(*b.lhs);
      if (truthy(l) == (e.kind == ExprKind::kOr)) return l;
      return eval(*b.rhs);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& i : static_cast<const ConcatExpr&>(e).items) {
        append_str(s, eval(*i));
        check_size(s.size());
      }
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(static_cast<const CompareExpr&>(e));
    case ExprKind::kCond: {
      const auto& c = static_cast<const CondExpr&>(e);
      if (truthy(eval(*c.test))) return eval(*c.then);
      if (c.otherwise) return eval(*c.otherwise);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kSlice:
    case ExprKind::kNsRef:
      break;
  }
  fail("invalid expression");
}

// ---- statements ----

void Interpreter::assign(const Expr& target, const Value& v) {
  switch (target.kind) {
    case ExprKind::kName:
      scope_->set(static_cast<const NameExpr&>(target).name, v);
      return;
    case ExprKind::kNsRef: {
      const auto& ns = static_cast<const NsRefExpr&>(target);
      Value obj = lookup(ns.name);
      if (obj.kind() != Kind::kNamespace) fail("cannot assign attribute on non-namespace object");
      heap_.charge(kDictEntryCost);
      obj.dict_obj()->set(Value::string(ns.attr), v);
      return;
    }
    case ExprKind::kTuple: {
      const auto& targets = static_cast<const SeqExpr&>(target).items;
      std::vector<Value> values = iterate(v);
      if (values.size() < targets.size()) {
        fail("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
             std::to_string(values.size()) + ")");
      }
      if (values.size() > targets.size()) {
        fail("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
      }
      for (size_t i = 0; i < targets.size(); ++i) assign(*targets[i], values[i]);
      return;
    }
    default:
      fail("invalid assignment target");
  }
}

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const ForStmt& node, const Value& iterable, int depth0) {
  // A list or tuple is iterated in place (no copy kept on the heap); the body may shrink it,
  // so every access re-checks the bound.
  ListObj* source = nullptr;
  std::vector<Value> items;
  if (iterable.is_list_like() && !node.filter) {
    source = iterable.list_obj();
  } else {
    items = iterate(iterable);
  }
  if (node.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      ScopeSwap swap(*this, child_scope());
      assign(*node.target, item);
      if (truthy(eval(*node.filter))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (source ? source->items.empty() : items.empty()) {
    ScopeSwap swap(*this, child_scope());
    exec_body(node.otherwise);
    return;
  }
  LoopObj* loop = heap_.make<LoopObj>();
  loop->items = source ? source : new_list(std::move(items)).list_obj();
  loop->depth0 = depth0;
  loop->node = &node;
  loop->scope = scope_;
  loop->length = loop->items->items.size();
  for (size_t i = 0; i < loop->length && i < loop->items->items.size(); ++i) {
    step();
    loop->index0 = i;
    ScopeSwap swap(*this, child_scope());
    assign(*node.target, loop->items->items[i]);
    scope_->set("loop", Value::loop(loop));
    if (exec_body(node.body) == Flow::kBreak) break;
  }
}

void Interpreter::exec_call_block(const CallBlockStmt& node) {
  FuncObj* caller = heap_.make<FuncObj>();
  caller->type = FuncObj::Type::kMacro;
  caller->name = "caller";
  caller->macro = &node;
  caller->closure = scope_;
  const auto& call_expr = static_cast<const CallExpr&>(*node.call);
  Value fn;
  Args args;
  if (call_expr.callee->kind == ExprKind::kGetAttr) {
    const auto& ga = static_cast<const GetAttrExpr&>(*call_expr.callee);
    fn = get_attr(eval(*ga.obj), ga.name);
  } else {
    fn = eval(*call_expr.callee);
  }
  args = eval_args(call_expr.args);
  args.keyword.emplace_back("caller", Value::func(caller));
  write_value(call(fn, args));
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  DepthGuard guard(*this);
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::kText:
      write(static_cast<const TextStmt&>(s).text);
      return Flow::kNormal;
    case StmtKind::kOutput:
      write_value(eval(*static_cast<const ExprStmt&>(s).expr));
      return Flow::kNormal;
    case StmtKind::kDo:
      eval(*static_cast<const ExprStmt&>(s).expr);
      return Flow::kNormal;
    case StmtKind::kIf: {
      const auto& n = static_cast<const IfStmt&>(s);
      for (const auto& [test, body] : n.branches) {
        if (truthy(eval(*test))) return exec_body(body);
      }
      return exec_body(n.otherwise);
    }
    case StmtKind::kFor: {
      const auto& n = static_cast<const ForStmt&>(s);
      exec_for(n, eval(*n.iter), 0);
      return Flow::kNormal;
    }
    case StmtKind::kSet: {
      const auto& n = static_cast<const SetStmt&>(s);
      assign(*n.target, eval(*n.value));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& n = static_cast<const SetBlockStmt&>(s);
      std::string text;
      {
        Capture capture(*this);
        ScopeSwap swap(*this, child_scope());
        exec_body(n.body);
        text = capture.take();
      }
      Value v = Value::string(std::move(text));
      if (n.filter) v = eval_filter(static_cast<const FilterExpr&>(*n.filter), &v);
      assign(*n.target, v);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& n = static_cast<const MacroStmt&>(s);
      FuncObj* f = heap_.make<FuncObj>();
      f->type = FuncObj::Type::kMacro;
      f->name = n.name;
      f->macro = &n;
      f->closure = scope_;
      scope_->set(n.name, Value::func(f));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock:
      exec_call_block(static_cast<const CallBlockStmt&>(s));
      return Flow::kNormal;
    case StmtKind::kFilterBlock: {
      const auto& n = static_cast<const FilterBlockStmt&>(s);
      std::string text;
      {
        Capture capture(*this);
        ScopeSwap swap(*this, child_scope());
        exec_body(n.body);
        text = capture.take();
      }
      const Value v = Value::string(std::move(text));
      write_value(eval_filter(static_cast<const FilterExpr&>(*n.filter), &v));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& n = static_cast<const WithStmt&>(s);
      std::vector<Value> values;
      for (const auto& [target, value] : n.assignments) values.push_back(eval(*value));
      ScopeSwap swap(*this, child_scope());
      for (size_t i = 0; i < values.size(); ++i) assign(*n.assignments[i].first, values[i]);
      return exec_body(n.body);
    }
    case StmtKind::kScope:
      return exec_body(static_cast<const ScopeStmt&>(s).body);
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

}  // namespace vela::jinja

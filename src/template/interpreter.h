#pragma once
// Renders a parsed Template: statements, expression evaluation, scoping (Jinja's rules: a
// for-loop iteration, macro call, with-block and block-set body each get a scope; `set`
// writes to the innermost one; namespaces are the way to carry state out of loops), macros
// and call blocks, loops with `loop.*`, break/continue and recursive loops.
// Every render is bounded: output and string size, total evaluation steps, recursion depth
// and heap elements, each turning into a RenderError when exceeded.
// Thread-safety: one Interpreter per render; it is not shared between threads.
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace vela::jinja {

struct Limits {
  size_t max_output_bytes = 32u << 20;  // also the largest string a template may build
  uint64_t max_steps = 50'000'000;      // evaluated nodes + loop iterations
  int max_depth = 500;                  // nested evaluation (statements, expressions, calls)
  size_t max_items = 10'000'000;        // list/dict elements and objects on the heap
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  Value* find_local(std::string_view name);
  void set(std::string_view name, Value v);
};

// Args::get index for keyword-only parameters.
inline constexpr size_t kKeywordOnly = static_cast<size_t>(-1);

// Evaluated call arguments, Python style.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`; null if not passed.
  const Value* get(size_t index, std::string_view name) const;
  Value get_or(size_t index, std::string_view name, Value fallback) const;
  // Fails when more than `max_positional` positional arguments or an unknown keyword is given.
  void check(std::string_view function, size_t max_positional,
             std::initializer_list<std::string_view> keywords) const;
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, const std::tm& now);

  Heap& heap() { return heap_; }
  // Line of the statement or expression evaluated last (for error messages).
  int line() const { return line_; }
  const std::tm& now() const { return now_; }

  // Renders `tmpl` with `context` (a dict of top-level variables). Throws RenderError.
  std::string render(const Template& tmpl, const Value& context);

  // ---- services for filters, tests, methods and globals ----
  Value new_list(std::vector<Value> items);
  Value new_tuple(std::vector<Value> items);
  // A string result; fails past the size limit.
  Value new_string(std::string s);
  // Fails if a string of `n` bytes would exceed the size limit (check before building).
  void check_size(size_t n) const;
  // Python's iter(): list items, dict keys, string characters, nothing for undefined.
  std::vector<Value> iterate(const Value& v);
  Value get_attr(const Value& obj, std::string_view name);
  Value get_item(const Value& obj, const Value& key);
  Value call(const Value& callee, Args& args);
  Value apply_filter(std::string_view name, const Value& v, Args& args);
  bool apply_test(std::string_view name, const Value& v, Args& args);
  // Counts one unit of work against max_steps.
  void step() {
    if (++steps_ > limits_.max_steps) fail("template exceeded its step limit (runaway loop?)");
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  struct DepthGuard {
    explicit DepthGuard(Interpreter& in) : in_(in) {
      if (++in_.depth_ > in_.limits_.max_depth) fail("template recursion too deep");
      in_.step();
    }
    ~DepthGuard() { --in_.depth_; }
    Interpreter& in_;
  };
  friend struct DepthGuard;

  // Swaps in a fresh output buffer; the previous one is restored on destruction.
  class Capture {
   public:
    explicit Capture(Interpreter& in) : in_(in), saved_(in.out_) { in_.out_ = &buf_; }
    ~Capture() { in_.out_ = saved_; }
    std::string take() { return std::move(buf_); }

   private:
    Interpreter& in_;
    std::string* saved_;
    std::string buf_;
  };

  // Runs with `scope` as the innermost scope; the previous one is restored on destruction.
  class ScopeSwap {
   public:
    ScopeSwap(Interpreter& in, std::shared_ptr<Scope> scope) : in_(in), saved_(in.scope_) {
      in_.scope_ = std::move(scope);
    }
    ~ScopeSwap() { in_.scope_ = std::move(saved_); }

   private:
    Interpreter& in_;
    std::shared_ptr<Scope> saved_;
  };

  std::shared_ptr<Scope> child_scope() const;
  void write(std::string_view s);
  void write_value(const Value& v);

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const ForStmt& node, const Value& iterable, int depth0);
  void exec_call_block(const CallBlockStmt& node);
  void assign(const Expr& target, const Value& v);

  Value eval(const Expr& e);
  Value lookup(const std::string& name);
  Args eval_args(const CallArgs& a);
  Value eval_call(const CallExpr& e);
  Value eval_filter(const FilterExpr& f, const Value* base);
  Value eval_compare(const CompareExpr& e);
  Value eval_slice(const Value& obj, const SliceExpr& s);
  Value call_macro(const FuncObj& f, Args& args);
  Value loop_attr(const LoopObj& loop, std::string_view name);

  Limits limits_;
  std::tm now_;
  Heap heap_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;
  std::vector<FuncObj*> globals_;  // global functions looked up so far (one object each)
};

}  // namespace vela::jinja

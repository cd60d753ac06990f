#pragma once
// The parsed template: expression and statement nodes, mirroring Jinja2's node types.
// Nodes are immutable after parsing; the interpreter walks them by `kind` and static_cast.
// Thread-safety: a parsed tree is read-only and may be shared by concurrent renders.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace vela::jinja {

enum class ExprKind : uint8_t {
  kConst,
  kName,
  kList,
  kTuple,
  kDict,
  kGetAttr,
  kGetItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNot,
  kNeg,
  kPos,
  kBinary,
  kAnd,
  kOr,
  kConcat,
  kCompare,
  kCond,
  kNsRef,
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLtEq, kGt, kGtEq, kIn, kNotIn };

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
  int depth = 1;  // height of the subtree (the parser bounds it)
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(int l, Value v) : Expr(ExprKind::kConst, l), value(std::move(v)) {}
  Value value;  // a scalar or string: parse-time values never refer to a heap
};

struct NameExpr : Expr {
  NameExpr(int l, std::string n) : Expr(ExprKind::kName, l), name(std::move(n)) {}
  std::string name;
};

// kList or kTuple.
struct SeqExpr : Expr {
  SeqExpr(ExprKind k, int l) : Expr(k, l) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetAttrExpr : Expr {
  GetAttrExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kGetAttr, l), obj(std::move(o)), name(std::move(n)) {}
  ExprPtr obj;
  std::string name;
};

struct GetItemExpr : Expr {
  GetItemExpr(int l, ExprPtr o, ExprPtr i)
      : Expr(ExprKind::kGetItem, l), obj(std::move(o)), index(std::move(i)) {}
  ExprPtr obj;
  ExprPtr index;  // may be a SliceExpr
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprKind::kSlice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct CallExpr : Expr {
  CallExpr(int l, ExprPtr c) : Expr(ExprKind::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  CallArgs args;
};

// `obj | name(args)`; obj is null for the filter of a filter block or block set.
struct FilterExpr : Expr {
  FilterExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kFilter, l), obj(std::move(o)), name(std::move(n)) {}
  ExprPtr obj;
  std::string name;
  CallArgs args;
};

struct TestExpr : Expr {
  TestExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kTest, l), obj(std::move(o)), name(std::move(n)) {}
  ExprPtr obj;
  std::string name;
  CallArgs args;
};

// kNot, kNeg, kPos.
struct UnaryExpr : Expr {
  UnaryExpr(ExprKind k, int l, ExprPtr o) : Expr(k, l), operand(std::move(o)) {}
  ExprPtr operand;
};

// kBinary (arithmetic, `op`), kAnd, kOr.
struct BinaryExpr : Expr {
  BinaryExpr(ExprKind k, int l, BinOp o, ExprPtr a, ExprPtr b)
      : Expr(k, l), op(o), lhs(std::move(a)), rhs(std::move(b)) {}
  BinOp op;
  ExprPtr lhs, rhs;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(int l) : Expr(ExprKind::kConcat, l) {}
  std::vector<ExprPtr> items;
};

struct CompareExpr : Expr {
  CompareExpr(int l, ExprPtr f) : Expr(ExprKind::kCompare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> rest;
};

// `then if test else otherwise`; otherwise may be null (undefined).
struct CondExpr : Expr {
  explicit CondExpr(int l) : Expr(ExprKind::kCond, l) {}
  ExprPtr test, then, otherwise;
};

// `ns.attr` as an assignment target.
struct NsRefExpr : Expr {
  NsRefExpr(int l, std::string n, std::string a)
      : Expr(ExprKind::kNsRef, l), name(std::move(n)), attr(std::move(a)) {}
  std::string name, attr;
};

// ---- statements ----

enum class StmtKind : uint8_t {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kDo,
  kScope,  // a plain body: {% block %}, {% generation %}, {% autoescape %}
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(int l, std::string t) : Stmt(StmtKind::kText, l), text(std::move(t)) {}
  std::string text;
};

// `{{ expr }}` (kOutput) or `{% do expr %}` (kDo).
struct ExprStmt : Stmt {
  ExprStmt(StmtKind k, int l, ExprPtr e) : Stmt(k, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::kFor, l) {}
  ExprPtr target;  // NameExpr or SeqExpr(kTuple) of targets
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if cond`; may be null
  Body body;
  Body otherwise;
  bool recursive = false;
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtKind::kSet, l) {}
  ExprPtr target;  // NameExpr, NsRefExpr or tuple of names
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtKind::kSetBlock, l) {}
  ExprPtr target;
  ExprPtr filter;  // FilterExpr chain ending in a null obj; may be null
  Body body;
};

struct MacroStmt : Stmt {
  MacroStmt(StmtKind k, int l) : Stmt(k, l) {}
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
};

// `{% call(params) macro(args) %}body{% endcall %}`: the body becomes `caller`.
struct CallBlockStmt : MacroStmt {
  explicit CallBlockStmt(int l) : MacroStmt(StmtKind::kCallBlock, l) {}
  ExprPtr call;  // a CallExpr
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::kFilterBlock, l) {}
  ExprPtr filter;  // FilterExpr chain ending in a null obj
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(StmtKind::kWith, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;  // target, value
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(int l) : Stmt(StmtKind::kScope, l) {}
  Body body;
};

struct Template {
  Body body;
};

// The largest `depth` among a node's children (0 for leaves); the parser uses it to bound
// tree height as nodes are built.
int child_depth(const Expr& e);

}  // namespace vela::jinja

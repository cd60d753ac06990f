#include "template/ast.h"

#include <algorithm>

namespace vela::jinja {

namespace {

int depth_of(const Expr* e) {
  return e ? e->depth : 0;
}
int depth_of(const ExprPtr& e) {
  return depth_of(e.get());
}

int args_depth(const CallArgs& a) {
  int d = std::max(depth_of(a.star_args), depth_of(a.star_kwargs));
  for (const auto& e : a.positional) d = std::max(d, depth_of(e));
  for (const auto& [name, e] : a.keyword) d = std::max(d, depth_of(e));
  return d;
}

}  // namespace

int child_depth(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kList:
    case ExprKind::kTuple: {
      int d = 0;
      for (const auto& i : static_cast<const SeqExpr&>(e).items) d = std::max(d, depth_of(i));
      return d;
    }
    case ExprKind::kDict: {
      int d = 0;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        d = std::max({d, depth_of(k), depth_of(v)});
      }
      return d;
    }
    case ExprKind::kGetAttr:
      return depth_of(static_cast<const GetAttrExpr&>(e).obj);
    case ExprKind::kGetItem: {
      const auto& g = static_cast<const GetItemExpr&>(e);
      return std::max(depth_of(g.obj), depth_of(g.index));
    }
    case ExprKind::kSlice: {
      const auto& s = static_cast<const SliceExpr&>(e);
      return std::max({depth_of(s.start), depth_of(s.stop), depth_of(s.step)});
    }
    case ExprKind::kCall: {
      const auto& c = static_cast<const CallExpr&>(e);
      return std::max(depth_of(c.callee), args_depth(c.args));
    }
    case ExprKind::kFilter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      return std::max(depth_of(f.obj), args_depth(f.args));
    }
    case ExprKind::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      return std::max(depth_of(t.obj), args_depth(t.args));
    }
    case ExprKind::kNot:
    case ExprKind::kNeg:
    case ExprKind::kPos:
      return depth_of(static_cast<const UnaryExpr&>(e).operand);
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      return std::max(depth_of(b.lhs), depth_of(b.rhs));
    }
    case ExprKind::kConcat: {
      int d = 0;
      for (const auto& i : static_cast<const ConcatExpr&>(e).items) d = std::max(d, depth_of(i));
      return d;
    }
    case ExprKind::kCompare: {
      const auto& c = static_cast<const CompareExpr&>(e);
      int d = depth_of(c.first);
      for (const auto& [op, x] : c.rest) d = std::max(d, depth_of(x));
      return d;
    }
    case ExprKind::kCond: {
      const auto& c = static_cast<const CondExpr&>(e);
      return std::max({depth_of(c.test), depth_of(c.then), depth_of(c.otherwise)});
    }
    default:
      return 0;
  }
}

}  // namespace vela::jinja

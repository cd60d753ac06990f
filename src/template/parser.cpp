#include "template/parser.h"

#include <algorithm>
#include <initializer_list>

#include "template/lexer.h"

namespace vela::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Template run() {
    Template t;
    t.body = subparse({});
    return t;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[std::min(pos_ + 1, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(Op op) const { return cur().type == Tok::kOp && cur().op == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(Op op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kData:
        return "template data";
      case Tok::kVarBegin:
        return "begin of print statement";
      case Tok::kVarEnd:
        return "end of print statement";
      case Tok::kBlockBegin:
        return "begin of statement block";
      case Tok::kBlockEnd:
        return "end of statement block";
      case Tok::kName:
        return t.text;
      case Tok::kString:
        return "string";
      case Tok::kInt:
        return "integer";
      case Tok::kFloat:
        return "float";
      case Tok::kOp:
        return op_text(t.op);
      case Tok::kEof:
        return "end of template";
    }
    return "token";
  }

  [[noreturn]] void error(const std::string& message) const {
    fail("syntax error (line " + std::to_string(cur().line) + "): " + message);
  }
  [[noreturn]] void unexpected() const { error("unexpected '" + describe(cur()) + "'"); }
  void expect_op(Op op) {
    if (!skip_op(op)) {
      error(std::string("expected '") + op_text(op) + "', got '" + describe(cur()) + "'");
    }
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type)
      error(std::string("expected ") + what + ", got '" + describe(cur()) + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) error("expected a name, got '" + describe(cur()) + "'");
    return next().text;
  }
  void expect_name(std::string_view n) {
    if (!skip_name(n)) error("expected '" + std::string(n) + "', got '" + describe(cur()) + "'");
  }

  // Records the node's depth and rejects trees deeper than the limit before they grow.
  ExprPtr finish(ExprPtr e) {
    e->depth = child_depth(*e) + 1;
    if (e->depth > kMaxExpressionDepth) error("expression nested too deeply");
    return e;
  }

  // Guards the parser's own recursion (parentheses do not add nodes).
  struct Recursion {
    explicit Recursion(Parser& p) : p_(p) {
      if (++p_.recursion_ > kMaxExpressionDepth) p_.error("expression nested too deeply");
    }
    ~Recursion() { --p_.recursion_; }
    Parser& p_;
  };

  // ---- statements ----

  Body subparse(std::initializer_list<std::string_view> end_tokens) {
    Body body;
    while (cur().type != Tok::kEof) {
      const Token& t = cur();
      if (t.type == Tok::kData) {
        body.push_back(std::make_unique<TextStmt>(t.line, t.text));
        next();
      } else if (t.type == Tok::kVarBegin) {
        const int line = t.line;
        next();
        body.push_back(std::make_unique<ExprStmt>(StmtKind::kOutput, line, parse_tuple()));
        expect(Tok::kVarEnd, "'}}'");
      } else if (t.type == Tok::kBlockBegin) {
        next();
        for (std::string_view end : end_tokens) {
          if (is_name(end)) return body;
        }
        body.push_back(parse_statement());
        expect(Tok::kBlockEnd, "'%}'");
      } else {
        unexpected();
      }
    }
    if (end_tokens.size() != 0) {
      std::string want;
      for (std::string_view e : end_tokens) {
        want += want.empty() ? "'" : " or '";
        want += e;
        want += "'";
      }
      error("unexpected end of template, expected " + want);
    }
    return body;
  }

  Body parse_statements(std::initializer_list<std::string_view> end_tokens, bool drop_needle) {
    skip_op(Op::kColon);
    expect(Tok::kBlockEnd, "'%}'");
    if (++nesting_ > kMaxStatementNesting) error("statements nested too deeply");
    Body body = subparse(end_tokens);
    --nesting_;
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    if (cur().type != Tok::kName) error("tag name expected");
    const std::string tag = cur().text;
    const int line = cur().line;
    if (tag == "for") return parse_for();
    if (tag == "if") return parse_if();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error("'" + tag + "' outside of a for loop");
      next();
      return std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
    }
    if (tag == "do") {
      next();
      return std::make_unique<ExprStmt>(StmtKind::kDo, line, parse_tuple());
    }
    if (tag == "print") {
      next();
      return std::make_unique<ExprStmt>(StmtKind::kOutput, line, parse_tuple());
    }
    if (tag == "block" || tag == "generation" || tag == "autoescape") {
      next();
      auto s = std::make_unique<ScopeStmt>(line);
      if (tag == "block") {
        expect_name();
        skip_name("scoped");
        skip_name("required");
      } else if (tag == "autoescape") {
        parse_expression();
      }
      const std::string end = "end" + tag;
      s->body = parse_statements({end}, true);
      if (tag == "block" && cur().type == Tok::kName) next();
      return s;
    }
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from") {
      error("'" + tag + "' is not supported in chat templates");
    }
    error("encountered unknown tag '" + tag + "'");
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<ForStmt>(next().line);
    s->target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    s->iter = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression();
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") s->otherwise = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<IfStmt>(next().line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(body));
      const std::string tok = next().text;
      if (tok == "elif") continue;
      if (tok == "else") s->otherwise = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    const int line = next().line;
    ExprPtr target = parse_assign_target(true, false, {}, true);
    if (skip_op(Op::kAssign)) {
      auto s = std::make_unique<SetStmt>(line);
      s->target = std::move(target);
      s->value = parse_tuple();
      return s;
    }
    auto s = std::make_unique<SetBlockStmt>(line);
    s->target = std::move(target);
    s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  void parse_signature(MacroStmt& m) {
    expect_op(Op::kLParen);
    while (!is_op(Op::kRParen)) {
      if (!m.params.empty()) expect_op(Op::kComma);
      m.params.push_back(expect_name());
      if (skip_op(Op::kAssign)) {
        m.defaults.push_back(parse_expression());
      } else if (!m.defaults.empty()) {
        error("non-default argument follows default argument");
      }
    }
    expect_op(Op::kRParen);
  }

  Body parse_macro_body(std::string_view end) {
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    Body body = parse_statements({end}, true);
    loop_depth_ = saved_loops;
    return body;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<MacroStmt>(StmtKind::kMacro, next().line);
    s->name = expect_name();
    parse_signature(*s);
    s->body = parse_macro_body("endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<CallBlockStmt>(next().line);
    s->name = "caller";
    if (is_op(Op::kLParen)) parse_signature(*s);
    s->call = parse_expression();
    if (s->call->kind != ExprKind::kCall) error("expected call");
    s->body = parse_macro_body("endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<FilterBlockStmt>(next().line);
    s->filter = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<WithStmt>(next().line);
    while (cur().type != Tok::kBlockEnd) {
      if (!s->assignments.empty()) expect_op(Op::kComma);
      ExprPtr target = parse_assign_target(true, false, {}, false);
      expect_op(Op::kAssign);
      s->assignments.emplace_back(std::move(target), parse_expression());
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  static bool can_assign(const Expr& e) {
    if (e.kind == ExprKind::kName || e.kind == ExprKind::kNsRef) return true;
    if (e.kind != ExprKind::kTuple) return false;
    for (const auto& i : static_cast<const SeqExpr&>(e).items) {
      if (!can_assign(*i) || i->kind == ExprKind::kNsRef) return false;
    }
    return true;
  }

  ExprPtr parse_assign_target(bool with_tuple, bool name_only,
                              std::initializer_list<std::string_view> extra_end,
                              bool with_namespace) {
    ExprPtr target;
    if (name_only) {
      const int line = cur().line;
      target = finish(std::make_unique<NameExpr>(line, expect_name()));
    } else if (with_tuple) {
      target = parse_tuple(true, true, extra_end, false, with_namespace);
    } else {
      target = parse_primary(with_namespace);
    }
    if (!can_assign(*target)) error("can't assign to this expression");
    return target;
  }

  // ---- expressions ----

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof) return true;
    if (t.type == Tok::kOp && t.op == Op::kRParen) return true;
    for (std::string_view e : extra_end) {
      if (is_name(e)) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      std::initializer_list<std::string_view> extra_end = {},
                      bool explicit_parentheses = false, bool with_namespace = false) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(Op::kComma);
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
      if (is_op(Op::kComma)) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses) error("expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = std::make_unique<SeqExpr>(ExprKind::kTuple, line);
    t->items = std::move(args);
    return finish(std::move(t));
  }

  ExprPtr parse_expression(bool with_condexpr = true) {
    Recursion guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr1 = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      auto c = std::make_unique<CondExpr>(line);
      c->then = std::move(expr1);
      c->test = parse_or();
      if (skip_name("else")) {
        Recursion guard(*this);
        c->otherwise = parse_condexpr();
      }
      expr1 = finish(std::move(c));
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      left = finish(std::make_unique<BinaryExpr>(ExprKind::kOr, line, BinOp::kAdd, std::move(left),
                                                 parse_and()));
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      left = finish(std::make_unique<BinaryExpr>(ExprKind::kAnd, line, BinOp::kAdd, std::move(left),
                                                 parse_not()));
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Recursion guard(*this);
      const int line = next().line;
      return finish(std::make_unique<UnaryExpr>(ExprKind::kNot, line, parse_not()));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr expr = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CmpOp op;
      if (cur().type == Tok::kOp &&
          (cur().op == Op::kEq || cur().op == Op::kNe || cur().op == Op::kLt ||
           cur().op == Op::kLtEq || cur().op == Op::kGt || cur().op == Op::kGtEq)) {
        static constexpr CmpOp kMap[] = {CmpOp::kEq,   CmpOp::kNe, CmpOp::kGt,
                                         CmpOp::kGtEq, CmpOp::kLt, CmpOp::kLtEq};
        op = kMap[static_cast<int>(cur().op) - static_cast<int>(Op::kEq)];
        next();
      } else if (is_name("in")) {
        op = CmpOp::kIn;
        next();
      } else if (is_name("not") && look().type == Tok::kName && look().text == "in") {
        op = CmpOp::kNotIn;
        next();
        next();
      } else {
        break;
      }
      if (!cmp) cmp = std::make_unique<CompareExpr>(line, std::move(expr));
      cmp->rest.emplace_back(op, parse_math1());
      if (cmp->rest.size() > static_cast<size_t>(kMaxExpressionDepth)) {
        error("expression nested too deeply");
      }
    }
    if (!cmp) return expr;
    return finish(std::move(cmp));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op(Op::kAdd) || is_op(Op::kSub)) {
      const Token& t = next();
      const BinOp op = t.op == Op::kAdd ? BinOp::kAdd : BinOp::kSub;
      left = finish(std::make_unique<BinaryExpr>(ExprKind::kBinary, t.line, op, std::move(left),
                                                 parse_concat()));
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op(Op::kTilde)) return first;
    auto c = std::make_unique<ConcatExpr>(line);
    c->items.push_back(std::move(first));
    while (skip_op(Op::kTilde)) {
      c->items.push_back(parse_math2());
      if (c->items.size() > 10000) error("expression too long");
    }
    return finish(std::move(c));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op(Op::kMul) || is_op(Op::kDiv) || is_op(Op::kFloorDiv) || is_op(Op::kMod)) {
      const Token& t = next();
      const BinOp op = t.op == Op::kMul   ? BinOp::kMul
                       : t.op == Op::kDiv ? BinOp::kDiv
                       : t.op == Op::kMod ? BinOp::kMod
                                          : BinOp::kFloorDiv;
      left = finish(std::make_unique<BinaryExpr>(ExprKind::kBinary, t.line, op, std::move(left),
                                                 parse_pow()));
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op(Op::kPow)) {
      const int line = next().line;
      left = finish(std::make_unique<BinaryExpr>(ExprKind::kBinary, line, BinOp::kPow,
                                                 std::move(left), parse_unary(true)));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Recursion guard(*this);
    ExprPtr node;
    if (is_op(Op::kSub) || is_op(Op::kAdd)) {
      const Token& t = next();
      const ExprKind k = t.op == Op::kSub ? ExprKind::kNeg : ExprKind::kPos;
      node = finish(std::make_unique<UnaryExpr>(k, t.line, parse_unary(false)));
    } else {
      node = parse_primary(false);
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary(bool with_namespace) {
    Recursion guard(*this);
    const Token& t = cur();
    const int line = t.line;
    switch (t.type) {
      case Tok::kName: {
        const std::string name = next().text;
        if (name == "true" || name == "True")
          return finish(std::make_unique<ConstExpr>(line, Value::boolean(true)));
        if (name == "false" || name == "False")
          return finish(std::make_unique<ConstExpr>(line, Value::boolean(false)));
        if (name == "none" || name == "None")
          return finish(std::make_unique<ConstExpr>(line, Value::none()));
        if (with_namespace && is_op(Op::kDot)) {
          next();
          return finish(std::make_unique<NsRefExpr>(line, name, expect_name()));
        }
        return finish(std::make_unique<NameExpr>(line, name));
      }
      case Tok::kString: {
        std::string s;
        while (cur().type == Tok::kString) s += next().text;
        return finish(std::make_unique<ConstExpr>(line, Value::string(std::move(s))));
      }
      case Tok::kInt:
        return finish(std::make_unique<ConstExpr>(line, Value::integer(next().int_value)));
      case Tok::kFloat:
        return finish(std::make_unique<ConstExpr>(line, Value::number(next().float_value)));
      case Tok::kOp:
        if (t.op == Op::kLParen) {
          next();
          ExprPtr e = parse_tuple(false, true, {}, true);
          expect_op(Op::kRParen);
          return e;
        }
        if (t.op == Op::kLBracket) return parse_list();
        if (t.op == Op::kLBrace) return parse_dict();
        break;
      default:
        break;
    }
    unexpected();
  }

  ExprPtr parse_list() {
    auto l = std::make_unique<SeqExpr>(ExprKind::kList, next().line);
    while (!is_op(Op::kRBracket)) {
      if (!l->items.empty()) expect_op(Op::kComma);
      if (is_op(Op::kRBracket)) break;
      l->items.push_back(parse_expression());
    }
    expect_op(Op::kRBracket);
    return finish(std::move(l));
  }

  ExprPtr parse_dict() {
    auto d = std::make_unique<DictExpr>(next().line);
    while (!is_op(Op::kRBrace)) {
      if (!d->items.empty()) expect_op(Op::kComma);
      if (is_op(Op::kRBrace)) break;
      ExprPtr key = parse_expression();
      expect_op(Op::kColon);
      d->items.emplace_back(std::move(key), parse_expression());
    }
    expect_op(Op::kRBrace);
    return finish(std::move(d));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(Op::kDot) || is_op(Op::kLBracket)) {
        node = parse_subscript(std::move(node));
      } else if (is_op(Op::kLParen)) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op(Op::kPipe)) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op(Op::kLParen)) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    const int line = t.line;
    if (t.op == Op::kDot) {
      if (cur().type == Tok::kName) {
        return finish(std::make_unique<GetAttrExpr>(line, std::move(node), next().text));
      }
      if (cur().type != Tok::kInt) error("expected name or number");
      auto index = finish(std::make_unique<ConstExpr>(line, Value::integer(next().int_value)));
      return finish(std::make_unique<GetItemExpr>(line, std::move(node), std::move(index)));
    }
    std::vector<ExprPtr> args;
    while (!is_op(Op::kRBracket)) {
      if (!args.empty()) expect_op(Op::kComma);
      args.push_back(parse_subscribed());
    }
    expect_op(Op::kRBracket);
    ExprPtr index;
    if (args.size() == 1) {
      index = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<SeqExpr>(ExprKind::kTuple, line);
      tuple->items = std::move(args);
      index = finish(std::move(tuple));
    }
    return finish(std::make_unique<GetItemExpr>(line, std::move(node), std::move(index)));
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    auto slice = std::make_unique<SliceExpr>(line);
    if (is_op(Op::kColon)) {
      next();
    } else {
      ExprPtr e = parse_expression();
      if (!is_op(Op::kColon)) return e;
      next();
      slice->start = std::move(e);
    }
    if (!is_op(Op::kColon) && !is_op(Op::kRBracket) && !is_op(Op::kComma)) {
      slice->stop = parse_expression();
    }
    if (skip_op(Op::kColon)) {
      if (!is_op(Op::kRBracket) && !is_op(Op::kComma)) slice->step = parse_expression();
    }
    return finish(std::move(slice));
  }

  void parse_call_args(CallArgs& a) {
    expect_op(Op::kLParen);
    bool require_comma = false;
    while (!is_op(Op::kRParen)) {
      if (require_comma) {
        expect_op(Op::kComma);
        if (is_op(Op::kRParen)) break;
      }
      if (is_op(Op::kMul)) {
        if (a.star_args || a.star_kwargs) error("invalid syntax for function call expression");
        next();
        a.star_args = parse_expression();
      } else if (is_op(Op::kPow)) {
        if (a.star_kwargs) error("invalid syntax for function call expression");
        next();
        a.star_kwargs = parse_expression();
      } else if (cur().type == Tok::kName && look().type == Tok::kOp && look().op == Op::kAssign) {
        if (a.star_kwargs) error("invalid syntax for function call expression");
        std::string key = next().text;
        next();
        a.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (a.star_args || a.star_kwargs || !a.keyword.empty()) {
          error("invalid syntax for function call expression");
        }
        a.positional.push_back(parse_expression());
      }
      require_comma = true;
      if (a.positional.size() + a.keyword.size() > 1000) error("too many arguments");
    }
    expect_op(Op::kRParen);
  }

  ExprPtr parse_call(ExprPtr node) {
    auto c = std::make_unique<CallExpr>(cur().line, std::move(node));
    parse_call_args(c->args);
    return finish(std::move(c));
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (skip_op(Op::kDot)) name += "." + expect_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op(Op::kPipe) || start_inline) {
      if (!start_inline) next();
      const int line = cur().line;
      auto f = std::make_unique<FilterExpr>(line, std::move(node), parse_dotted_name());
      if (is_op(Op::kLParen)) parse_call_args(f->args);
      node = finish(std::move(f));
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = next().line;  // 'is'
    const bool negated = skip_name("not");
    auto t = std::make_unique<TestExpr>(line, std::move(node), parse_dotted_name());
    if (is_op(Op::kLParen)) {
      parse_call_args(t->args);
    } else {
      const Token& c = cur();
      const bool arg_start = c.type == Tok::kName || c.type == Tok::kString ||
                             c.type == Tok::kInt || c.type == Tok::kFloat ||
                             (c.type == Tok::kOp && (c.op == Op::kLParen || c.op == Op::kLBracket ||
                                                     c.op == Op::kLBrace));
      if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) error("you cannot chain multiple tests with is");
        t->args.positional.push_back(parse_postfix(parse_primary(false)));
      }
    }
    ExprPtr result = finish(std::move(t));
    if (negated)
      result = finish(std::make_unique<UnaryExpr>(ExprKind::kNot, line, std::move(result)));
    return result;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int recursion_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Template parse_template(std::string_view source) {
  return Parser(tokenize(source)).run();
}

}  // namespace vela::jinja

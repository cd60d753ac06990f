#pragma once
// Template source -> tokens, following Jinja2's lexer with the chat-template settings
// (trim_blocks, lstrip_blocks, keep_trailing_newline off): newlines normalized to "\n", one
// trailing newline dropped, `{%- -%}` / `{{- -}}` / `{#- -#}` whitespace control, `{%+` and
// `+%}` to opt out of lstrip/trim, `{% raw %}` blocks, Python string escapes.
// Thread-safety: stateless function.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vela::jinja {

enum class Tok : uint8_t {
  kData,        // template text
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof,
};

enum class Op : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGtEq,
  kLt,
  kLtEq,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
};

struct Token {
  Tok type = Tok::kEof;
  Op op = Op::kAdd;  // kOp only
  int line = 1;
  std::string text;  // kData text, kName identifier, kString decoded value
  int64_t int_value = 0;
  double float_value = 0;
};

// Tokenizes the whole template. Throws RenderError (with the line) on malformed input:
// unterminated tags, comments, strings or raw blocks, unbalanced brackets, bad characters.
std::vector<Token> tokenize(std::string_view source);

// How an operator token prints in messages.
const char* op_text(Op op);

}  // namespace vela::jinja

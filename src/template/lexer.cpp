#include "template/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "template/text.h"
#include "template/value.h"

namespace vela::jinja {

namespace {

constexpr size_t npos = std::string::npos;

[[noreturn]] void syntax_error(int line, const std::string& message) {
  fail("syntax error (line " + std::to_string(line) + "): " + message);
}

// "\r\n" and "\r" become "\n"; one trailing newline is dropped (keep_trailing_newline off).
std::string normalize(std::string_view raw) {
  std::string s;
  s.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      s.push_back(raw[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool is_digit_c(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit_c(c);
}

// Length of the whitespace code point at s[i] (Python's \s), or 0.
size_t space_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return is_space(c) ? 1 : 0;
  size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (i + len > s.size()) return 0;
  const std::u32string cp = decode_utf8(s.substr(i, len));
  return cp.size() == 1 && is_space(cp[0]) ? len : 0;
}

// Position after the whitespace run starting at i.
size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t len = space_len(s, i);
    if (!len) break;
    i += len;
  }
  return i;
}

// Python's str.rstrip() of `text`.
void rstrip_space(std::string& text) {
  size_t keep = 0, i = 0;
  while (i < text.size()) {
    const size_t len = space_len(text, i);
    if (len) {
      i += len;
    } else {
      const auto c = static_cast<unsigned char>(text[i]);
      i += c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
      keep = std::min(i, text.size());
    }
  }
  text.resize(keep);
}

// lstrip_blocks: drop the spaces between the last line start and a block/comment tag.
void lstrip_line(std::string& text, bool line_starting) {
  const size_t nl = text.rfind('\n');
  const size_t l_pos = nl == npos ? 0 : nl + 1;
  if (!(l_pos > 0 || line_starting) || l_pos >= text.size()) return;
  if (skip_space(text, l_pos) == text.size()) text.resize(l_pos);
}

int count_newlines(std::string_view s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to; ++i) n += s[i] == '\n';
  return n;
}

// (\d+_)*\d+ at i; returns the end or npos.
size_t digits_end(std::string_view s, size_t i) {
  if (i >= s.size() || !is_digit_c(s[i])) return npos;
  while (true) {
    while (i < s.size() && is_digit_c(s[i])) ++i;
    if (i + 1 < s.size() && s[i] == '_' && is_digit_c(s[i + 1])) {
      ++i;
      continue;
    }
    return i;
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's unicode-escape decoding of a string literal body.
std::string unescape(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 1; k <= n; ++k) {
          const int h = i + k < body.size() ? hex_value(body[i + k]) : -1;
          if (h < 0) syntax_error(line, std::string("truncated \\") + e + " escape");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF) syntax_error(line, "illegal Unicode character");
        append_utf8(out, cp);
        i += n;
        break;
      }
      case 'N':
        syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          append_utf8(out, cp);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw) : src_(normalize(raw)) {}

  std::vector<Token> run() {
    const size_t n = src_.size();
    while (pos_ < n) {
      size_t tag = pos_;
      while (true) {
        tag = src_.find('{', tag);
        if (tag == npos || tag + 1 >= n) {
          tag = npos;
          break;
        }
        const char k = src_[tag + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++tag;
      }
      if (tag == npos) {
        emit_data(src_.substr(pos_), line_);
        break;
      }
      const char kind = src_[tag + 1];
      size_t p = tag + 2;
      const char sign = (p < n && (src_[p] == '-' || src_[p] == '+')) ? src_[p] : 0;
      if (sign) ++p;
      std::string text = src_.substr(pos_, tag - pos_);
      if (sign == '-') {
        rstrip_space(text);
      } else if (sign != '+' && kind != '{') {
        lstrip_line(text, line_starting_);
      }
      const int text_line = line_;
      line_ += count_newlines(src_, pos_, tag);
      pos_ = tag;
      emit_data(std::move(text), text_line);
      if (kind == '#') {
        lex_comment(p);
      } else if (kind == '%' && try_raw(p)) {
        // consumed by try_raw
      } else {
        lex_tag(kind, p);
      }
    }
    Token eof;
    eof.type = Tok::kEof;
    eof.line = line_;
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  void emit_data(std::string text, int line) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::kData;
    t.line = line;
    t.text = std::move(text);
    tokens_.push_back(std::move(t));
  }

  void emit(Tok type, int line) {
    Token t;
    t.type = type;
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // Moves past a tag end: `sign` '-' eats all following whitespace, '+' nothing, none the one
  // newline that trim_blocks removes (block and comment tags only).
  void finish_tag(size_t end, char sign, bool trim) {
    size_t after = end;
    if (sign == '-') {
      after = skip_space(src_, end);
    } else if (sign == 0 && trim && after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    line_ += count_newlines(src_, pos_, after);
    pos_ = after;
    line_starting_ = after > 0 && src_[after - 1] == '\n';
  }

  void lex_comment(size_t start) {
    const size_t close = src_.find("#}", start);
    if (close == npos) syntax_error(line_, "missing end of comment tag");
    char sign = 0;
    if (close > start && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    finish_tag(close + 2, sign, true);
  }

  // `{% raw %}...{% endraw %}` -> one data token, if the tag at `p` is a raw tag.
  bool try_raw(size_t p) {
    size_t q = skip_space(src_, p);
    if (src_.compare(q, 3, "raw") != 0) return false;
    q = skip_space(src_, q + 3);
    size_t body;
    if (src_.compare(q, 3, "-%}") == 0) {
      body = skip_space(src_, q + 3);
    } else if (src_.compare(q, 2, "%}") == 0) {
      body = q + 2;
    } else {
      return false;
    }
    line_ += count_newlines(src_, pos_, body);
    pos_ = body;
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    for (size_t at = src_.find("{%", body); at != npos; at = src_.find("{%", at + 1)) {
      size_t r = at + 2;
      const char sign = (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ? src_[r] : 0;
      if (sign) ++r;
      r = skip_space(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = skip_space(src_, r + 6);
      char end_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, at - body);
      if (sign == '-') {
        rstrip_space(text);
      } else if (sign != '+') {
        lstrip_line(text, line_starting_);
      }
      emit_data(std::move(text), line_);
      finish_tag(r + 2, end_sign, true);
      return true;
    }
    syntax_error(line_, "missing end of raw directive");
  }

  void lex_tag(char kind, size_t p) {
    const bool block = kind == '%';
    emit(block ? Tok::kBlockBegin : Tok::kVarBegin, line_);
    line_ += count_newlines(src_, pos_, p);
    pos_ = p;
    std::vector<char> balance;
    const size_t n = src_.size();
    while (true) {
      if (pos_ >= n) {
        syntax_error(line_, std::string("unexpected end of template, expected '") +
                                (block ? "%}" : "}}") + "'");
      }
      if (balance.empty() && try_tag_end(block)) return;
      const char c = src_[pos_];
      if (const size_t ws = space_len(src_, pos_)) {
        line_ += c == '\n';
        pos_ += ws;
        continue;
      }
      if (is_digit_c(c)) {
        lex_number();
        continue;
      }
      if (is_ident_start(c)) {
        size_t e = pos_;
        while (e < n && is_ident_char(src_[e])) ++e;
        Token t;
        t.type = Tok::kName;
        t.line = line_;
        t.text = src_.substr(pos_, e - pos_);
        tokens_.push_back(std::move(t));
        pos_ = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      lex_operator(balance);
    }
  }

  bool try_tag_end(bool block) {
    const char* close = block ? "%}" : "}}";
    char sign = 0;
    size_t at = pos_;
    if (src_[at] == '-' || (block && src_[at] == '+')) {
      sign = src_[at];
      ++at;
    }
    if (src_.compare(at, 2, close) != 0) return false;
    emit(block ? Tok::kBlockEnd : Tok::kVarEnd, line_);
    finish_tag(at + 2, sign, block);
    return true;
  }

  void lex_number() {
    const size_t n = src_.size();
    const size_t start = pos_;
    const size_t int_end = digits_end(src_, start);
    size_t float_end = npos;
    if (start == 0 || src_[start - 1] != '.') {
      size_t i = int_end;
      if (i < n && src_[i] == '.') {
        const size_t f = digits_end(src_, i + 1);
        if (f != npos) i = f;
      }
      if (i < n && (src_[i] == 'e' || src_[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (src_[j] == '+' || src_[j] == '-')) ++j;
        float_end = digits_end(src_, j);
      }
      if (float_end == npos && int_end < n && src_[int_end] == '.') {
        float_end = digits_end(src_, int_end + 1);
      }
    }
    Token t;
    t.line = line_;
    auto strip_underscores = [](std::string_view s) {
      std::string r;
      for (char ch : s) {
        if (ch != '_') r.push_back(ch);
      }
      return r;
    };
    if (float_end != npos) {
      t.type = Tok::kFloat;
      t.float_value =
          std::strtod(strip_underscores(src_.substr(start, float_end - start)).c_str(), nullptr);
      pos_ = float_end;
      tokens_.push_back(std::move(t));
      return;
    }
    t.type = Tok::kInt;
    int base = 10;
    size_t i = start, end = int_end;
    if (src_[start] == '0' && start + 1 < n) {
      const char b = static_cast<char>(src_[start + 1] | 0x20);
      base = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 10;
      if (base != 10) {
        i = start + 2;
        end = i;
        while (end < n) {
          const size_t d = src_[end] == '_' ? end + 1 : end;
          const int h = d < n ? hex_value(src_[d]) : -1;
          if (h < 0 || h >= base) break;
          end = d + 1;
        }
        if (end == i) {  // "0x" without digits: just the integer 0
          base = 10;
          i = start;
          end = start + 1;
        }
      } else {
        // Decimal zero is "0(_?0)*"; "0123" lexes as 0 followed by 123.
        end = start + 1;
        while (end < n &&
               (src_[end] == '0' || (src_[end] == '_' && end + 1 < n && src_[end + 1] == '0'))) {
          ++end;
        }
      }
    }
    const std::string digits = strip_underscores(src_.substr(i, end - i));
    errno = 0;
    const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE ||
        v > static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
      syntax_error(line_, "integer literal too large");
    }
    t.int_value = static_cast<int64_t>(v);
    pos_ = end;
    tokens_.push_back(std::move(t));
  }

  void lex_string(char quote) {
    const size_t n = src_.size();
    size_t i = pos_ + 1;
    while (i < n && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= n) syntax_error(line_, "unterminated string literal");
    Token t;
    t.type = Tok::kString;
    t.line = line_;
    t.text = unescape(std::string_view(src_).substr(pos_ + 1, i - pos_ - 1), line_);
    line_ += count_newlines(src_, pos_, i);
    pos_ = i + 1;
    tokens_.push_back(std::move(t));
  }

  void lex_operator(std::vector<char>& balance) {
    static constexpr struct {
      const char* text;
      Op op;
    } kOps[] = {
        {"//", Op::kFloorDiv}, {"**", Op::kPow},      {"==", Op::kEq},    {"!=", Op::kNe},
        {">=", Op::kGtEq},     {"<=", Op::kLtEq},     {"+", Op::kAdd},    {"-", Op::kSub},
        {"/", Op::kDiv},       {"*", Op::kMul},       {"%", Op::kMod},    {"~", Op::kTilde},
        {"[", Op::kLBracket},  {"]", Op::kRBracket},  {"(", Op::kLParen}, {")", Op::kRParen},
        {"{", Op::kLBrace},    {"}", Op::kRBrace},    {">", Op::kGt},     {"<", Op::kLt},
        {"=", Op::kAssign},    {".", Op::kDot},       {":", Op::kColon},  {"|", Op::kPipe},
        {",", Op::kComma},     {";", Op::kSemicolon},
    };
    for (const auto& o : kOps) {
      const size_t len = std::char_traits<char>::length(o.text);
      if (src_.compare(pos_, len, o.text) != 0) continue;
      const char c = o.text[0];
      if (len == 1 && (c == '(' || c == '[' || c == '{')) {
        if (balance.size() >= 256) syntax_error(line_, "brackets nested too deeply");
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) syntax_error(line_, std::string("unexpected '") + c + "'");
        if (balance.back() != c) {
          syntax_error(line_,
                       std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
        }
        balance.pop_back();
      }
      Token t;
      t.type = Tok::kOp;
      t.op = o.op;
      t.line = line_;
      tokens_.push_back(std::move(t));
      pos_ += len;
      return;
    }
    std::string ch;
    ch.push_back(src_[pos_]);
    syntax_error(line_, "unexpected char '" + ch + "'");
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

const char* op_text(Op op) {
  static constexpr const char* kText[] = {
      "+", "-",  "*",  "/", "//", "%", "**", "~", "[", "]", "(", ")", "{",
      "}", "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";"};
  return kText[static_cast<int>(op)];
}

}  // namespace vela::jinja

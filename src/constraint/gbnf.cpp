#include "constraint/gbnf.h"

#include <map>
#include <string>
#include <vector>

#include "constraint/utf8_ranges.h"

namespace vela::constraint {

namespace {

using Sequence = std::vector<Element>;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<Grammar> run() {
    skip_space(true);
    while (pos_ < s_.size()) {
      const std::string name = parse_name();
      if (name.empty()) return fail("expected a rule name");
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") return fail("expected '::=' after '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const uint32_t rule = b_.rule(name);
      if (b_.defined(rule)) return fail("rule '" + name + "' is defined twice");
      std::vector<Sequence> alts;
      if (!parse_alternatives(false, alts)) return error_;
      if (auto st = b_.define(rule, std::move(alts)); !st) return st.error();
      if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r')
        return fail("unexpected character '" + std::string(1, s_[pos_]) + "'");
      skip_space(true);
    }
    return b_.finish("root");
  }

 private:
  Error fail(const std::string& message) {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    error_ = make_error("grammar error (line " + std::to_string(line) + "): " + message);
    return error_;
  }

  // Skips spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // After a top-level sequence ends at a newline: does the next line continue it with '|'?
  bool continues_with_bar() {
    size_t p = pos_;
    while (p < s_.size()) {
      const char c = s_[p];
      if (c == '#') {
        while (p < s_.size() && s_[p] != '\n') ++p;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p;
      } else {
        break;
      }
    }
    if (p < s_.size() && s_[p] == '|') {
      pos_ = p;
      return true;
    }
    return false;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '-' || s_[pos_] == '_'))
      ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  bool parse_alternatives(bool nested, std::vector<Sequence>& alts) {
    while (true) {
      Sequence seq;
      if (!parse_sequence(nested, seq)) return false;
      alts.push_back(std::move(seq));
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      if (!nested && continues_with_bar()) {
        ++pos_;
        skip_space(true);
        continue;
      }
      return true;
    }
  }

  bool parse_sequence(bool nested, Sequence& seq) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      Sequence item;
      if (c == '"') {
        if (!parse_literal(item)) return false;
      } else if (c == '[') {
        if (!parse_class(item)) return false;
      } else if (c == '.') {
        ++pos_;
        item.push_back(class_element(complement_ranges({}), "any"));
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        // The parser recurses once per level: a bound keeps hostile nesting off the stack.
        if (group_depth_ >= kMaxGroupNesting) {
          fail("groups nested deeper than " + std::to_string(kMaxGroupNesting));
          return false;
        }
        std::vector<Sequence> alts;
        ++group_depth_;
        const bool parsed = parse_alternatives(true, alts);
        --group_depth_;
        if (!parsed) return false;
        if (pos_ >= s_.size() || s_[pos_] != ')') {
          fail("expected ')'");
          return false;
        }
        ++pos_;
        if (alts.size() == 1) {
          item = std::move(alts[0]);
        } else {
          const uint32_t r = b_.fresh_rule("group");
          if (auto st = b_.define(r, std::move(alts)); !st) {
            error_ = st.error();
            return false;
          }
          item.push_back(b_.ref(r));
        }
      } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
        item.push_back(b_.ref(b_.rule(parse_name())));
      } else {
        fail("unexpected character '" + std::string(1, c) + "'");
        return false;
      }
      skip_space(nested);
      if (!parse_postfix(item, nested)) return false;
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return true;
  }

  bool read_number(uint32_t& out) {
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      v = v * 10 + uint64_t(s_[pos_] - '0');
      if (v > kMaxRepetition) {
        fail("repetition count over " + std::to_string(kMaxRepetition));
        return false;
      }
      ++pos_;
    }
    out = uint32_t(v);
    return pos_ > start;
  }

  bool parse_postfix(Sequence& item, bool nested) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      uint32_t lo = 0, hi = 0;
      bool unbounded = false;
      if (c == '*') {
        unbounded = true;
        ++pos_;
      } else if (c == '+') {
        lo = 1;
        unbounded = true;
        ++pos_;
      } else if (c == '?') {
        hi = 1;
        ++pos_;
      } else if (c == '{') {
        ++pos_;
        skip_space(true);
        if (!read_number(lo)) {
          if (!error_.message.empty()) return false;
          fail("expected a number after '{'");
          return false;
        }
        skip_space(true);
        hi = lo;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          skip_space(true);
          if (pos_ < s_.size() && s_[pos_] == '}') {
            unbounded = true;
          } else if (!read_number(hi)) {
            if (!error_.message.empty()) return false;
            fail("expected a number or '}'");
            return false;
          }
          skip_space(true);
        }
        if (pos_ >= s_.size() || s_[pos_] != '}') {
          fail("expected '}'");
          return false;
        }
        ++pos_;
        if (!unbounded && hi < lo) {
          fail("repetition {m,n} with n < m");
          return false;
        }
      } else {
        return true;
      }
      if (!repeat(item, lo, hi, unbounded)) return false;
      skip_space(nested);
    }
    return true;
  }

  // item{lo,hi} (or item{lo,} when unbounded), rewritten with helper rules.
  bool repeat(Sequence& item, uint32_t lo, uint32_t hi, bool unbounded) {
    Element x;
    if (item.size() == 1) {
      x = item[0];
    } else {
      const uint32_t r = b_.fresh_rule("item");
      if (!define(r, {item})) return false;
      x = b_.ref(r);
    }
    if (size_t(lo) + (unbounded ? 1 : hi) + b_.n_elements() > kMaxGrammarElements) {
      fail("the grammar is too large");
      return false;
    }
    Sequence out(lo, x);
    if (unbounded) {
      const uint32_t star = b_.fresh_rule("star");
      if (!define(star, {{x, b_.ref(star)}, {}})) return false;
      out.push_back(b_.ref(star));
    } else if (hi > lo) {
      // opt_1 ::= x | "" ; opt_k ::= x opt_{k-1} | ""
      uint32_t prev = b_.fresh_rule("opt");
      if (!define(prev, {{x}, {}})) return false;
      for (uint32_t k = 2; k <= hi - lo; ++k) {
        const uint32_t r = b_.fresh_rule("opt");
        if (!define(r, {{x, b_.ref(prev)}, {}})) return false;
        prev = r;
      }
      out.push_back(b_.ref(prev));
    }
    item = std::move(out);
    return true;
  }

  bool define(uint32_t rule, std::vector<Sequence> alts) {
    if (auto st = b_.define(rule, std::move(alts)); !st) {
      error_ = st.error();
      return false;
    }
    return true;
  }

  bool hex(size_t digits, uint32_t& out) {
    out = 0;
    for (size_t i = 0; i < digits; ++i) {
      if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) {
        fail("expected " + std::to_string(digits) + " hex digits");
        return false;
      }
      const char c = char(std::tolower(static_cast<unsigned char>(s_[pos_++])));
      out = out * 16 + uint32_t(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (out > 0x10FFFF) {
      fail("code point out of range");
      return false;
    }
    return true;
  }

  // One character of a literal or class: a UTF-8 sequence or an escape.
  bool read_char(uint32_t& cp) {
    if (pos_ >= s_.size()) {
      fail("unexpected end of the grammar");
      return false;
    }
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) {
        fail("unfinished escape");
        return false;
      }
      const char e = s_[pos_++];
      switch (e) {
        case 'n':
          cp = '\n';
          return true;
        case 'r':
          cp = '\r';
          return true;
        case 't':
          cp = '\t';
          return true;
        case 'x':
          return hex(2, cp);
        case 'u':
          return hex(4, cp);
        case 'U':
          return hex(8, cp);
        default:
          cp = static_cast<unsigned char>(e);
          return true;  // \\ \" \] \[ \- \^ ...
      }
    }
    // Decode UTF-8 (an invalid byte stands for itself).
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (n == 1 || pos_ + size_t(n) > s_.size()) {
      cp = c;
      ++pos_;
      return true;
    }
    cp = c & (0x7F >> n);
    for (int i = 1; i < n; ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + size_t(i)]) & 0x3F);
    pos_ += size_t(n);
    return true;
  }

  bool parse_literal(Sequence& item) {
    ++pos_;  // opening quote
    std::vector<uint8_t> bytes;
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') {
        fail("unterminated string literal");
        return false;
      }
      if (s_[pos_] == '"') {
        ++pos_;
        break;
      }
      uint32_t cp = 0;
      if (!read_char(cp)) return false;
      append_utf8(cp, bytes);
    }
    for (uint8_t b : bytes) item.push_back(b_.byte(b));
    return true;
  }

  bool parse_class(Sequence& item) {
    const size_t start = pos_;
    ++pos_;
    bool negated = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (pos_ >= s_.size()) {
        fail("unterminated character class");
        return false;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        break;
      }
      uint32_t lo = 0, hi = 0;
      if (!read_char(lo)) return false;
      hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        if (!read_char(hi)) return false;
      }
      ranges.push_back({lo, hi});
    }
    ranges = normalize_ranges(std::move(ranges));
    if (negated) ranges = complement_ranges(ranges);
    if (ranges.empty()) {
      fail("empty character class");
      return false;
    }
    item.push_back(class_element(ranges, std::string(s_.substr(start, pos_ - start))));
    return true;
  }

  // A class over code points: one byte-set terminal when it is ASCII-only, else a rule whose
  // alternatives are its UTF-8 byte sequences (shared between identical classes).
  Element class_element(const std::vector<CodepointRange>& ranges, const std::string& key) {
    if (!ranges.empty() && ranges.back().second < 0x80) {
      ByteSet set;
      for (auto [lo, hi] : ranges) set.add_range(uint8_t(lo), uint8_t(hi));
      return b_.bytes(set);
    }
    auto it = class_rules_.find(key);
    if (it != class_rules_.end()) return b_.ref(it->second);
    std::vector<Sequence> alts;
    // Merge sequences that differ only in their first byte range (common for ASCII pieces).
    ByteSet ascii;
    for (const auto& seq : utf8_sequences(ranges)) {
      if (seq.size() == 1) {
        ascii.add_range(seq[0].lo, seq[0].hi);
        continue;
      }
      Sequence s;
      for (const ByteRange& r : seq) {
        ByteSet set;
        set.add_range(r.lo, r.hi);
        s.push_back(b_.bytes(set));
      }
      alts.push_back(std::move(s));
    }
    if (!ascii.empty()) alts.insert(alts.begin(), Sequence{b_.bytes(ascii)});
    const uint32_t r = b_.fresh_rule("class");
    // A fresh rule is never defined twice; the grammar's size limits are checked by finish().
    (void)b_.define(r, std::move(alts));
    class_rules_.emplace(key, r);
    return b_.ref(r);
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t group_depth_ = 0;  // parenthesized groups open at pos_
  GrammarBuilder b_;
  Error error_;
  std::map<std::string, uint32_t> class_rules_;
};

}  // namespace

Result<Grammar> compile_gbnf(std::string_view text) {
  return Parser(text).run();
}

}  // namespace vela::constraint

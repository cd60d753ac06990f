#include "constraint/regex_ast.h"

#include <cctype>
#include <cstdio>

#include "constraint/gbnf.h"
#include "constraint/regex_to_gbnf.h"
#include "constraint/utf8_ranges.h"

namespace vela::constraint {

namespace {

constexpr size_t kMaxRegexDepth = 200;

std::vector<CodepointRange> digit_ranges() {
  return {{'0', '9'}};
}
std::vector<CodepointRange> word_ranges() {
  return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
}
std::vector<CodepointRange> space_ranges() {
  return {{'\t', '\r'}, {' ', ' '}};
}

class RegexParser {
 public:
  RegexParser(std::string_view s, bool json) : s_(s), json_(json) {}

  Result<RegexNode> run() {
    if (!s_.empty() && s_[0] == '^') ++pos_;
    RegexNode out;
    if (!alternation(out, 0)) return error_;
    if (pos_ < s_.size()) return fail("unbalanced ')'");
    return out;
  }

 private:
  Error fail(const std::string& what) {
    error_ = make_error("invalid regex at offset " + std::to_string(pos_) + ": " + what);
    return error_;
  }
  bool at_end() const { return pos_ >= s_.size(); }

  bool alternation(RegexNode& out, size_t depth) {
    if (depth > kMaxRegexDepth) {
      fail("nested too deeply");
      return false;
    }
    std::vector<RegexNode> alts;
    while (true) {
      RegexNode seq;
      if (!sequence(seq, depth)) return false;
      alts.push_back(std::move(seq));
      if (!at_end() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (alts.size() == 1) {
      out = std::move(alts[0]);
    } else {
      out.kind = RegexNode::kAlternation;
      out.children = std::move(alts);
    }
    return true;
  }

  bool sequence(RegexNode& out, size_t depth) {
    out.kind = RegexNode::kConcat;
    while (!at_end() && s_[pos_] != '|' && s_[pos_] != ')') {
      RegexNode atom;
      atom.kind = RegexNode::kAtom;
      const char c = s_[pos_];
      if (c == '$') {
        ++pos_;
        if (!at_end() && s_[pos_] != ')' && s_[pos_] != '|') {
          fail("'$' is only supported at the end");
          return false;
        }
        continue;
      }
      if (c == '^') {
        fail("'^' is only supported at the start");
        return false;
      }
      if (c == '(') {
        ++pos_;
        if (!at_end() && s_[pos_] == '?') {
          ++pos_;
          if (!at_end() && s_[pos_] == ':') {
            ++pos_;
          } else if (!at_end() && (s_[pos_] == '<' || s_[pos_] == 'P')) {
            if (s_[pos_] == 'P') ++pos_;
            if (!at_end() && (s_[pos_] == '=' || s_[pos_] == '!')) {
              fail("lookbehind is not supported");
              return false;
            }
            while (!at_end() && s_[pos_] != '>') ++pos_;
            if (at_end()) {
              fail("unterminated group name");
              return false;
            }
            ++pos_;
          } else {
            fail("lookahead and inline flags are not supported");
            return false;
          }
        }
        if (!alternation(atom, depth + 1)) return false;
        if (at_end() || s_[pos_] != ')') {
          fail("missing ')'");
          return false;
        }
        ++pos_;
      } else if (c == '[') {
        std::vector<CodepointRange> ranges;
        if (!char_class(ranges)) return false;
        if (!class_text(ranges, atom.atom)) return false;
      } else if (c == '.') {
        ++pos_;
        if (!class_text(complement_ranges({{'\n', '\n'}}), atom.atom)) return false;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        fail("quantifier without an operand");
        return false;
      } else if (c == '\\') {
        std::vector<CodepointRange> ranges;
        uint32_t cp = 0;
        bool is_class = false;
        if (!escape(cp, ranges, is_class, false)) return false;
        if (is_class) {
          if (!class_text(ranges, atom.atom)) return false;
        } else {
          atom.atom = literal(cp);
        }
      } else {
        atom.atom = literal(read_utf8());
      }
      if (!quantifier(atom)) return false;
      out.children.push_back(std::move(atom));
    }
    return true;
  }

  // A repetition count, at most kMaxRepetition.
  bool count(std::string_view digits, uint32_t& value) {
    value = 0;
    for (char d : digits) {
      if (!std::isdigit(static_cast<unsigned char>(d))) return false;
      value = value * 10 + uint32_t(d - '0');
      if (value > kMaxRepetition) {
        fail("repetition count over " + std::to_string(kMaxRepetition));
        return false;
      }
    }
    return !digits.empty();
  }

  bool quantifier(RegexNode& atom) {
    if (at_end()) return true;
    const char c = s_[pos_];
    RegexNode repeat;
    repeat.kind = RegexNode::kRepeat;
    if (c == '*' || c == '+' || c == '?') {
      repeat.min = c == '+' ? 1 : 0;
      repeat.max = 1;
      repeat.unbounded = c != '?';
      ++pos_;
    } else if (c == '{') {
      const size_t close = s_.find('}', pos_);
      if (close == std::string_view::npos) {
        fail("unterminated '{'");
        return false;
      }
      const std::string_view body = s_.substr(pos_ + 1, close - pos_ - 1);
      const size_t comma = body.find(',');
      const std::string_view hi = comma == std::string_view::npos ? "" : body.substr(comma + 1);
      bool ok = count(body.substr(0, comma), repeat.min);
      if (comma == std::string_view::npos) {
        repeat.max = repeat.min;
      } else if (hi.empty()) {
        repeat.unbounded = true;
      } else {
        ok = ok && count(hi, repeat.max);
      }
      if (!ok) {
        if (error_.message.empty()) fail("bad repetition '{" + std::string(body) + "}'");
        return false;
      }
      if (!repeat.unbounded && repeat.max < repeat.min) {
        fail("repetition {m,n} with n < m");
        return false;
      }
      pos_ = close + 1;
    } else {
      return true;
    }
    if (!at_end() && (s_[pos_] == '?' || s_[pos_] == '+')) ++pos_;  // lazy / possessive
    if (!at_end() && (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?' || s_[pos_] == '{')) {
      fail("nested quantifier");
      return false;
    }
    repeat.children.push_back(std::move(atom));
    atom = std::move(repeat);
    return true;
  }

  uint32_t read_utf8() { return next_code_point(s_, pos_); }

  bool hex(size_t digits, uint32_t& cp) {
    cp = 0;
    for (size_t i = 0; i < digits; ++i) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) {
        fail("bad hex escape");
        return false;
      }
      const char h = char(std::tolower(static_cast<unsigned char>(s_[pos_++])));
      cp = cp * 16 + uint32_t(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    return true;
  }

  // After a backslash: a character, or a class (\d \w \s and negations).
  bool escape(uint32_t& cp, std::vector<CodepointRange>& ranges, bool& is_class, bool in_class) {
    ++pos_;
    if (at_end()) {
      fail("trailing backslash");
      return false;
    }
    const char e = s_[pos_++];
    is_class = true;
    switch (e) {
      case 'd':
        ranges = digit_ranges();
        return true;
      case 'w':
        ranges = word_ranges();
        return true;
      case 's':
        ranges = space_ranges();
        return true;
      case 'D':
        ranges = complement_ranges(normalize_ranges(digit_ranges()));
        return true;
      case 'W':
        ranges = complement_ranges(normalize_ranges(word_ranges()));
        return true;
      case 'S':
        ranges = complement_ranges(normalize_ranges(space_ranges()));
        return true;
      default:
        break;
    }
    is_class = false;
    switch (e) {
      case 'n':
        cp = '\n';
        return true;
      case 't':
        cp = '\t';
        return true;
      case 'r':
        cp = '\r';
        return true;
      case 'f':
        cp = '\f';
        return true;
      case 'v':
        cp = '\v';
        return true;
      case '0':
        cp = 0;
        return true;
      case 'x':
        return hex(2, cp);
      case 'u':
        return hex(4, cp);
      case 'b':
        if (in_class) {
          cp = '\b';
          return true;
        }
        fail("word boundaries (\\b) are not supported");
        return false;
      case 'B':
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        fail(std::string("the assertion \\") + e + " is not supported");
        return false;
      default:
        if (std::isdigit(static_cast<unsigned char>(e))) {
          fail("backreferences are not supported");
          return false;
        }
        if (std::isalpha(static_cast<unsigned char>(e))) {
          fail(std::string("unknown escape \\") + e);
          return false;
        }
        cp = static_cast<unsigned char>(e);
        return true;
    }
  }

  bool char_class(std::vector<CodepointRange>& out) {
    ++pos_;  // [
    bool negated = false;
    if (!at_end() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    bool first = true;
    while (true) {
      if (at_end()) {
        fail("unterminated character class");
        return false;
      }
      if (s_[pos_] == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      uint32_t lo = 0;
      if (s_[pos_] == '\\') {
        std::vector<CodepointRange> sub;
        bool is_class = false;
        if (!escape(lo, sub, is_class, true)) return false;
        if (is_class) {
          out.insert(out.end(), sub.begin(), sub.end());
          continue;
        }
      } else {
        lo = read_utf8();
      }
      uint32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        if (s_[pos_] == '\\') {
          std::vector<CodepointRange> sub;
          bool is_class = false;
          if (!escape(hi, sub, is_class, true)) return false;
          if (is_class) {
            fail("a class escape cannot end a range");
            return false;
          }
        } else {
          hi = read_utf8();
        }
        if (hi < lo) {
          fail("range out of order");
          return false;
        }
      }
      out.push_back({lo, hi});
    }
    out = normalize_ranges(std::move(out));
    if (negated) out = complement_ranges(out);
    return true;
  }

  // In JSON-string mode, characters that JSON must escape are left out of classes.
  bool class_text(std::vector<CodepointRange> ranges, std::string& out) {
    ranges = normalize_ranges(std::move(ranges));
    if (json_) {
      std::vector<CodepointRange> excluded =
          complement_ranges(normalize_ranges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
      std::vector<CodepointRange> kept;
      for (auto [lo, hi] : ranges)
        for (auto [elo, ehi] : excluded) {
          const uint32_t a = std::max(lo, elo), b = std::min(hi, ehi);
          if (a <= b) kept.push_back({a, b});
        }
      ranges = normalize_ranges(std::move(kept));
    }
    if (ranges.empty()) {
      fail("character class matches nothing");
      return false;
    }
    out = "[";
    for (auto [lo, hi] : ranges) {
      out += gbnf_char_escape(lo);
      if (hi != lo) out += "-" + gbnf_char_escape(hi);
    }
    out += "]";
    return true;
  }

  std::string literal(uint32_t cp) {
    if (json_) {
      switch (cp) {
        case '"':
          return gbnf_literal("\\\"");
        case '\\':
          return gbnf_literal("\\\\");
        case '\n':
          return gbnf_literal("\\n");
        case '\t':
          return gbnf_literal("\\t");
        case '\r':
          return gbnf_literal("\\r");
        default:
          if (cp < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04X", cp);
            return gbnf_literal(buf);
          }
      }
    }
    std::vector<uint8_t> bytes;
    append_utf8(std::min<uint32_t>(cp, 0x10FFFF), bytes);
    return gbnf_literal(std::string(bytes.begin(), bytes.end()));
  }

  std::string_view s_;
  bool json_;
  size_t pos_ = 0;
  Error error_;
};

}  // namespace

Result<RegexNode> parse_regex(std::string_view pattern, bool json_string_content) {
  return RegexParser(pattern, json_string_content).run();
}

}  // namespace vela::constraint

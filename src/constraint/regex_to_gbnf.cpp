#include "constraint/regex_to_gbnf.h"

#include <cstdio>
#include <vector>

#include "constraint/utf8_ranges.h"

namespace vela::constraint {

namespace {

constexpr size_t kMaxRegexDepth = 200;

std::string hex_escape(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

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

  Result<std::string> run() {
    if (!s_.empty() && s_[0] == '^') ++pos_;
    std::string out;
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

  bool alternation(std::string& out, size_t depth) {
    if (depth > kMaxRegexDepth) {
      fail("nested too deeply");
      return false;
    }
    std::vector<std::string> alts;
    while (true) {
      std::string seq;
      if (!sequence(seq, depth)) return false;
      alts.push_back(seq.empty() ? "\"\"" : seq);
      if (!at_end() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (alts.size() == 1) {
      out = alts[0];
    } else {
      out = "(";
      for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
      out += ")";
    }
    return true;
  }

  bool sequence(std::string& out, size_t depth) {
    while (!at_end() && s_[pos_] != '|' && s_[pos_] != ')') {
      std::string atom;
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
        atom = "(" + atom + ")";
      } else if (c == '[') {
        std::vector<CodepointRange> ranges;
        if (!char_class(ranges)) return false;
        if (!class_text(ranges, atom)) return false;
      } else if (c == '.') {
        ++pos_;
        if (!class_text(complement_ranges({{'\n', '\n'}}), atom)) return false;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        fail("quantifier without an operand");
        return false;
      } else if (c == '\\') {
        std::vector<CodepointRange> ranges;
        uint32_t cp = 0;
        bool is_class = false;
        if (!escape(cp, ranges, is_class, false)) return false;
        if (is_class) {
          if (!class_text(ranges, atom)) return false;
        } else {
          atom = literal(cp);
        }
      } else {
        atom = literal(read_utf8());
      }
      if (!quantifier(atom)) return false;
      if (!out.empty()) out += ' ';
      out += atom;
    }
    return true;
  }

  bool quantifier(std::string& atom) {
    if (at_end()) return true;
    const char c = s_[pos_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t close = s_.find('}', pos_);
      if (close == std::string_view::npos) {
        fail("unterminated '{'");
        return false;
      }
      const std::string_view body = s_.substr(pos_ + 1, close - pos_ - 1);
      bool ok = !body.empty();
      for (char b : body) ok = ok && (std::isdigit(static_cast<unsigned char>(b)) || b == ',');
      if (!ok || body[0] == ',') {
        fail("bad repetition '{" + std::string(body) + "}'");
        return false;
      }
      q = "{" + std::string(body) + "}";
      pos_ = close + 1;
    } else {
      return true;
    }
    if (!at_end() && (s_[pos_] == '?' || s_[pos_] == '+')) ++pos_;  // lazy / possessive
    if (!at_end() && (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?' || s_[pos_] == '{')) {
      fail("nested quantifier");
      return false;
    }
    atom = "(" + atom + ")" + q;
    return true;
  }

  uint32_t read_utf8() {
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (n == 1 || pos_ + size_t(n) > s_.size()) {
      ++pos_;
      return c;
    }
    uint32_t cp = c & (0x7F >> n);
    for (int i = 1; i < n; ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + size_t(i)]) & 0x3F);
    pos_ += size_t(n);
    return cp;
  }

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
      out += hex_escape(lo);
      if (hi != lo) out += "-" + hex_escape(hi);
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

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {  // printable ASCII, and UTF-8 sequences as they are
      out += ch;
    }
  }
  return out + "\"";
}

Result<std::string> regex_to_gbnf(std::string_view pattern, bool json_string_content) {
  return RegexParser(pattern, json_string_content).run();
}

}  // namespace vela::constraint

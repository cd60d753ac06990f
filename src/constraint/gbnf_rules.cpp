#include "constraint/gbnf_rules.h"

#include <cctype>

namespace vela::constraint {

namespace {

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

}  // namespace

std::string prefix_gbnf_rules(std::string_view gbnf, const std::string& prefix) {
  std::string out;
  out.reserve(gbnf.size() * 2);
  size_t i = 0;
  while (i < gbnf.size()) {
    const char c = gbnf[i];
    if (c == '"' || c == '[') {  // a literal or a class: copied as is
      const char close = c == '"' ? '"' : ']';
      out += c;
      ++i;
      while (i < gbnf.size() && gbnf[i] != close) {
        if (gbnf[i] == '\\' && i + 1 < gbnf.size()) out += gbnf[i++];
        out += gbnf[i++];
      }
      if (i < gbnf.size()) out += gbnf[i++];
    } else if (c == '{') {  // a repetition count
      while (i < gbnf.size() && gbnf[i] != '}') out += gbnf[i++];
    } else if (c == '#') {  // a comment
      while (i < gbnf.size() && gbnf[i] != '\n') out += gbnf[i++];
    } else if (name_char(c)) {
      out += prefix;
      while (i < gbnf.size() && name_char(gbnf[i])) out += gbnf[i++];
    } else {
      out += gbnf[i++];
    }
  }
  return out;
}

}  // namespace vela::constraint

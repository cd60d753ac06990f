#include "constraint/regex_to_gbnf.h"

#include <cstdio>

#include "constraint/regex_ast.h"

namespace vela::constraint {

namespace {

std::string print(const RegexNode& node) {
  switch (node.kind) {
    case RegexNode::kAtom:
      return node.atom;
    case RegexNode::kConcat: {
      if (node.children.empty()) return "\"\"";
      std::string out;
      for (const RegexNode& c : node.children) out += (out.empty() ? "" : " ") + print(c);
      return out;  // binds tighter than '|', and repetitions wrap their operand
    }
    case RegexNode::kAlternation: {
      std::string out;
      for (const RegexNode& c : node.children) out += (out.empty() ? "" : " | ") + print(c);
      return "(" + out + ")";
    }
    case RegexNode::kRepeat: {
      std::string q;
      if (node.unbounded) {
        q = node.min == 0 ? "*" : node.min == 1 ? "+" : "{" + std::to_string(node.min) + ",}";
      } else if (node.min == 0 && node.max == 1) {
        q = "?";
      } else {
        q = "{" + std::to_string(node.min) +
            (node.max == node.min ? "" : "," + std::to_string(node.max)) + "}";
      }
      return "(" + print(node.children[0]) + ")" + q;
    }
  }
  return "\"\"";
}

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

std::string gbnf_char_escape(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

Result<std::string> regex_to_gbnf(std::string_view pattern, bool json_string_content) {
  auto tree = parse_regex(pattern, json_string_content);
  if (!tree) return tree.error();
  return print(*tree);
}

}  // namespace vela::constraint

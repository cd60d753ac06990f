#include "constraint/json_key_complement.h"

#include <map>

#include "constraint/regex_to_gbnf.h"
#include "constraint/utf8_ranges.h"

namespace vela::constraint {

namespace {

// A JSON string character written as itself.
constexpr const char* kPlainClass = "\"\\\\\\x00-\\x1F";  // inside [^...]

bool plain(uint32_t cp) {
  return cp >= 0x20 && cp != '"' && cp != '\\';
}

}  // namespace

GbnfRules json_key_other_than(const std::vector<std::string>& names,
                              const std::string& rule_prefix) {
  struct Node {
    bool name = false;                    // a name ends here
    std::map<uint32_t, size_t> children;  // next code point -> node
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    std::vector<uint32_t> cps;
    for (size_t pos = 0; pos < name.size();) cps.push_back(next_code_point(name, pos));
    bool reachable = true;
    for (uint32_t cp : cps) reachable = reachable && plain(cp);
    if (!reachable) continue;
    size_t at = 0;
    for (uint32_t cp : cps) {
      auto it = trie[at].children.find(cp);
      if (it == trie[at].children.end()) {
        it = trie[at].children.emplace(cp, trie.size()).first;
        trie.emplace_back();
      }
      at = it->second;
    }
    trie[at].name = true;
  }
  GbnfRules out;
  const std::string any = rule_prefix + "-any";
  out.rules.push_back({any, std::string("[^") + kPlainClass + "]*"});
  for (size_t i = 0; i < trie.size(); ++i) {
    std::string others = std::string("[^") + kPlainClass;
    std::string body;
    for (const auto& [cp, child] : trie[i].children) {
      others += gbnf_char_escape(cp);
      std::vector<uint8_t> bytes;
      append_utf8(cp, bytes);
      body += gbnf_literal(std::string(bytes.begin(), bytes.end())) + " " + rule_prefix + "-n" +
              std::to_string(child) + " | ";
    }
    body += others + "] " + any;
    if (!trie[i].name) body += " | \"\"";
    out.rules.push_back({rule_prefix + "-n" + std::to_string(i), body});
  }
  out.expression = "\"\\\"\" " + rule_prefix + "-n0 \"\\\"\"";
  return out;
}

}  // namespace vela::constraint

#pragma once
// A context-free grammar over bytes, flattened for the matcher: every alternative of every rule
// is a run of elements in one array, ended by a kEnd element. Terminals are byte sets, so UTF-8
// characters are sequences of byte-set elements and a token's bytes can be matched one by one.
// Built by GrammarBuilder (the GBNF parser lowers everything to it); validated on finish():
// undefined rules, rules that derive no finite string, and left recursion are errors.
// Thread-safety: immutable after finish(); concurrent reads are safe.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/result.h"

namespace vela::constraint {

// 256 bits: which byte values a terminal accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(uint8_t(b));
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (size_t i = 0; i < 4; ++i) bits[i] |= o.bits[i];
    return *this;
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = kEnd;
  uint32_t value = 0;  // kBytes: index into Grammar::byte_sets; kRule: rule id; kEnd: unused
};

struct Grammar {
  std::vector<Element> elements;                    // [n_elements] all alternatives, flattened
  std::vector<std::vector<uint32_t>> alternatives;  // [n_rules][n_alts] start index in elements
  std::vector<ByteSet> byte_sets;                   // [n_sets] terminal byte sets
  std::vector<std::string> rule_names;              // [n_rules]
  uint32_t root = 0;

  const Element& at(uint32_t position) const { return elements[position]; }
  const ByteSet& bytes_at(uint32_t position) const { return byte_sets[elements[position].value]; }
};

// Limits that keep a hostile grammar (or schema, or regex) from exhausting memory.
inline constexpr size_t kMaxGrammarElements = 2'000'000;
inline constexpr size_t kMaxGrammarRules = 200'000;

// Assembles rules by name; references may precede definitions.
// Thread-safety: none; one builder per compilation.
class GrammarBuilder {
 public:
  // The id of rule `name`, creating an undefined placeholder on first use.
  uint32_t rule(const std::string& name);
  // A fresh rule named after `base` ("base-3").
  uint32_t fresh_rule(const std::string& base);
  bool defined(uint32_t rule) const { return defined_[rule]; }
  // Defines `rule` with these alternatives (each a sequence of elements, kEnd not included).
  // A rule can be defined once; the second definition is an error.
  Status define(uint32_t rule, std::vector<std::vector<Element>> alternatives);
  Element bytes(const ByteSet& set);
  Element byte(uint8_t b);
  Element ref(uint32_t rule) const { return Element{Element::kRule, rule}; }
  size_t n_elements() const { return n_elements_; }

  // Validates and flattens; `root_name` is the start rule.
  Result<Grammar> finish(const std::string& root_name);

 private:
  uint32_t add(std::string name);

  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_index_;  // the latest rule of each name
  std::vector<std::vector<std::vector<Element>>> rules_;
  std::vector<bool> defined_;
  std::vector<ByteSet> sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> set_index_;  // sets_ by content
  size_t n_elements_ = 0;
};

}  // namespace vela::constraint

#pragma once
// Helpers for the constraint tests: compile a spec against a small byte-level vocabulary and
// ask whether whole strings match.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "constraint/compiled_grammar.h"
#include "constraint/constraint.h"
#include "constraint/gbnf.h"

namespace vela::constraint::test {

// Every single byte, plus some multi-byte pieces typical of JSON; id 0 ends generation.
inline std::shared_ptr<const TokenVocabulary> small_vocab() {
  std::vector<std::string> pieces(1);  // 0: end of generation
  for (int b = 1; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
  for (const char* p : {"{\"", "\":", "\",",  "\"}", "\": \"", "true", "false", "null",
                        " \"", "\\n", "\\\"", "é",   "日本",   "12",   "3.",    ", \"",
                        "}]",  "]}",  "[{",   "ab",  "abc",    "\"a",  "name",  "\"name\": "})
    pieces.push_back(p);
  return std::make_shared<const TokenVocabulary>(std::move(pieces), std::vector<int32_t>{0});
}

inline Result<std::shared_ptr<const CompiledGrammar>> compile_spec(
    const StructuredOutputs& spec, std::shared_ptr<const TokenVocabulary> vocab = small_vocab()) {
  ConstraintCompiler compiler([vocab] { return vocab; });
  return compiler.compile(spec);
}

inline bool full_match(const CompiledGrammar& g, const std::string& text) {
  StackSet state = g.initial();
  return advance_bytes(g.grammar(), state, text) && is_accepting(state);
}

inline StructuredOutputs json_spec(const std::string& schema) {
  StructuredOutputs s;
  s.json = schema;
  return s;
}

}  // namespace vela::constraint::test

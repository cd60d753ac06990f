// libFuzzer target: a hostile constraint (JSON Schema, regex, GBNF grammar or choice list, picked
// by the first input byte) through the compiler, then a short walk of the matcher that always
// takes an allowed token, checking that each allowed token is accepted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "constraint/constraint.h"

namespace {

// A small vocabulary with the pieces JSON and grammars need: single bytes of printable ASCII,
// a few multi-byte pieces, a multi-byte UTF-8 character, and an end-of-generation token.
std::shared_ptr<const vela::constraint::TokenVocabulary> fuzz_vocabulary() {
  std::vector<std::string> pieces = {""};  // id 0: end of generation
  for (int c = 0x20; c < 0x7f; ++c) pieces.emplace_back(1, char(c));
  for (const char* piece : {"\n", "\t", "true", "false", "null", "\": ", "\", \"", "{\"", "\"}",
                            "12", "0.5", "\xc3\xa9", "\xe2\x82\xac", "\\u00"})
    pieces.emplace_back(piece);
  return std::make_shared<const vela::constraint::TokenVocabulary>(std::move(pieces),
                                                                   std::vector<int32_t>{0});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static vela::constraint::ConstraintCompiler compiler([] { return fuzz_vocabulary(); },
                                                       /*max_cached=*/1);
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  vela::StructuredOutputs spec;
  switch (data[0] % 5) {
    case 0:
      spec.json = text;
      break;
    case 1:
      spec.regex = text;
      break;
    case 2:
      spec.grammar = text;
      break;
    case 3:
      for (size_t begin = 0; begin <= text.size();) {
        const size_t end = std::min(text.find('\n', begin), text.size());
        spec.choice.push_back(text.substr(begin, end - begin));
        begin = end + 1;
      }
      break;
    default:
      spec.json = text;
      spec.compact_whitespace = false;
      break;
  }
  auto grammar = compiler.compile(spec);
  if (!grammar.ok()) return 0;
  vela::constraint::SequenceConstraint sequence(grammar.value());
  for (int step = 0; step < 32 && !sequence.finished(); ++step) {
    const std::span<const uint64_t> mask = sequence.mask();
    int32_t pick = -1;
    // A deterministic choice among the allowed tokens, steered by the input's bytes.
    const size_t n_tokens = mask.size() * 64;
    const size_t start = size > 1 ? size_t(data[1 + size_t(step) % (size - 1)]) : 0;
    for (size_t k = 0; k < n_tokens && pick < 0; ++k) {
      const size_t t = (start + k) % n_tokens;
      if ((mask[t / 64] >> (t % 64)) & 1) pick = int32_t(t);
    }
    if (pick < 0 || pick == 0) break;          // nothing allowed, or end of generation
    if (!sequence.accept(pick)) std::abort();  // the mask allowed a token the matcher refuses
  }
  return 0;
}

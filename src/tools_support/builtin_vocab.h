#pragma once
// A small self-contained tokenizer for synthesized models when no real vocabulary is at hand
// (a fresh machine without test data): SentencePiece-style, <unk> <s> </s>, the printable ASCII
// characters as pieces ("▁" for space), and the 256 byte-fallback tokens, so every UTF-8 text
// encodes and decodes exactly. It carries a ChatML chat template so chat requests work too.
#include <string>

#include "util/result.h"

namespace vela {

// Writes a vocabulary-only GGUF file usable as `vela synth --vocab-from`.
Status write_builtin_vocab(const std::string& path);

}  // namespace vela

#pragma once
// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): the text (spaces already replaced by
// "▁") is split into UTF-8 characters, and the adjacent pair whose concatenation is the
// highest-scoring vocabulary token is merged (ties go to the leftmost pair) until no pair forms
// a token. Pieces that are not tokens fall back to <0xNN> byte tokens, or to the unknown token
// when the vocabulary has no byte tokens.
// Thread-safety: stateless; the scratch is per call.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace vela {

// Per-call working memory, reused across the fragments of one encode().
struct SpmScratch {
  struct Symbol {
    uint32_t begin = 0, length = 0;  // bytes of the text; length 0 = merged away
    int32_t prev = -1, next = -1;
  };
  struct Pair {
    float score;
    int32_t left, right;
    uint32_t length;  // bytes of the merged piece when queued; a different sum = stale pair
  };
  std::vector<Symbol> symbols;
  std::vector<Pair> heap;
};

// Appends the token ids of `escaped_text` to `out`.
void spm_encode(std::string_view escaped_text, const Vocab& vocab, std::vector<int32_t>& out,
                SpmScratch& scratch);

}  // namespace vela

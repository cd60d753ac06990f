#pragma once
// Byte-level BPE (tokenizer.ggml.model = "gpt2"): a pre-tokenized word is mapped to the GPT-2
// byte alphabet, split into characters, and adjacent pairs are merged lowest rank first (rank =
// position in tokenizer.ggml.merges; ties go to the leftmost pair) until no listed pair remains.
// Bytes the vocabulary has no token for are dropped (as in the reference and HF tokenizers).
// Thread-safety: immutable after from_gguf(); encode_word() is const (scratch is per call).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"
#include "util/result.h"

namespace vela {

class GgufFile;

// Per-call working memory, reused across the words of one encode() to avoid reallocations.
struct BpeScratch {
  struct Symbol {
    uint32_t begin = 0, length = 0;  // bytes of the encoded word; length 0 = merged away
    int32_t prev = -1, next = -1;
  };
  struct Pair {
    int32_t rank;
    int32_t left, right;
    uint32_t left_length, right_length;  // lengths when queued; a changed length = stale pair
  };
  std::string encoded;   // the word in the byte-level alphabet
  std::string pair_key;  // "left right", the merges key being looked up
  std::vector<Symbol> symbols;
  std::vector<Pair> heap;
};

class BpeModel {
 public:
  // Reads tokenizer.ggml.merges ("left right" strings). Missing or malformed merges are errors.
  static Result<BpeModel> from_gguf(const GgufFile& gguf);

  // Appends the token ids of one pre-tokenized word (raw bytes) to `out`.
  // ignore_merges: a word that is itself a vocabulary token is emitted whole (llama3-style).
  void encode_word(std::string_view word, const Vocab& vocab, bool ignore_merges,
                   std::vector<int32_t>& out, BpeScratch& scratch) const;

  size_t n_merges() const { return ranks_.size(); }

 private:
  void queue_pair(int32_t left, int32_t right, BpeScratch& scratch) const;

  TextToIdMap ranks_;  // "left right" -> rank (the lowest rank wins for duplicates)
};

}  // namespace vela

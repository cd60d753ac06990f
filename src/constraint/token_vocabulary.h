#pragma once
// The vocabulary as the constraint engine sees it: each token's bytes (what the detokenizer
// emits for it), the tokens sorted by those bytes with each one's common-prefix length with its
// predecessor (a flattened trie: a walk shares the work of common prefixes and skips every
// token under a rejected prefix), and the end-of-generation ids that are allowed once a grammar
// is complete. Tokens with no bytes (control tokens) are never allowed by a grammar.
// Thread-safety: immutable after construction; concurrent reads are safe.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vela {
class Tokenizer;
}

namespace vela::constraint {

class TokenVocabulary {
 public:
  // pieces: [n_vocab] bytes of each token; end_of_generation: ids that end a sequence.
  TokenVocabulary(std::vector<std::string> pieces, std::vector<int32_t> end_of_generation);
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tokenizer);

  int32_t n_vocab() const { return int32_t(pieces_.size()); }
  size_t mask_words() const { return (pieces_.size() + 63) / 64; }
  std::string_view piece(int32_t id) const { return pieces_[size_t(id)]; }
  const std::vector<int32_t>& sorted_ids() const { return sorted_; }   // non-empty tokens
  const std::vector<uint16_t>& common_prefix() const { return lcp_; }  // [sorted.size()]
  const std::vector<int32_t>& end_of_generation() const { return eog_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> lcp_;
  std::vector<int32_t> eog_;
};

}  // namespace vela::constraint

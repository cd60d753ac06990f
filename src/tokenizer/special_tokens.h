#pragma once
// Splits input text around literal occurrences of special tokens, before normal tokenization.
// Each special token, longest text first, claims all its occurrences in the text that is still
// unclaimed. User-defined tokens are always matched (as HF tokenizers do for added tokens);
// control and unknown tokens only when parse_special is true. Tokens marked left/right-strip
// swallow the whitespace before/after them.
// Thread-safety: stateless.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace vela {

struct TextFragment {
  int32_t token = kNoToken;  // the special token, or kNoToken for a run of ordinary text
  size_t offset = 0;         // ordinary text: byte range [offset, offset + length) of the input
  size_t length = 0;
};

// Replaces `out` with the fragments of `text`, in order. Ordinary fragments are never empty.
// `scratch` is working memory reused between calls.
void split_special_tokens(std::string_view text, const Vocab& vocab, bool parse_special,
                          std::vector<TextFragment>& out, std::vector<TextFragment>& scratch);

}  // namespace vela

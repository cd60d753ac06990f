#include "tokenizer/special_tokens.h"

namespace vela {
namespace {

// The C locale's isspace, which is what the strip attributes refer to.
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Splits one ordinary fragment around every occurrence of `token_text`.
void split_fragment(std::string_view text, const TextFragment& fragment, int32_t token,
                    std::string_view token_text, uint16_t attr, std::vector<TextFragment>& out) {
  size_t begin = fragment.offset;
  size_t end = fragment.offset + fragment.length;
  while (begin < end) {
    const size_t match = text.substr(0, end).find(token_text, begin);
    if (match == std::string_view::npos) break;
    size_t left_end = match;
    if (attr & kAttrLeftStrip)
      while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
    if (left_end > begin) out.push_back({kNoToken, begin, left_end - begin});
    out.push_back({token, 0, 0});
    begin = match + token_text.size();
    if (attr & kAttrRightStrip)
      while (begin < end && is_ascii_space(text[begin])) ++begin;
  }
  if (begin < end) out.push_back({kNoToken, begin, end - begin});
}

}  // namespace

void split_special_tokens(std::string_view text, const Vocab& vocab, bool parse_special,
                          std::vector<TextFragment>& out, std::vector<TextFragment>& scratch) {
  out.clear();
  if (text.empty()) return;
  out.push_back({kNoToken, 0, text.size()});
  for (int32_t id : vocab.special_tokens_longest_first) {
    const TokenEntry& token = vocab.tokens[size_t(id)];
    if (!parse_special && (token.attr & (kAttrControl | kAttrUnknown))) continue;
    if (text.find(token.text) == std::string_view::npos) continue;  // cheap common case
    scratch.clear();
    for (const TextFragment& fragment : out) {
      if (fragment.token != kNoToken) {
        scratch.push_back(fragment);
      } else {
        split_fragment(text, fragment, id, token.text, token.attr, scratch);
      }
    }
    out.swap(scratch);
  }
}

}  // namespace vela

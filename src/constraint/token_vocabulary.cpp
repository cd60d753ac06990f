#include "constraint/token_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace vela::constraint {

TokenVocabulary::TokenVocabulary(std::vector<std::string> pieces,
                                 std::vector<int32_t> end_of_generation)
    : pieces_(std::move(pieces)), eog_(std::move(end_of_generation)) {
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (!pieces_[i].empty()) sorted_.push_back(int32_t(i));
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return pieces_[size_t(a)] < pieces_[size_t(b)] ||
           (pieces_[size_t(a)] == pieces_[size_t(b)] && a < b);
  });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = pieces_[size_t(sorted_[i - 1])];
    const std::string& b = pieces_[size_t(sorted_[i])];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n] && n < 0xFFFF) ++n;
    lcp_[i] = uint16_t(n);
  }
  std::erase_if(eog_, [&](int32_t id) { return id < 0 || id >= n_vocab(); });
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_eog(id)) {
      eog.push_back(id);
      continue;  // its piece never appears in the text
    }
    pieces[size_t(id)] = std::string(tokenizer.piece_view(id));
  }
  return std::make_shared<const TokenVocabulary>(std::move(pieces), std::move(eog));
}

}  // namespace vela::constraint

#include "spec/ngram_proposer.h"

#include <algorithm>

namespace vela {

int32_t propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                      std::span<int32_t> out) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (out.empty()) return 0;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const int32_t* suffix = tokens.data() + (len - n);
    // An occurrence starting at i is followed by tokens[i + n]; i + n < len leaves one at least.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      const int64_t n_out = std::min<int64_t>(int64_t(out.size()), len - (i + n));
      std::copy_n(tokens.data() + i + n, n_out, out.data());
      return static_cast<int32_t>(n_out);
    }
  }
  return 0;
}

}  // namespace vela

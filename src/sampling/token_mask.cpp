#include "sampling/token_mask.h"

#include <algorithm>
#include <limits>

namespace vela::sampling {

void mask_disallowed(std::span<float> logits, std::span<const uint64_t> allowed) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  const size_t words = std::min(allowed.size(), (n + 63) / 64);
  for (size_t w = 0; w < words; ++w) {
    const uint64_t bits = allowed[w];
    if (bits == ~uint64_t(0)) continue;  // common inside strings: nothing to clear
    const size_t base = w * 64, end = std::min(base + 64, n);
    if (bits == 0) {
      std::fill(logits.begin() + std::ptrdiff_t(base), logits.begin() + std::ptrdiff_t(end),
                kNegInf);
      continue;
    }
    for (size_t i = base; i < end; ++i)
      if (!((bits >> (i - base)) & 1)) logits[i] = kNegInf;
  }
  std::fill(logits.begin() + std::ptrdiff_t(std::min(n, words * 64)), logits.end(), kNegInf);
}

}  // namespace vela::sampling

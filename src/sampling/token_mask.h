#pragma once
// Applying an allowed-token bitmask (structured output) to a logits row.
// Free functions; no thread-safety concerns.
#include <cstdint>
#include <span>

namespace vela::sampling {

// logits[t] = -inf for every token t whose bit is clear. logits: [n_vocab];
// allowed: [ceil(n_vocab / 64)], bit t % 64 of word t / 64 = token t.
void mask_disallowed(std::span<float> logits, std::span<const uint64_t> allowed);

}  // namespace vela::sampling

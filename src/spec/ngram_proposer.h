#pragma once
// Prompt-lookup proposals: the last n tokens of a sequence (prompt and output) are searched for
// earlier in the same sequence, longest n first, most recent occurrence first; what followed
// that occurrence is proposed as the continuation. Costs no model pass: a repeated phrase, a
// quoted passage or code being edited continues as it did before.
// Free function without state: safe from any thread.
#include <cstdint>
#include <span>

namespace vela {

// Writes up to out.size() proposed tokens to `out` and returns how many (0 when no suffix of
// length in [min_n, max_n] occurs earlier). tokens: [n] the sequence so far.
int32_t propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n,
                      std::span<int32_t> out);

}  // namespace vela

#pragma once
// Unicode code-point ranges as UTF-8 byte-range sequences, so a character class becomes a few
// alternatives of byte-set terminals (the split RE2 and Rust's regex-syntax use). Surrogates
// (U+D800..U+DFFF) are never produced: the output is always valid UTF-8.
// Free functions; no thread-safety concerns.
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace vela::constraint {

using CodepointRange = std::pair<uint32_t, uint32_t>;  // inclusive

struct ByteRange {
  uint8_t lo, hi;
};

// Sorts and merges overlapping or adjacent ranges.
std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges);
// The complement within U+0000..U+10FFFF (input normalized).
std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges);
// Each result is a sequence of 1-4 byte ranges; together they match exactly the UTF-8
// encodings of the code points in `ranges` (surrogates removed).
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodepointRange>& ranges);
// Appends the UTF-8 encoding of `cp` (cp <= 0x10FFFF).
void append_utf8(uint32_t cp, std::vector<uint8_t>& out);
// The code point starting at s[pos] (pos < s.size()), advancing pos past it; a byte that does
// not start a complete sequence is read as itself.
uint32_t next_code_point(std::string_view s, size_t& pos);

}  // namespace vela::constraint

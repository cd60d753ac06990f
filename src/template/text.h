#pragma once
// UTF-8 and Python-string helpers for the template engine: code-point decoding, Python's
// notion of whitespace and line breaks, case mapping and character classes.
// Case mapping and the alpha/digit classes cover ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic exactly; other scripts (CJK, ...) count as letters without case, which is what
// Python reports for them. Invalid UTF-8 bytes decode to U+DC80+byte and encode back to the
// same byte, so no operation here loses bytes.
// Thread-safety: stateless functions, safe from any thread.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vela::jinja {

// Code points of `s` (see the file comment for invalid bytes).
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view s);

// Number of code points (Python's len() of the string).
size_t utf8_length(std::string_view s);

// Python's str.isspace() for one code point.
bool is_space(char32_t c);
// Python's str.splitlines() boundaries (\n, \r, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029).
bool is_line_break(char32_t c);
bool is_digit(char32_t c);
bool is_alpha(char32_t c);
inline bool is_alnum(char32_t c) {
  return is_alpha(c) || is_digit(c);
}
// Cased letters: has an upper- or lowercase form in the covered scripts.
bool is_upper(char32_t c);
bool is_lower(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);

std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);
// Python's str.capitalize(): first code point upper, the rest lower.
std::string str_capitalize(std::string_view s);
// Python's str.title(): upper after a non-letter, lower after a letter.
std::string str_title(std::string_view s);

// Python's strip family. `chars` null: strip whitespace; otherwise strip those code points.
std::string str_strip(std::string_view s, const std::string* chars, bool left, bool right);

// Python's str.split(sep, maxsplit); `sep` null splits on whitespace runs.
std::vector<std::string> str_split(std::string_view s, const std::string* sep, long maxsplit);
// Python's str.rsplit(sep, maxsplit).
std::vector<std::string> str_rsplit(std::string_view s, const std::string* sep, long maxsplit);
// Python's str.splitlines(keepends).
std::vector<std::string> str_splitlines(std::string_view s, bool keepends);
// Python's str.replace(old, new, count); count < 0 replaces all.
std::string str_replace(std::string_view s, std::string_view from, std::string_view to, long count);
// Occurrences of `sub` that do not overlap (Python's str.count).
size_t str_count(std::string_view s, std::string_view sub);

// Code-point slice [start, stop) with Python's negative-index and clamping rules (step 1).
std::string utf8_substr(std::string_view s, long start, long stop);

}  // namespace vela::jinja

#pragma once
// Small UTF-8 helpers shared by the tokenizers. Input text may be invalid UTF-8 (it comes from
// users and from hostile model files); every function here treats a malformed sequence as one
// byte so callers never read past the end or loop forever.
// Thread-safety: stateless functions.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vela::utf8 {

inline bool is_continuation(uint8_t byte) {
  return (byte & 0xC0) == 0x80;
}

// Length a lead byte announces (1 for ASCII, continuation bytes and invalid leads).
inline size_t announced_length(uint8_t lead) {
  if (lead < 0xC2) return 1;  // ASCII, stray continuation byte or overlong 2-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 1;  // 0xF5..0xFF never start a valid sequence
}

// Byte length of the character starting at text[pos]: the full sequence when it is well formed,
// otherwise 1 (so a malformed byte becomes a character of its own).
inline size_t char_length(std::string_view text, size_t pos) {
  const size_t n = announced_length(static_cast<uint8_t>(text[pos]));
  if (n == 1 || pos + n > text.size()) return 1;
  for (size_t i = 1; i < n; ++i)
    if (!is_continuation(static_cast<uint8_t>(text[pos + i]))) return 1;
  return n;
}

// Decodes the character at text[pos]; a malformed byte decodes to its own value | 0x80000000 so
// it can never collide with a real code point. `length` receives the bytes consumed.
inline uint32_t decode(std::string_view text, size_t pos, size_t& length) {
  length = char_length(text, pos);
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  switch (length) {
    case 2:
      return (uint32_t(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3:
      return (uint32_t(s[0] & 0x0F) << 12) | (uint32_t(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    case 4:
      return (uint32_t(s[0] & 0x07) << 18) | (uint32_t(s[1] & 0x3F) << 12) |
             (uint32_t(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    default:
      return s[0] < 0x80 ? s[0] : (0x80000000u | s[0]);
  }
}

inline void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Number of trailing bytes of `text` that form the start of a UTF-8 sequence still waiting for
// its continuation bytes (0 when the text ends on a character boundary or in malformed bytes
// that no later byte could complete).
inline size_t incomplete_tail_length(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto byte = static_cast<uint8_t>(text[n - back]);
    if (is_continuation(byte)) continue;
    const size_t want = announced_length(byte);
    return want > back ? back : 0;
  }
  return 0;
}

}  // namespace vela::utf8

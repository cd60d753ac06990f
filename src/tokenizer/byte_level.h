#pragma once
// GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable Unicode character, so a
// byte-level BPE vocabulary stores its tokens as ordinary text. Printable Latin-1 bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes map, in increasing order, to
// U+0100, U+0101, ... (so ' ' is 'Ġ' and '\n' is 'Ċ').
// Thread-safety: the tables are built once (thread-safe static init) and only read afterwards.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vela::byte_level {

// UTF-8 text of the character that stands for `byte`.
std::string_view encode_byte(uint8_t byte);

// Appends the byte-level encoding of every byte of `raw` to `out`.
void encode(std::string_view raw, std::string& out);

// The byte a code point stands for, or nullopt when it is not part of the alphabet.
std::optional<uint8_t> decode_code_point(uint32_t cp);

// Decodes token text back to raw bytes; characters outside the alphabet are kept as their UTF-8
// (a vocabulary that stores some tokens verbatim still decodes to readable text).
void decode(std::string_view token_text, std::string& out);

}  // namespace vela::byte_level

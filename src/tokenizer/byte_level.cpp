#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace vela::byte_level {
namespace {

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 512> code_point_to_byte;  // every alphabet code point is below 0x144

  Tables() {
    code_point_to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t cp = stands_for_itself(byte) ? uint32_t(byte) : next_extra++;
      utf8::append(byte_to_text[byte], cp);
      code_point_to_byte[cp] = int16_t(byte);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string_view encode_byte(uint8_t byte) {
  return tables().byte_to_text[byte];
}

void encode(std::string_view raw, std::string& out) {
  const Tables& t = tables();
  for (char c : raw) out += t.byte_to_text[static_cast<uint8_t>(c)];
}

std::optional<uint8_t> decode_code_point(uint32_t cp) {
  if (cp >= 512) return std::nullopt;
  const int16_t byte = tables().code_point_to_byte[cp];
  if (byte < 0) return std::nullopt;
  return uint8_t(byte);
}

void decode(std::string_view token_text, std::string& out) {
  size_t pos = 0;
  while (pos < token_text.size()) {
    size_t len = 0;
    const uint32_t cp = utf8::decode(token_text, pos, len);
    if (auto byte = decode_code_point(cp)) {
      out += char(*byte);
    } else {
      out.append(token_text.substr(pos, len));
    }
    pos += len;
  }
}

}  // namespace vela::byte_level

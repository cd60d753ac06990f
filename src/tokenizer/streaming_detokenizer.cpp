#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vela {

std::string StreamingDetokenizer::push(int32_t token) {
  const std::string_view piece = tokenizer_.piece_view(token);
  if (piece.empty()) return {};
  std::string ready;
  ready.reserve(pending_.size() + piece.size());
  ready.append(pending_).append(piece);
  pending_.clear();
  // Hold back a trailing lead byte (and its continuation bytes so far) until the character is
  // complete; anything else, including bytes no later token could repair, goes out now.
  const size_t held = utf8::incomplete_tail_length(ready);
  if (held > 0) {
    pending_.assign(ready, ready.size() - held, held);
    ready.erase(ready.end() - std::ptrdiff_t(held), ready.end());
  }
  return ready;
}

std::string StreamingDetokenizer::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace vela

#include "tokenizer/spm.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace vela {
namespace {

// Heap order: the highest score on top, then the leftmost pair.
bool lower_priority(const SpmScratch::Pair& a, const SpmScratch::Pair& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

void queue_pair(std::string_view text, int32_t left, int32_t right, const Vocab& vocab,
                SpmScratch& s) {
  if (left < 0 || right < 0) return;
  const SpmScratch::Symbol& l = s.symbols[size_t(left)];
  const uint32_t length = l.length + s.symbols[size_t(right)].length;
  const int32_t id = vocab.find(text.substr(l.begin, length));
  if (id == kNoToken) return;
  s.heap.push_back({vocab.tokens[size_t(id)].score, left, right, length});
  std::push_heap(s.heap.begin(), s.heap.end(), lower_priority);
}

void emit_piece(std::string_view piece, const Vocab& vocab, std::vector<int32_t>& out) {
  if (int32_t id = vocab.find(piece); id != kNoToken) {
    out.push_back(id);
    return;
  }
  const bool all_bytes_known = std::all_of(piece.begin(), piece.end(), [&](char c) {
    return vocab.byte_fallback[static_cast<uint8_t>(c)] != kNoToken;
  });
  if (all_bytes_known) {
    for (char c : piece) out.push_back(vocab.byte_fallback[static_cast<uint8_t>(c)]);
  } else if (vocab.unknown != kNoToken) {
    out.push_back(vocab.unknown);
  }
}

}  // namespace

void spm_encode(std::string_view text, const Vocab& vocab, std::vector<int32_t>& out,
                SpmScratch& s) {
  s.symbols.clear();
  s.heap.clear();
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::char_length(text, pos);
    const auto index = int32_t(s.symbols.size());
    s.symbols.push_back({uint32_t(pos), uint32_t(len), index - 1, -1});
    if (index > 0) s.symbols[size_t(index - 1)].next = index;
    pos += len;
  }
  for (size_t i = 1; i < s.symbols.size(); ++i)
    queue_pair(text, int32_t(i - 1), int32_t(i), vocab, s);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), lower_priority);
    const SpmScratch::Pair pair = s.heap.back();
    s.heap.pop_back();
    SpmScratch::Symbol& left = s.symbols[size_t(pair.left)];
    SpmScratch::Symbol& right = s.symbols[size_t(pair.right)];
    if (left.length == 0 || right.length == 0 || left.length + right.length != pair.length)
      continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) s.symbols[size_t(right.next)].prev = pair.left;
    queue_pair(text, left.prev, pair.left, vocab, s);
    queue_pair(text, pair.left, left.next, vocab, s);
  }

  for (const SpmScratch::Symbol& sym : s.symbols)
    if (sym.length > 0) emit_piece(text.substr(sym.begin, sym.length), vocab, out);
}

}  // namespace vela

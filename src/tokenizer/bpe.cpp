#include "tokenizer/bpe.h"

#include <algorithm>

#include "io/gguf.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace vela {
namespace {

constexpr std::string_view kKeyMerges = "tokenizer.ggml.merges";

// Heap order: the lowest rank on top, then the leftmost pair.
bool lower_priority(const BpeScratch::Pair& a, const BpeScratch::Pair& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

Result<BpeModel> BpeModel::from_gguf(const GgufFile& gguf) {
  auto arr = gguf.get_array(kKeyMerges);
  if (!arr)
    return make_error("tokenizer metadata '" + std::string(kKeyMerges) + "': " + arr.message());
  if (!arr->has_value())
    return make_error("tokenizer metadata '" + std::string(kKeyMerges) +
                      "': missing (byte-level BPE needs its merges)");
  auto merges = gguf_array_strings(***arr);
  if (!merges)
    return make_error("tokenizer metadata '" + std::string(kKeyMerges) + "': " + merges.message());
  if (merges->size() > size_t(INT32_MAX)) return make_error("too many BPE merges");

  BpeModel model;
  model.ranks_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string_view merge = (*merges)[i];
    // The separator is the first space after the first byte (so a left part may start with one).
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos || space + 1 >= merge.size()) {
      return make_error("tokenizer metadata '" + std::string(kKeyMerges) + "' entry #" +
                        std::to_string(i) + " '" + std::string(merge.substr(0, 64)) +
                        "' is not of the form 'left right'");
    }
    model.ranks_.emplace(std::string(merge), int32_t(i));
  }
  return model;
}

void BpeModel::queue_pair(int32_t left, int32_t right, BpeScratch& s) const {
  if (left < 0 || right < 0) return;
  const BpeScratch::Symbol& l = s.symbols[size_t(left)];
  const BpeScratch::Symbol& r = s.symbols[size_t(right)];
  s.pair_key.assign(s.encoded, l.begin, l.length);
  s.pair_key += ' ';
  s.pair_key.append(s.encoded, r.begin, r.length);
  auto it = ranks_.find(std::string_view(s.pair_key));
  if (it == ranks_.end()) return;
  s.heap.push_back({it->second, left, right, l.length, r.length});
  std::push_heap(s.heap.begin(), s.heap.end(), lower_priority);
}

void BpeModel::encode_word(std::string_view word, const Vocab& vocab, bool ignore_merges,
                           std::vector<int32_t>& out, BpeScratch& s) const {
  if (word.empty()) return;
  s.encoded.clear();
  byte_level::encode(word, s.encoded);
  if (ignore_merges) {
    if (int32_t id = vocab.find(s.encoded); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }

  // One symbol per byte-level character (= per input byte).
  s.symbols.clear();
  s.heap.clear();
  for (size_t pos = 0; pos < s.encoded.size();) {
    const size_t len = utf8::char_length(s.encoded, pos);
    const auto index = int32_t(s.symbols.size());
    s.symbols.push_back({uint32_t(pos), uint32_t(len), index - 1, -1});
    if (index > 0) s.symbols[size_t(index - 1)].next = index;
    pos += len;
  }
  for (size_t i = 1; i < s.symbols.size(); ++i) queue_pair(int32_t(i - 1), int32_t(i), s);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), lower_priority);
    const BpeScratch::Pair pair = s.heap.back();
    s.heap.pop_back();
    BpeScratch::Symbol& left = s.symbols[size_t(pair.left)];
    BpeScratch::Symbol& right = s.symbols[size_t(pair.right)];
    // A pair is stale once either side merged with something else since it was queued.
    if (left.length != pair.left_length || right.length != pair.right_length || left.length == 0 ||
        right.length == 0)
      continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) s.symbols[size_t(right.next)].prev = pair.left;
    queue_pair(left.prev, pair.left, s);
    queue_pair(pair.left, left.next, s);
  }

  for (const BpeScratch::Symbol& sym : s.symbols) {
    if (sym.length == 0) continue;
    const std::string_view text(s.encoded.data() + sym.begin, sym.length);
    if (int32_t id = vocab.find(text); id != kNoToken) {
      out.push_back(id);
      continue;
    }
    // Not a token (merges that build unlisted pieces, or a vocabulary missing some bytes):
    // emit the single-byte tokens that exist and drop the rest, as the reference does. (Its
    // "unknown" id is often <|endoftext|>, which must never appear mid-prompt.)
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = utf8::char_length(text, pos);
      if (int32_t id = vocab.find(text.substr(pos, len)); id != kNoToken) out.push_back(id);
      pos += len;
    }
  }
}

}  // namespace vela

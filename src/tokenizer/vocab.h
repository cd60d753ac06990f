#pragma once
// The token vocabulary read from GGUF metadata: token texts, scores, attributes, the special ids
// and the flags that decide how text is encoded. Built and validated by load_vocab(); the
// tokenizers only read it.
// Thread-safety: immutable after load_vocab(); concurrent reads are safe.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/result.h"

namespace vela {

class GgufFile;

// Token attributes (bit flags). The GGUF token_type gives one of the first six; loading may add
// kControl to end-of-generation texts and kUnused to control tokens named "...unused...", and
// kRightStrip for the vocabularies that want whitespace after special tokens dropped.
enum TokenAttr : uint16_t {
  kAttrUndefined = 0,
  kAttrNormal = 1 << 0,
  kAttrUnknown = 1 << 1,
  kAttrControl = 1 << 2,
  kAttrUserDefined = 1 << 3,
  kAttrUnused = 1 << 4,
  kAttrByte = 1 << 5,
  kAttrLeftStrip = 1 << 6,
  kAttrRightStrip = 1 << 7,
};

// tokenizer.ggml.token_type values.
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kSentencePiece,  // tokenizer.ggml.model = "llama": merge by score, "▁" for spaces, byte fallback
  kByteLevelBpe,   // tokenizer.ggml.model = "gpt2": byte-level alphabet, merges by rank
};

inline constexpr int32_t kNoToken = -1;

struct TokenEntry {
  std::string text;
  float score = 0.0f;
  uint16_t attr = kAttrNormal;
};

// Hash/equality that let an unordered_map<std::string, ...> be searched with a string_view
// without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TextToIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  VocabKind kind = VocabKind::kSentencePiece;
  std::string pre_name;  // tokenizer.ggml.pre as given ("" when absent)

  std::vector<TokenEntry> tokens;  // [n_vocab], indexed by id
  TextToIdMap text_to_id;          // first id wins when two tokens share a text

  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken;
  int32_t unknown = kNoToken, padding = kNoToken;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SentencePiece only: prepend " " to text after BOS/specials

  // Tokens matched literally in the input before normal tokenization: control, unknown and
  // user-defined ones with non-empty text, longest text first (ties by id).
  std::vector<int32_t> special_tokens_longest_first;
  std::vector<uint8_t> is_end_of_generation;  // [n_vocab], 0/1

  // SentencePiece byte fallback: the "<0xNN>" token (or the token whose text is that single
  // byte) for each byte value; kNoToken where the vocabulary has neither.
  std::array<int32_t, 256> byte_fallback{};

  std::vector<std::string> warnings;  // non-fatal oddities found while loading

  int32_t n_tokens() const { return int32_t(tokens.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < n_tokens(); }
  bool has_attr(int32_t id, uint16_t attr) const {
    return valid_id(id) && (tokens[size_t(id)].attr & attr) != 0;
  }
  int32_t find(std::string_view text) const {
    auto it = text_to_id.find(text);
    return it == text_to_id.end() ? kNoToken : it->second;
  }
};

// Reads and validates the tokenizer.ggml.* keys (everything except merges and the pre-tokenizer,
// which the BPE model reads itself). Hostile metadata yields an error, never a crash.
// bpe_adds_bos_by_default: the BOS default of the pre-tokenizer (llama3-style vocabularies add
// BOS unless tokenizer.ggml.add_bos_token says otherwise); SentencePiece always defaults to true.
Result<Vocab> load_vocab(const GgufFile& gguf, bool bpe_adds_bos_by_default);

}  // namespace vela

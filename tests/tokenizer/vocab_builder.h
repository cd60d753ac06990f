#pragma once
// Builds small in-memory GGUF tokenizers for tests, including deliberately broken ones.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tokenizer/byte_level.h"

namespace vela::test {

struct VocabSpec {
  std::optional<std::string> model = "llama";  // omitted when nullopt
  std::optional<std::string> pre;
  std::vector<std::string> tokens;
  std::vector<float> scores;               // omitted when empty
  std::vector<int32_t> types;              // omitted when empty
  std::vector<std::string> merges;         // omitted when empty
  std::function<void(GgufWriter&)> extra;  // more keys (ids, flags, broken values)
};

inline Result<GgufFile> build_gguf(const VocabSpec& spec) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  if (spec.model) w.add_string("tokenizer.ggml.model", *spec.model);
  if (spec.pre) w.add_string("tokenizer.ggml.pre", *spec.pre);
  if (!spec.tokens.empty()) w.add_strings("tokenizer.ggml.tokens", spec.tokens);
  if (!spec.scores.empty()) w.add_f32s("tokenizer.ggml.scores", spec.scores);
  if (!spec.types.empty()) w.add_i32s("tokenizer.ggml.token_type", spec.types);
  if (!spec.merges.empty()) w.add_strings("tokenizer.ggml.merges", spec.merges);
  if (spec.extra) spec.extra(w);
  const std::vector<uint8_t> bytes = w.to_bytes();
  return GgufFile::from_bytes(bytes);
}

// SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then `pieces` (normal tokens
// with the given scores). Ids of the pieces start at 259.
inline VocabSpec spm_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  VocabSpec spec;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.types = {2, 3, 3};
  spec.scores = {0, 0, 0};
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    spec.types.push_back(6);
    spec.scores.push_back(0);
  }
  for (const auto& [text, score] : pieces) {
    spec.tokens.push_back(text);
    spec.types.push_back(1);
    spec.scores.push_back(score);
  }
  return spec;
}
inline constexpr int32_t kFirstSpmPiece = 259;

// Byte-level BPE vocabulary: the 256 byte characters (id = byte value), then `pieces` (normal
// tokens, ids from 256), with `merges` in rank order.
inline VocabSpec bpe_vocab(const std::vector<std::string>& pieces,
                           const std::vector<std::string>& merges, std::string pre = "gpt-2") {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(byte_level::encode_byte(uint8_t(b)));
  for (const auto& p : pieces) spec.tokens.push_back(p);
  spec.types.assign(spec.tokens.size(), 1);
  spec.merges = merges;
  return spec;
}

}  // namespace vela::test

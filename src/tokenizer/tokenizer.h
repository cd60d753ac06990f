#pragma once
// Text <-> token ids for GGUF models, matching the reference GGUF engine's tokenizers:
//  - tokenizer.ggml.model = "llama": SentencePiece-style merge-by-score with byte fallback,
//    spaces as "▁" and a leading space (tokenizer.ggml.add_space_prefix, default true);
//  - tokenizer.ggml.model = "gpt2": byte-level BPE with the pre-tokenizer regexes named by
//    tokenizer.ggml.pre (an unknown name is an error listing the supported ones; a missing key
//    selects "default" and records a warning, see load_warnings()).
// Decoding is lossless: unlike the reference's optional "clean up tokenization spaces" pass,
// decode() never edits the text between tokens.
// Thread-safety: immutable after from_gguf(); encode/decode are const and safe to call
// concurrently. Copies share the immutable vocabulary.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace vela {

class GgufFile;
struct TokenizerModel;  // vocabulary + algorithm state, defined in tokenizer.cpp

class Tokenizer {
 public:
  // Validates everything (ids in range, array lengths equal, merges well formed, known
  // pre-tokenizer, ...): a hostile file gives an error, never a crash. The result does not
  // refer to `gguf` afterwards.
  static Result<Tokenizer> from_gguf(const GgufFile& gguf);

  // add_special: BOS/EOS as the model's add_bos/add_eos flags say.
  // parse_special: control-token texts in `text` (e.g. "<|im_start|>") become those tokens;
  // user-defined tokens are matched either way, as in the reference.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes this token adds to the text: SPM "▁" -> " ", <0xNN> -> that byte, byte-level BPE
  // decoded to raw bytes; control, unknown and unused tokens -> "" unless render_special, in
  // which case control/unknown tokens give their text. Out-of-range ids give "".
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  // Same bytes without a copy; valid as long as this tokenizer (or a copy) lives.
  std::string_view piece_view(int32_t id, bool render_special = false) const;

  // Concatenated pieces. skip_special: control tokens give "" and a leading BOS / trailing EOS
  // that encode() would add are dropped; otherwise control tokens give their text. SPM, as in
  // the reference: the first piece loses one leading space (the one encode() adds) unless the
  // ids start with a BOS that skip_special dropped.
  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when the model has none
  int32_t eos_id() const;  // -1 when the model has none
  int32_t eot_id() const;  // end of turn (e.g. <|eot_id|>, <|im_end|>); -1 when none
  int32_t unknown_id() const;
  int32_t padding_id() const;
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: eos, eot, eom, and control tokens like <|im_end|>/<|eot_id|>/<|endoftext|>
  // that the reference treats as EOG.
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const;
  // The token's text as stored in the vocabulary ("▁Hello", "Ġworld", "<|im_end|>"); "" if out
  // of range. Chat templates use it for bos/eos text.
  std::string_view token_text(int32_t id) const;
  // Non-fatal oddities found while loading (missing pre-tokenizer, duplicate token texts).
  const std::vector<std::string>& load_warnings() const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerModel> model) : model_(std::move(model)) {}
  std::shared_ptr<const TokenizerModel> model_;
};

// Streams decoded text safely: never emits half of a UTF-8 character split across tokens (the
// bytes wait until the character is complete). Emits exactly the bytes of token_to_piece(), in
// order, with no leading-space stripping (a generated first token keeps its space, as in the
// reference). Bytes that can never form a valid character are passed through unchanged.
// Thread-safety: one per request; not synchronised.
class StreamingDetokenizer {
 public:
  // Keeps a copy of the tokenizer (it shares the vocabulary), so no lifetime coupling.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text that became complete with this token (often empty for byte tokens).
  std::string push(int32_t token);
  // Whatever is still held back (an incomplete character at the end of the stream).
  std::string flush();

 private:
  Tokenizer tokenizer_;
  std::string pending_;  // at most 3 bytes of an unfinished UTF-8 sequence
};

}  // namespace vela

#include "tokenizer/tokenizer.h"

#include <optional>

#include "io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"

namespace vela {

struct TokenizerModel {
  Vocab vocab;
  std::optional<BpeModel> bpe;               // byte-level BPE only
  std::optional<Pretokenizer> pretokenizer;  // byte-level BPE only
  std::vector<std::string> pieces;           // [n_vocab] token_to_piece(id, false)
};

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // "▁", SentencePiece's space

void replace_all(std::string_view text, std::string_view from, std::string_view to,
                 std::string& out) {
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    out.append(text.substr(pos, hit == std::string_view::npos ? hit : hit - pos));
    if (hit == std::string_view::npos) return;
    out.append(to);
    pos = hit + from.size();
  }
}

std::string make_piece(const Vocab& vocab, const TokenEntry& token) {
  std::string piece;
  if (token.attr & (kAttrControl | kAttrUnknown)) return piece;
  if (token.attr & kAttrUserDefined) return token.text;  // stored verbatim
  if (token.attr & kAttrNormal) {
    if (vocab.kind == VocabKind::kSentencePiece) {
      replace_all(token.text, kSpaceMark, " ", piece);
    } else {
      byte_level::decode(token.text, piece);
    }
    return piece;
  }
  if (token.attr & kAttrByte) {  // validated "<0xNN>" by load_vocab
    piece += char(std::stoi(token.text.substr(3, 2), nullptr, 16));
  }
  return piece;  // unused / undefined tokens render as nothing
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  auto model_name = gguf.get_string("tokenizer.ggml.model");
  if (!model_name) return model_name.error();
  auto pre_name = gguf.get_string("tokenizer.ggml.pre");
  if (!pre_name) return pre_name.error();

  auto model = std::make_shared<TokenizerModel>();
  std::vector<std::string> warnings;
  const bool byte_level_bpe = model_name->has_value() && **model_name == "gpt2";
  if (byte_level_bpe) {
    const std::string_view pre = pre_name->value_or("");
    if (pre.empty())
      warnings.push_back(
          "tokenizer.ggml.pre is missing; using the 'default' pre-tokenizer "
          "(output may differ from the model's training tokenizer)");
    auto pretokenizer = Pretokenizer::create(pre);
    if (!pretokenizer) return pretokenizer.error();
    model->pretokenizer = std::move(*pretokenizer);
  }

  auto vocab = load_vocab(gguf, byte_level_bpe && model->pretokenizer->adds_bos_by_default());
  if (!vocab) return vocab.error();
  model->vocab = std::move(*vocab);
  model->vocab.warnings.insert(model->vocab.warnings.begin(), warnings.begin(), warnings.end());

  if (model->vocab.kind == VocabKind::kByteLevelBpe) {
    auto bpe = BpeModel::from_gguf(gguf);
    if (!bpe) return bpe.error();
    model->bpe = std::move(*bpe);
  }

  model->pieces.reserve(model->vocab.tokens.size());
  for (const TokenEntry& token : model->vocab.tokens)
    model->pieces.push_back(make_piece(model->vocab, token));
  return Tokenizer(std::move(model));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Vocab& vocab = model_->vocab;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab.add_bos) out.push_back(vocab.bos);

  std::vector<TextFragment> fragments, fragment_scratch;
  split_special_tokens(text, vocab, parse_special, fragments, fragment_scratch);

  if (vocab.kind == VocabKind::kSentencePiece) {
    SpmScratch scratch;
    std::string escaped;
    // Text at the start and right after a special token gets the leading space SentencePiece
    // models were trained with.
    bool after_special = true;
    for (const TextFragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (vocab.add_space_prefix && after_special) escaped += kSpaceMark;
      replace_all(text.substr(f.offset, f.length), " ", kSpaceMark, escaped);
      spm_encode(escaped, vocab, out, scratch);
      after_special = false;
    }
  } else {
    BpeScratch scratch;
    std::vector<std::string_view> words;
    const bool ignore_merges = model_->pretokenizer->ignore_merges();
    for (const TextFragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        continue;
      }
      words.clear();
      model_->pretokenizer->split(text.substr(f.offset, f.length), words);
      for (std::string_view word : words)
        model_->bpe->encode_word(word, vocab, ignore_merges, out, scratch);
    }
  }

  if (add_special && vocab.add_eos) out.push_back(vocab.eos);
  return out;
}

std::string_view Tokenizer::piece_view(int32_t id, bool render_special) const {
  const Vocab& vocab = model_->vocab;
  if (!vocab.valid_id(id)) return {};
  const TokenEntry& token = vocab.tokens[size_t(id)];
  if (render_special && (token.attr & (kAttrControl | kAttrUnknown))) return token.text;
  return model_->pieces[size_t(id)];
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  return std::string(piece_view(id, render_special));
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Vocab& vocab = model_->vocab;
  bool strip_leading_space = vocab.add_space_prefix;
  if (skip_special && vocab.add_bos && !ids.empty() && ids.front() == vocab.bos) {
    // Text after an explicit BOS keeps its space: the reference's rule.
    strip_leading_space = false;
    ids = ids.subspan(1);
  }
  if (skip_special && vocab.add_eos && !ids.empty() && ids.back() == vocab.eos)
    ids = ids.first(ids.size() - 1);

  std::string text;
  for (int32_t id : ids) {
    std::string_view piece = piece_view(id, !skip_special);
    if (strip_leading_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    strip_leading_space = false;
    text.append(piece);
  }
  return text;
}

int32_t Tokenizer::n_vocab() const {
  return model_->vocab.n_tokens();
}
int32_t Tokenizer::bos_id() const {
  return model_->vocab.bos;
}
int32_t Tokenizer::eos_id() const {
  return model_->vocab.eos;
}
int32_t Tokenizer::eot_id() const {
  return model_->vocab.eot;
}
int32_t Tokenizer::unknown_id() const {
  return model_->vocab.unknown;
}
int32_t Tokenizer::padding_id() const {
  return model_->vocab.padding;
}
bool Tokenizer::add_bos() const {
  return model_->vocab.add_bos;
}
bool Tokenizer::add_eos() const {
  return model_->vocab.add_eos;
}

bool Tokenizer::is_eog(int32_t id) const {
  const Vocab& vocab = model_->vocab;
  return vocab.valid_id(id) && vocab.is_end_of_generation[size_t(id)] != 0;
}

bool Tokenizer::is_control(int32_t id) const {
  return model_->vocab.has_attr(id, kAttrControl);
}

std::string_view Tokenizer::token_text(int32_t id) const {
  const Vocab& vocab = model_->vocab;
  return vocab.valid_id(id) ? std::string_view(vocab.tokens[size_t(id)].text) : std::string_view();
}

const std::vector<std::string>& Tokenizer::load_warnings() const {
  return model_->vocab.warnings;
}

}  // namespace vela

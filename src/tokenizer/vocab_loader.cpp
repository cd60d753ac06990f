// Reads tokenizer.ggml.* metadata into a Vocab, mirroring the defaults and the end-of-generation
// heuristics of the reference GGUF engine, and validating everything a hostile file could break.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <span>

#include "io/gguf.h"
#include "tokenizer/vocab.h"

namespace vela {
namespace {

constexpr std::string_view kKeyModel = "tokenizer.ggml.model";
constexpr std::string_view kKeyTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kKeyScores = "tokenizer.ggml.scores";
constexpr std::string_view kKeyTypes = "tokenizer.ggml.token_type";

// Texts the reference engine treats as end-of-generation (and therefore control) tokens even
// when the converter forgot to mark them.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "</s>",
    "<|end_of_text|>",
    "<eos>",
    "[EOT]",
    "[EOS]",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
};
// Texts that identify the end-of-turn token when tokenizer.ggml.eot_token_id is absent, in
// order of preference.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
};

// Fill-in-the-middle pad / repository / file-separator tokens also end generation in the
// reference (coder models emit them when a completion is done).
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                             "[PAD]"};
constexpr std::string_view kFimRepoTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>"};
constexpr std::string_view kFimSeparatorTexts[] = {"<|file_sep|>"};

Error key_error(std::string_view key, const std::string& why) {
  return make_error("tokenizer metadata '" + std::string(key) + "': " + why);
}

uint16_t attr_from_type(int64_t type) {
  switch (static_cast<GgufTokenType>(type)) {
    case GgufTokenType::kNormal:
      return kAttrNormal;
    case GgufTokenType::kUnknown:
      return kAttrUnknown;
    case GgufTokenType::kControl:
      return kAttrControl;
    case GgufTokenType::kUserDefined:
      return kAttrUserDefined;
    case GgufTokenType::kUnused:
      return kAttrUnused;
    case GgufTokenType::kByte:
      return kAttrByte;
    case GgufTokenType::kUndefined:
      break;
  }
  return kAttrUndefined;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses "<0xNN>"; -1 when the text has another form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

Status read_tokens(const GgufFile& gguf, Vocab& vocab) {
  auto arr = gguf.get_array(kKeyTokens);
  if (!arr) return key_error(kKeyTokens, arr.message());
  if (!arr->has_value()) return key_error(kKeyTokens, "missing");
  auto texts = gguf_array_strings(***arr);
  if (!texts) return key_error(kKeyTokens, texts.message());
  if (texts->empty()) return key_error(kKeyTokens, "the vocabulary is empty");
  if (texts->size() > size_t(std::numeric_limits<int32_t>::max()))
    return key_error(kKeyTokens, "too many tokens");
  const size_t n = texts->size();

  std::vector<float> scores;
  auto score_arr = gguf.get_array(kKeyScores);
  if (!score_arr) return key_error(kKeyScores, score_arr.message());
  if (score_arr->has_value()) {
    auto s = gguf_array_floats(***score_arr);
    if (!s) return key_error(kKeyScores, s.message());
    if (s->size() != n)
      return key_error(kKeyScores,
                       std::to_string(s->size()) + " scores for " + std::to_string(n) + " tokens");
    for (size_t i = 0; i < n; ++i)
      if (std::isnan((*s)[i]))
        return key_error(kKeyScores, "score #" + std::to_string(i) + " is NaN");
    scores = std::move(*s);
  }

  std::vector<int64_t> types;
  auto type_arr = gguf.get_array(kKeyTypes);
  if (!type_arr) return key_error(kKeyTypes, type_arr.message());
  if (type_arr->has_value()) {
    auto t = gguf_array_ints(***type_arr);
    if (!t) return key_error(kKeyTypes, t.message());
    if (t->size() != n)
      return key_error(kKeyTypes, std::to_string(t->size()) + " token types for " +
                                      std::to_string(n) + " tokens");
    for (size_t i = 0; i < n; ++i)
      if ((*t)[i] < 0 || (*t)[i] > 6)
        return key_error(kKeyTypes, "token #" + std::to_string(i) + " has unknown type " +
                                        std::to_string((*t)[i]));
    types = std::move(*t);
  }

  vocab.tokens.resize(n);
  vocab.text_to_id.reserve(n);
  size_t n_duplicates = 0;
  for (size_t i = 0; i < n; ++i) {
    TokenEntry& e = vocab.tokens[i];
    e.text = std::string((*texts)[i]);
    e.score = scores.empty() ? 0.0f : scores[i];
    e.attr = types.empty() ? uint16_t(kAttrNormal) : attr_from_type(types[i]);
    if ((e.attr & kAttrByte) && parse_byte_token(e.text) < 0)
      return key_error(kKeyTypes,
                       "byte token #" + std::to_string(i) + " is not of the form <0xNN>");
    if (e.text.empty()) continue;  // can never be matched; decodes to nothing
    if (!vocab.text_to_id.emplace(e.text, int32_t(i)).second) ++n_duplicates;
  }
  if (n_duplicates)
    vocab.warnings.push_back(std::to_string(n_duplicates) +
                             " token texts occur more than once; the lowest id is used");
  return {};
}

// Reads an optional token id. Absent, -1 and 0xFFFFFFFF (how converters write "none") leave
// `id` unchanged / set it to kNoToken; anything else outside the vocabulary is an error.
Status read_token_id(const GgufFile& gguf, std::string_view key, const Vocab& vocab, int32_t& id) {
  auto v = gguf.get_int(key);
  if (!v) return key_error(key, v.message());
  if (!v->has_value()) return {};
  const int64_t x = **v;
  if (x == -1 || x == int64_t(0xFFFFFFFFu)) {
    id = kNoToken;
    return {};
  }
  if (x < 0 || x >= vocab.n_tokens())
    return key_error(key, "token id " + std::to_string(x) + " is outside the vocabulary of " +
                              std::to_string(vocab.n_tokens()));
  id = int32_t(x);
  return {};
}

Status read_flag(const GgufFile& gguf, std::string_view key, bool& flag) {
  auto v = gguf.get_bool(key);
  if (!v) return key_error(key, v.message());
  if (v->has_value()) flag = **v;
  return {};
}

bool contains(std::span<const std::string_view> list, std::string_view text) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

// The token of the first text in `texts` (a priority list) that the vocabulary has, or kNoToken.
int32_t first_with_text(const Vocab& vocab, std::span<const std::string_view> texts) {
  for (std::string_view text : texts)
    if (int32_t id = vocab.find(text); id != kNoToken) return id;
  return kNoToken;
}

// End-of-generation set and control-attribute repairs, as the reference engine does them.
// fim_ids: the FIM pad/repo/separator ids from metadata (kNoToken = detect by text).
void mark_end_of_generation(Vocab& vocab, std::array<int32_t, 3> fim_ids) {
  const int32_t n = vocab.n_tokens();
  vocab.is_end_of_generation.assign(size_t(n), 0);

  auto make_control = [&](int32_t id) { vocab.tokens[size_t(id)].attr |= kAttrControl; };

  if (vocab.eot == kNoToken) {
    vocab.eot = first_with_text(vocab, kEndOfTurnTexts);
    if (vocab.eot != kNoToken) make_control(vocab.eot);
  }
  const std::span<const std::string_view> fim_texts[] = {kFimPadTexts, kFimRepoTexts,
                                                         kFimSeparatorTexts};
  for (size_t i = 0; i < fim_ids.size(); ++i) {
    if (fim_ids[i] == kNoToken) {
      fim_ids[i] = first_with_text(vocab, fim_texts[i]);
      if (fim_ids[i] != kNoToken) make_control(fim_ids[i]);
    }
    if (fim_ids[i] != kNoToken) vocab.is_end_of_generation[size_t(fim_ids[i])] = 1;
  }
  if (vocab.eom == kNoToken) {
    if (int32_t id = vocab.find("<|eom_id|>"); id != kNoToken) {
      vocab.eom = id;
      make_control(id);
    }
  }
  for (int32_t id = 0; id < n; ++id) {
    TokenEntry& e = vocab.tokens[size_t(id)];
    if ((e.attr & kAttrControl) && e.text.find("unused") != std::string::npos)
      e.attr |= kAttrUnused;
    if (contains(kEndOfGenerationTexts, e.text)) {
      vocab.is_end_of_generation[size_t(id)] = 1;
      make_control(id);
    }
  }
  for (int32_t id : {vocab.eos, vocab.eot, vocab.eom})
    if (id != kNoToken) vocab.is_end_of_generation[size_t(id)] = 1;

  // Harmony-style vocabularies (<|return|> and <|call|>) use <|end|> between messages, not at
  // the end of generation.
  const int32_t end_id = vocab.find("<|end|>");
  if (end_id != kNoToken && end_id != vocab.eos && vocab.find("<|return|>") != kNoToken &&
      (vocab.find("<|call|>") != kNoToken || vocab.find("<|calls|>") != kNoToken)) {
    vocab.is_end_of_generation[size_t(end_id)] = 0;
    vocab.tokens[size_t(end_id)].attr = kAttrUserDefined;
    if (vocab.eot == end_id) vocab.eot = kNoToken;
  }
}

void collect_special_tokens(Vocab& vocab) {
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenEntry& e = vocab.tokens[size_t(id)];
    if ((e.attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) && !e.text.empty())
      vocab.special_tokens_longest_first.push_back(id);
  }
  std::stable_sort(vocab.special_tokens_longest_first.begin(),
                   vocab.special_tokens_longest_first.end(), [&](int32_t a, int32_t b) {
                     return vocab.tokens[size_t(a)].text.size() >
                            vocab.tokens[size_t(b)].text.size();
                   });
}

// Phi-3 drops whitespace after its special tokens (its HF tokenizer marks them rstrip).
Status apply_model_specific_attributes(const GgufFile& gguf, Vocab& vocab) {
  auto name = gguf.get_string("general.name");
  if (!name) return key_error("general.name", name.message());
  std::string lower(name->value_or(""));
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("phi-3") == std::string::npos && lower.find("phi3") == std::string::npos)
    return {};
  for (int32_t id : vocab.special_tokens_longest_first)
    vocab.tokens[size_t(id)].attr |= kAttrRightStrip;
  if (int32_t id = vocab.find("</s>"); id != kNoToken)
    vocab.tokens[size_t(id)].attr |= kAttrRightStrip;
  for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"})
    if (int32_t id = vocab.find(text); id != kNoToken)
      vocab.tokens[size_t(id)].attr &= uint16_t(~kAttrRightStrip);
  return {};
}

void build_byte_fallback(Vocab& vocab) {
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = vocab.find(std::string_view(name, 6));
    if (id == kNoToken) id = vocab.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    vocab.byte_fallback[size_t(b)] = id;
  }
}

}  // namespace

Result<Vocab> load_vocab(const GgufFile& gguf, bool bpe_adds_bos_by_default) {
  Vocab vocab;
  auto model = gguf.get_string(kKeyModel);
  if (!model) return key_error(kKeyModel, model.message());
  if (!model->has_value()) return key_error(kKeyModel, "missing (the file has no tokenizer)");
  if (**model == "llama") {
    vocab.kind = VocabKind::kSentencePiece;
  } else if (**model == "gpt2") {
    vocab.kind = VocabKind::kByteLevelBpe;
  } else {
    return key_error(
        kKeyModel, "unsupported tokenizer '" + std::string(**model) + "' (supported: llama, gpt2)");
  }
  auto pre = gguf.get_string("tokenizer.ggml.pre");
  if (!pre) return key_error("tokenizer.ggml.pre", pre.message());
  vocab.pre_name = std::string(pre->value_or(""));

  if (Status s = read_tokens(gguf, vocab); !s) return s.error();

  const bool spm = vocab.kind == VocabKind::kSentencePiece;
  // Defaults of the reference engine; SentencePiece files converted from llama2.c carry no ids.
  if (spm) {
    vocab.bos = vocab.valid_id(1) ? 1 : kNoToken;
    vocab.eos = vocab.valid_id(2) ? 2 : kNoToken;
    vocab.unknown = 0;
  }
  vocab.add_bos = spm || bpe_adds_bos_by_default;
  vocab.add_eos = false;
  vocab.add_space_prefix = spm;

  const std::pair<std::string_view, int32_t*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &vocab.bos},
      {"tokenizer.ggml.eos_token_id", &vocab.eos},
      {"tokenizer.ggml.eot_token_id", &vocab.eot},
      {"tokenizer.ggml.eom_token_id", &vocab.eom},
      {"tokenizer.ggml.unknown_token_id", &vocab.unknown},
      {"tokenizer.ggml.padding_token_id", &vocab.padding},
  };
  for (auto [key, id] : id_keys)
    if (Status s = read_token_id(gguf, key, vocab, *id); !s) return s.error();

  if (Status s = read_flag(gguf, "tokenizer.ggml.add_bos_token", vocab.add_bos); !s)
    return s.error();
  if (Status s = read_flag(gguf, "tokenizer.ggml.add_eos_token", vocab.add_eos); !s)
    return s.error();
  bool space_prefix = vocab.add_space_prefix;
  if (Status s = read_flag(gguf, "tokenizer.ggml.add_space_prefix", space_prefix); !s)
    return s.error();
  vocab.add_space_prefix = spm && space_prefix;  // byte-level BPE never adds a space prefix
  if (vocab.add_bos && vocab.bos == kNoToken)
    return key_error("tokenizer.ggml.add_bos_token", "is true, but there is no BOS token");
  if (vocab.add_eos && vocab.eos == kNoToken)
    return key_error("tokenizer.ggml.add_eos_token", "is true, but there is no EOS token");

  std::array<int32_t, 3> fim_ids = {kNoToken, kNoToken, kNoToken};
  const std::string_view fim_keys[] = {"tokenizer.ggml.fim_pad_token_id",
                                       "tokenizer.ggml.fim_rep_token_id",
                                       "tokenizer.ggml.fim_sep_token_id"};
  for (size_t i = 0; i < fim_ids.size(); ++i)
    if (Status s = read_token_id(gguf, fim_keys[i], vocab, fim_ids[i]); !s) return s.error();

  mark_end_of_generation(vocab, fim_ids);
  collect_special_tokens(vocab);
  if (Status s = apply_model_specific_attributes(gguf, vocab); !s) return s.error();
  build_byte_fallback(vocab);
  return vocab;
}

}  // namespace vela

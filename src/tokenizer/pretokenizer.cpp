#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <array>
#include <vector>

#include "tokenizer/utf8.h"

namespace vela {
namespace {

// The regex lists below are the pre-tokenizer specifications of the models' HF tokenizers, in
// the form the reference GGUF engine applies them (case-insensitive contractions spelled out).

// GPT-2's word splitter; also the second stage of several older multi-regex lists.
constexpr std::string_view kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kSeedCoder =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kBloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
constexpr std::string_view kCjk = "[一-龥ࠀ-一가-퟿]+";
// Cased-letter ranges of the DeepSeek LLM pre-tokenizer, as code points (several of them, e.g.
// U+212A KELVIN SIGN, change under Unicode normalization, so they are not written literally).
constexpr std::string_view kDeepseekLlmLetters =
    R"re(\s?[)re"
    R"re(\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA})re"
    R"re(\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377})re"
    R"re(\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})re"
    R"re(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})re"
    R"re(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B})re"
    R"re(\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})re"
    R"re(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})re"
    R"re(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})re"
    R"re(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC})re"
    R"re(\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115})re"
    R"re(\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139})re"
    R"re(\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B})re"
    R"re(\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B})re"
    R"re(\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})re"
    R"re(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})re"
    R"re(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2})re"
    R"re(\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})re"
    R"re(]+)re";

struct Spec {
  std::vector<std::string_view> names;  // tokenizer.ggml.pre values; the first names the kind
  std::vector<std::string_view> regexes;
  bool ignore_merges = false;
  bool adds_bos = false;
};

const std::array<Spec, 15>& specs() {
  static const std::array<Spec, 15> table = {{
      {{"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       /*ignore_merges=*/true,
       /*adds_bos=*/true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"}, {kQwen2}},
      {{"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es",
        "jina-v2-de", "gigachat", "a.x-4.0", "mellum", "exaone4", "trillion", "granite-docling"},
       {kGpt2}},
      {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"re(\p{N})re", kGpt2}},
      {{"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjk, R"re(\p{N})re"}},
      {{"deepseek-llm"},
       {R"re([\r\n])re", kDeepseekLlmLetters, R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re",
        R"re(\s+$)re", kCjk, R"re(\p{N}+)re"}},
      {{"deepseek-v3"},
       {R"re(\p{N}{1,3})re", "[一-龥぀-ゟ゠-ヿ]+",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"re(\p{N})re"}},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
      {{"tekken"}, {kTekken}, /*ignore_merges=*/true, /*adds_bos=*/true},
      {{"seed-coder"}, {kSeedCoder}},
  }};
  return table;
}

// The Unicode White_Space set (what HF tokenizers and the reference engine mean by \s; PCRE2's
// own \s leaves out U+0085).
constexpr std::string_view kWhiteSpaceSet =
    R"re(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})re";

// Rewrites \s and \S (outside character classes) in terms of kWhiteSpaceSet.
std::string expand_white_space(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceSet) : "[" + std::string(kWhiteSpaceSet) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceSet) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct Pretokenizer::CompiledRegex {
  pcre2_code* code = nullptr;
  bool jit = false;

  ~CompiledRegex() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

Result<std::shared_ptr<const Pretokenizer::CompiledRegex>> compile(std::string_view source) {
  const std::string pattern = expand_white_space(source);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // DOLLAR_ENDONLY: '$' means the end of the piece, as in the reference's ECMAScript regexes.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return make_error("pre-tokenizer regex does not compile at offset " +
                      std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
  }
  auto compiled = std::make_shared<Pretokenizer::CompiledRegex>();
  compiled->code = code;
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Pretokenizer::CompiledRegex>(std::move(compiled));
}

// Splits `piece` by one regex, appending matches and the gaps between them to `out`.
void split_piece(const Pretokenizer::CompiledRegex& regex, std::string_view piece,
                 pcre2_match_data* match, std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  const size_t length = piece.size();
  size_t gap_start = 0;
  size_t search_from = 0;
  while (search_from < length) {
    int rc = pcre2_match(regex.code, subject, length, search_from, 0, match, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && regex.jit) {
      // The JIT stack is small and fixed; the interpreter keeps its backtracking on the heap.
      rc = pcre2_match(regex.code, subject, length, search_from, PCRE2_NO_JIT, match, nullptr);
    }
    if (rc < 0) break;  // no further match (or a resource limit): the rest is one gap
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t begin = ovector[0], end = ovector[1];
    if (end <= begin) {  // empty match: step over one character and keep searching
      search_from = begin + utf8::char_length(piece, begin);
      continue;
    }
    if (begin > gap_start) out.push_back(piece.substr(gap_start, begin - gap_start));
    out.push_back(piece.substr(begin, end - begin));
    gap_start = search_from = end;
  }
  if (gap_start < length) out.push_back(piece.substr(gap_start));
}

}  // namespace

Result<Pretokenizer> Pretokenizer::create(std::string_view pre_name) {
  const std::string_view name = pre_name.empty() ? "default" : pre_name;
  for (const Spec& spec : specs()) {
    bool found = false;
    for (std::string_view n : spec.names) found = found || n == name;
    if (!found) continue;
    Pretokenizer p;
    p.kind_name_ = std::string(spec.names.front());
    p.ignore_merges_ = spec.ignore_merges;
    p.adds_bos_ = spec.adds_bos;
    for (std::string_view source : spec.regexes) {
      auto compiled = compile(source);
      if (!compiled)
        return make_error("pre-tokenizer '" + std::string(name) + "': " + compiled.message());
      p.regexes_.push_back(std::move(*compiled));
    }
    return p;
  }
  return make_error("unknown pre-tokenizer '" + std::string(pre_name) +
                    "' (tokenizer.ggml.pre); supported: " + supported_names());
}

std::string Pretokenizer::supported_names() {
  std::string out;
  for (const Spec& spec : specs()) {
    for (std::string_view n : spec.names) {
      if (!out.empty()) out += ", ";
      out += n;
    }
  }
  return out;
}

void Pretokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (text.empty()) return;
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  if (!match) {  // out of memory: keep the text whole rather than fail
    words.push_back(text);
    return;
  }
  std::vector<std::string_view> current{text}, next;
  for (const auto& regex : regexes_) {
    next.clear();
    for (std::string_view piece : current) split_piece(*regex, piece, match, next);
    current.swap(next);
  }
  pcre2_match_data_free(match);
  words.insert(words.end(), current.begin(), current.end());
}

}  // namespace vela

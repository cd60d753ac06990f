// libFuzzer target: hostile text through encode and hostile token ids through decode and the
// streaming detokenizer, for each tokenizer family of the shared vocabularies (SentencePiece,
// byte-level BPE of several pre-tokenizers); the built-in vocabulary when the data is absent.
// The first input byte picks the tokenizer and the flags.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools_support/builtin_vocab.h"

namespace {

std::vector<vela::Tokenizer> load_tokenizers() {
  std::vector<vela::Tokenizer> tokenizers;
  const char* env = std::getenv("VELA_SHARED_DIR");
  const std::filesystem::path shared = env != nullptr ? env : VELA_SHARED_DIR_DEFAULT;
  for (const char* name :
       {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf",
        "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-falcon.gguf", "ggml-vocab-starcoder.gguf"}) {
    const std::filesystem::path path = shared / "vocab" / name;
    if (!std::filesystem::exists(path)) continue;
    auto gguf = vela::GgufFile::open(path.string());
    if (!gguf.ok()) continue;
    auto tokenizer = vela::Tokenizer::from_gguf(gguf.value());
    if (tokenizer.ok()) tokenizers.push_back(std::move(tokenizer).value());
  }
  if (tokenizers.empty()) {
    const std::string path = (std::filesystem::temp_directory_path() / "vela-fuzz-vocab.gguf");
    if (vela::write_builtin_vocab(path).ok()) {
      auto gguf = vela::GgufFile::open(path);
      if (gguf.ok()) {
        auto tokenizer = vela::Tokenizer::from_gguf(gguf.value());
        if (tokenizer.ok()) tokenizers.push_back(std::move(tokenizer).value());
      }
    }
  }
  if (tokenizers.empty()) std::abort();  // nothing to fuzz: a broken setup, not a finding
  return tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<vela::Tokenizer> tokenizers = load_tokenizers();
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const vela::Tokenizer& tokenizer = tokenizers[selector % tokenizers.size()];
  const bool add_special = (selector & 0x40) != 0;
  const bool parse_special = (selector & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<int32_t> ids = tokenizer.encode(text, add_special, parse_special);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tokenizer.n_vocab()) std::abort();  // encode produced an invalid id
  }
  (void)tokenizer.decode(ids, /*skip_special=*/true);
  (void)tokenizer.decode(ids, /*skip_special=*/false);

  // The same bytes read as token ids, out-of-range and negative ones included.
  std::vector<int32_t> raw_ids((size - 1) / sizeof(int32_t));
  if (!raw_ids.empty()) std::memcpy(raw_ids.data(), data + 1, raw_ids.size() * sizeof(int32_t));
  (void)tokenizer.decode(raw_ids, (selector & 1) != 0);
  vela::StreamingDetokenizer detokenizer(tokenizer);
  for (const int32_t id : raw_ids) {
    (void)detokenizer.push(id);
    (void)tokenizer.token_text(id);
    (void)tokenizer.is_eog(id);
  }
  (void)detokenizer.flush();
  return 0;
}

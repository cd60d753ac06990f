#pragma once
// Pre-tokenizer of byte-level BPE vocabularies: splits raw text into words before BPE runs on
// each word. tokenizer.ggml.pre names a list of regexes; each regex in turn splits every piece
// produced so far into its matches and the unmatched gaps between them (gaps are kept as words
// too), exactly as the reference engine does. Regexes run in PCRE2 with UTF and Unicode
// properties; \s means the Unicode White_Space set. Invalid UTF-8 never matches a regex, so it
// ends up in gaps and is still encoded byte by byte.
// Thread-safety: immutable after create(); split() is const and safe to call concurrently.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace vela {

class Pretokenizer {
 public:
  // An unknown name is an error that lists the supported ones. An empty name (older files
  // without tokenizer.ggml.pre) selects "default"; the caller should warn about it.
  static Result<Pretokenizer> create(std::string_view pre_name);
  static std::string supported_names();  // comma-separated, for messages and docs

  std::string_view kind_name() const { return kind_name_; }
  // Whether a word that is itself a vocabulary token skips the merges (llama3-style BPE).
  bool ignore_merges() const { return ignore_merges_; }
  // Whether BOS is added when tokenizer.ggml.add_bos_token is absent.
  bool adds_bos_by_default() const { return adds_bos_; }

  // Appends the words of `text` to `words` as views into `text`; together they cover it exactly.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

  struct CompiledRegex;  // PCRE2 code; defined in pretokenizer.cpp

 private:
  std::string kind_name_;
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
  std::vector<std::shared_ptr<const CompiledRegex>> regexes_;
};

}  // namespace vela

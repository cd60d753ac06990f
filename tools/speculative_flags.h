#pragma once
// The speculative-decoding flags `vela generate`, `vela serve` and `vela bench` share:
// --speculative-method, --draft-model, --num-speculative-tokens, --prompt-lookup-min/max,
// --no-spec-adaptive, --speculative-draft-vocab.
// Free functions; no state.
#include <string>
#include <vector>

#include "cli_args.h"
#include "vela/result.h"

namespace vela::cli {

struct SpeculativeFlags {
  std::string method = "none";
  std::string draft_model;
  int32_t num_speculative_tokens = 4;
  int32_t prompt_lookup_min = 1;
  int32_t prompt_lookup_max = 4;
  bool adaptive = true;
  int64_t draft_vocab = 0;
};

// Declares the flags on `args`, under the heading "Speculative decoding".
void add_speculative_flags(Args& args);
// Reads them; a malformed value is an error naming the flag (ranges are checked by the engine).
Result<SpeculativeFlags> read_speculative_flags(const Args& args);

// Copies them into EngineOptions or LLMConfig (the fields have the same names).
template <class Options>
void apply_speculative_flags(const SpeculativeFlags& f, Options& o) {
  o.speculative_method = f.method;
  o.draft_model_path = f.draft_model;
  o.num_speculative_tokens = f.num_speculative_tokens;
  o.prompt_lookup_min = f.prompt_lookup_min;
  o.prompt_lookup_max = f.prompt_lookup_max;
  o.speculative_adaptive = f.adaptive;
  o.speculative_draft_vocab = f.draft_vocab;
}

}  // namespace vela::cli

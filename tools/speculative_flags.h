#pragma once
// The speculative-decoding flags `vela generate`, `vela serve` and `vela bench` share:
// --speculative-method, --draft-model, --num-speculative-tokens, --prompt-lookup-min/max,
// --no-spec-adaptive.
// Free functions; no state.
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
};

// Appends the flags' declarations to `flags`.
void add_speculative_flags(std::vector<Flag>& flags);
// Reads them; a malformed value is an error naming the flag (ranges are checked by the engine).
Result<SpeculativeFlags> read_speculative_flags(const Args& args);

}  // namespace vela::cli

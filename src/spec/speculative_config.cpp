#include "spec/speculative_config.h"

#include <string>

namespace vela {

Result<SpecMethod> parse_spec_method(std::string_view name) {
  if (name == "ngram") return SpecMethod::kNgram;
  if (name == "none") return SpecMethod::kNone;
  if (name == "draft") return SpecMethod::kDraft;
  // vLLM's per-family names of the same method are accepted too.
  if (name == "mtp" || name == "deepseek_mtp" || name == "qwen3_next_mtp" || name == "glm4_moe_mtp")
    return SpecMethod::kMtp;
  if (name == "eagle3") return SpecMethod::kEagle3;
  return make_error("unknown speculative method '" + std::string(name) +
                    "' (expected ngram, draft, mtp, eagle3 or none)");
}

std::string_view spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kDraft:
      return "draft";
    case SpecMethod::kMtp:
      return "mtp";
    case SpecMethod::kEagle3:
      return "eagle3";
    case SpecMethod::kNone:
      break;
  }
  return "none";
}

Status validate(const SpeculativeConfig& c) {
  if (!c.enabled()) return {};
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
    return make_error("the number of speculative tokens must be in [1, " +
                      std::to_string(kMaxSpeculativeTokens) + "], got " +
                      std::to_string(c.num_speculative_tokens));
  if (c.prompt_lookup_min < 1)
    return make_error("prompt-lookup-min must be at least 1, got " +
                      std::to_string(c.prompt_lookup_min));
  if (c.prompt_lookup_max < c.prompt_lookup_min || c.prompt_lookup_max > 64)
    return make_error(
        "prompt-lookup-max must be in [prompt-lookup-min = " + std::to_string(c.prompt_lookup_min) +
        ", 64], got " + std::to_string(c.prompt_lookup_max));
  if (c.draft_vocab < 0)
    return make_error(
        "speculative-draft-vocab must be at least 0 (0 = the whole vocabulary), got " +
        std::to_string(c.draft_vocab));
  if (c.draft_vocab > 0 && c.method != SpecMethod::kMtp)
    return make_error("speculative-draft-vocab applies to the mtp method, not '" +
                      std::string(spec_method_name(c.method)) + "'");
  return {};
}

}  // namespace vela

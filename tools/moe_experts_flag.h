#pragma once
// The --moe-experts flag of the commands that load a model (`vela generate`, `vela serve`,
// `vela bench`): where a mixture of experts' routed experts live (engine/expert_placement.h).
// Free functions; no state.
#include <string>

#include "cli_args.h"
#include "engine/expert_placement.h"
#include "vela/result.h"

namespace vela::cli {

inline constexpr const char* kMoeExpertsHelp =
    "mixture-of-experts weights: mapped (left in the file mapping, paged in on use: a model "
    "larger than memory runs), repacked (into memory, faster) or auto (default: mapped only when "
    "the model plus the KV cache would not fit)";

// The flag's value, checked; "auto" when absent.
inline Result<std::string> read_moe_experts(const Args& args) {
  const std::string value = args.get("moe-experts", "auto");
  if (auto placement = parse_expert_placement(value); !placement)
    return make_error("vela: --moe-experts: " + placement.message());
  return value;
}

}  // namespace vela::cli

#pragma once
// Where a mixture of experts' routed-expert matrices live after load: left in the file mapping
// (the row-major kernels read them there and the kernel pages them in on use, so a model larger
// than memory runs), or repacked into owned memory in the layout the int8 kernels prefer
// (faster, but resident). `auto` maps them only when the whole model plus the KV cache would not
// fit in the memory the memory guard reads (cgroup limit, MemAvailable).
// Free functions; no shared state.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/memory_guard.h"
#include "util/result.h"

namespace vela {

enum class ExpertPlacement { kAuto, kMapped, kRepacked };

// "auto", "mapped" or "repacked"; anything else is an error listing the three.
Result<ExpertPlacement> parse_expert_placement(std::string_view name);
const char* expert_placement_name(ExpertPlacement placement);

// What kAuto resolves to: kMapped when the file has routed experts and kv_bytes + file_bytes
// exceed the cgroup limit or MemAvailable, kRepacked otherwise. kMapped and kRepacked are kept.
ExpertPlacement choose_expert_placement(ExpertPlacement requested, uint64_t kv_bytes,
                                        uint64_t file_bytes, uint64_t expert_bytes,
                                        const MemoryLimits& limits);

// The weights' resident bytes under a resolved placement: mapped experts are paged in on use and
// dropped under pressure, so they are not counted.
uint64_t resident_weight_bytes(ExpertPlacement resolved, uint64_t file_bytes,
                               uint64_t expert_bytes);

// One line for the log: the choice auto made and the numbers it compared.
std::string describe_expert_choice(ExpertPlacement resolved, uint64_t kv_bytes, uint64_t file_bytes,
                                   uint64_t expert_bytes, const MemoryLimits& limits);

}  // namespace vela

#pragma once
// Refuses an engine whose memory cannot fit: the KV cache (allocated up front) plus the model's
// weights against the memory the system has available (MemAvailable) and the cgroup's limit
// (cgroup v2 memory.max, or v1 memory.limit_in_bytes: the lowest of this process's cgroup and its
// ancestors). Starting anyway would end in the OOM killer under load, instead of a clear message
// at start.
// Free functions; no shared state.
#include <cstdint>
#include <optional>
#include <string>

#include "util/result.h"

namespace vela {

struct MemoryLimits {
  std::optional<uint64_t> mem_available;  // bytes, /proc/meminfo
  std::optional<uint64_t> cgroup_limit;   // bytes; none when unlimited or unknown
};

// What this process may use now, read from /proc and /sys/fs/cgroup.
MemoryLimits read_memory_limits();

// An error naming every number when kv_bytes + weight_bytes exceed a limit. weight_bytes: what
// stays resident (experts_mapped: the weights other than the mapped experts).
// mappable_expert_bytes > 0: the routed experts counted in weight_bytes, which --moe-experts
// mapped would leave in the file mapping; the refusal then names that choice.
Status check_memory_budget(uint64_t kv_bytes, uint64_t weight_bytes, const MemoryLimits& limits,
                           uint64_t mappable_expert_bytes = 0, bool experts_mapped = false);

}  // namespace vela

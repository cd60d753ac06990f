#include "engine/expert_placement.h"

#include <cstdio>

namespace vela {
namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

}  // namespace

Result<ExpertPlacement> parse_expert_placement(std::string_view name) {
  if (name == "auto") return ExpertPlacement::kAuto;
  if (name == "mapped") return ExpertPlacement::kMapped;
  if (name == "repacked") return ExpertPlacement::kRepacked;
  return make_error("the experts' placement must be mapped, repacked or auto, got '" +
                    std::string(name) + "'");
}

const char* expert_placement_name(ExpertPlacement placement) {
  switch (placement) {
    case ExpertPlacement::kAuto:
      return "auto";
    case ExpertPlacement::kMapped:
      return "mapped";
    case ExpertPlacement::kRepacked:
      return "repacked";
  }
  return "?";
}

ExpertPlacement choose_expert_placement(ExpertPlacement requested, uint64_t kv_bytes,
                                        uint64_t file_bytes, uint64_t expert_bytes,
                                        const MemoryLimits& limits) {
  if (requested != ExpertPlacement::kAuto) return requested;
  if (expert_bytes == 0) return ExpertPlacement::kRepacked;  // nothing to map
  const bool fits = check_memory_budget(kv_bytes, file_bytes, limits).ok();
  return fits ? ExpertPlacement::kRepacked : ExpertPlacement::kMapped;
}

uint64_t resident_weight_bytes(ExpertPlacement resolved, uint64_t file_bytes,
                               uint64_t expert_bytes) {
  if (resolved != ExpertPlacement::kMapped) return file_bytes;
  return file_bytes > expert_bytes ? file_bytes - expert_bytes : 0;
}

std::string describe_expert_choice(ExpertPlacement resolved, uint64_t kv_bytes, uint64_t file_bytes,
                                   uint64_t expert_bytes, const MemoryLimits& limits) {
  std::string limit;
  if (limits.cgroup_limit) limit = "the cgroup limit (" + gib(*limits.cgroup_limit) + ")";
  if (limits.mem_available)
    limit += (limit.empty() ? "" : " and ") + std::string("MemAvailable (") +
             gib(*limits.mem_available) + ")";
  if (limit.empty()) limit = "memory (no limit known)";
  const bool mapped = resolved == ExpertPlacement::kMapped;
  return std::string("--moe-experts auto: experts ") +
         (mapped ? "mapped (kept in the file mapping, paged in on use)" : "repacked into memory") +
         ": the model (" + gib(file_bytes) + ", experts " + gib(expert_bytes) +
         ") plus the KV cache (" + gib(kv_bytes) + ") " + (mapped ? "would not fit" : "fit") +
         " in " + limit;
}

}  // namespace vela

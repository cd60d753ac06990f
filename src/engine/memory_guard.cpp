#include "engine/memory_guard.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>

#include "engine/engine_factory.h"

namespace vela {

namespace {

// A cgroup limit file's number; none for "max" (v2) or v1's "no limit" (a huge value).
std::optional<uint64_t> read_limit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
    return std::nullopt;
  const uint64_t value = std::stoull(text);
  if (value >= (uint64_t(1) << 62)) return std::nullopt;
  return value;
}

// This process's cgroup path ("/a/b") in the hierarchy whose /proc/self/cgroup line starts with
// `prefix` ("0::" for v2, or a v1 line's controller field ":memory:"), or empty.
std::string cgroup_path(std::string_view prefix, bool v1) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (!v1 && line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    if (const size_t at = line.find(prefix); v1 && at != std::string::npos)
      return line.substr(at + prefix.size());
  }
  return "";
}

// The lowest limit in `file` of the cgroup at `path` below `root` and its ancestors (a parent's
// limit binds its children too), or none.
std::optional<uint64_t> lowest_limit_along(const std::string& root, std::string path,
                                           const std::string& file) {
  std::optional<uint64_t> lowest;
  while (!path.empty() && path != "/") {
    if (const auto limit = read_limit(root + path + "/" + file))
      lowest = lowest ? std::min(*lowest, *limit) : *limit;
    path.resize(path.rfind('/'));
  }
  return lowest;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

}  // namespace

MemoryLimits read_memory_limits() {
  MemoryLimits limits;
  limits.mem_available = mem_available_bytes();
  std::optional<uint64_t> limit =
      lowest_limit_along("/sys/fs/cgroup", cgroup_path("0::", false), "memory.max");
  if (!limit) limit = read_limit("/sys/fs/cgroup/memory.max");  // a container's own root
  if (!limit)  // v1: this process's memory cgroup (":memory:/path"), then the hierarchy's root
    limit = lowest_limit_along("/sys/fs/cgroup/memory", cgroup_path(":memory:", true),
                               "memory.limit_in_bytes");
  if (!limit) limit = read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  limits.cgroup_limit = limit;
  return limits;
}

Status check_memory_budget(uint64_t kv_bytes, uint64_t weight_bytes, const MemoryLimits& limits,
                           uint64_t mappable_expert_bytes, bool experts_mapped) {
  const uint64_t need = kv_bytes + weight_bytes;
  auto refuse = [&](const char* what, uint64_t have) {
    std::string hint;
    if (mappable_expert_bytes > 0)
      hint = "; --moe-experts mapped keeps the experts (" + gib(mappable_expert_bytes) +
             ") in the file mapping, leaving " + gib(need - mappable_expert_bytes) + " resident";
    return make_error(
        "not enough memory: the KV cache (" + gib(kv_bytes) + ", " + std::to_string(kv_bytes) +
        " bytes) plus the weights" + (experts_mapped ? " other than the mapped experts" : "") +
        " (" + gib(weight_bytes) + ", " + std::to_string(weight_bytes) + " bytes) need " +
        gib(need) + ", more than " + what + " (" + gib(have) + ", " + std::to_string(have) +
        " bytes); lower --kv-cache-bytes / --kv-cache-fraction, "
        "or --max-num-seqs / --ctx-size" +
        hint);
  };
  if (limits.cgroup_limit && need > *limits.cgroup_limit)
    return refuse("the cgroup's memory limit", *limits.cgroup_limit);
  if (limits.mem_available && need > *limits.mem_available)
    return refuse("the memory available (MemAvailable)", *limits.mem_available);
  return {};
}

}  // namespace vela

#include "engine/memory_guard.h"

#include <cstdio>
#include <fstream>
#include <sstream>

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

// This process's cgroup path below the v2 hierarchy ("0::/path"), or empty.
std::string cgroup_v2_path() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
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
  const std::string v2 = cgroup_v2_path();
  std::optional<uint64_t> limit;
  if (!v2.empty()) limit = read_limit("/sys/fs/cgroup" + v2 + "/memory.max");
  if (!limit) limit = read_limit("/sys/fs/cgroup/memory.max");  // a container's own root
  if (!limit) limit = read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  limits.cgroup_limit = limit;
  return limits;
}

Status check_memory_budget(uint64_t kv_bytes, uint64_t weight_bytes, const MemoryLimits& limits) {
  const uint64_t need = kv_bytes + weight_bytes;
  auto refuse = [&](const char* what, uint64_t have) {
    return make_error("not enough memory: the KV cache (" + gib(kv_bytes) + ", " +
                      std::to_string(kv_bytes) + " bytes) plus the weights (" + gib(weight_bytes) +
                      ", " + std::to_string(weight_bytes) + " bytes) need " + gib(need) +
                      ", more than " + what + " (" + gib(have) + ", " + std::to_string(have) +
                      " bytes); lower --kv-cache-bytes / --kv-cache-fraction, or --max-num-seqs "
                      "/ --ctx-size");
  };
  if (limits.cgroup_limit && need > *limits.cgroup_limit)
    return refuse("the cgroup's memory limit", *limits.cgroup_limit);
  if (limits.mem_available && need > *limits.mem_available)
    return refuse("the memory available (MemAvailable)", *limits.mem_available);
  return {};
}

}  // namespace vela

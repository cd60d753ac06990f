#include "server/server_context.h"

#include <cstdio>

namespace vela::server {

std::string ServerContext::make_id(const char* prefix) {
  // A 64-bit mix (splitmix64) of salt and counter: distinct per request, no visible sequence.
  uint64_t z = id_salt + 0x9e3779b97f4a7c15ull * ++id_counter;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s-%016llx%08llx", prefix, static_cast<unsigned long long>(z),
                static_cast<unsigned long long>(id_counter & 0xffffffffull));
  return buf;
}

}  // namespace vela::server

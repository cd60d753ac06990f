#include "kv/block_hash.h"

#include <random>

namespace vela {
namespace {

// A strong 64-bit finaliser (good avalanche): every input bit affects every output bit.
inline uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockHasher::BlockHasher() {
  std::random_device rd;
  key_ = (uint64_t(rd()) << 32) ^ rd();
}

uint64_t BlockHasher::hash(uint64_t parent, std::span<const int32_t> tokens) const {
  uint64_t h = mix(key_ ^ mix(parent + 0x9e3779b97f4a7c15ull));
  for (int32_t t : tokens) h = mix(h ^ (uint64_t(uint32_t(t)) + 0x9e3779b97f4a7c15ull));
  h = mix(h ^ tokens.size());
  return h == 0 ? 1 : h;  // 0 is reserved for "no parent"
}

}  // namespace vela

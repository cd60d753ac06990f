#pragma once
// Chained hashes of full KV blocks for prefix caching: a block's hash covers its own tokens and,
// through the parent hash, every token before it, so equal hashes mean equal prefixes. The hash
// is keyed with a per-process random key, so clients cannot craft colliding prompts.
// Thread-safety: immutable after construction.
#include <cstdint>
#include <span>

namespace vela {

class BlockHasher {
 public:
  BlockHasher();  // random key
  explicit BlockHasher(uint64_t key) : key_(key) {}

  static constexpr uint64_t kNoParent = 0;
  // tokens: [block_size] the block's token ids.
  uint64_t hash(uint64_t parent, std::span<const int32_t> tokens) const;

 private:
  uint64_t key_;
};

}  // namespace vela

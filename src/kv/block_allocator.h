#pragma once
// Hands out KV blocks from a fixed pool: a request gets all the blocks it asks for or none.
// Thread-safety: not synchronised; owned by one engine thread.
#include <cstdint>
#include <span>
#include <vector>

namespace vela {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t n_blocks);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }

  // Appends n block ids to `out` and returns true, or returns false and changes nothing.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  void release(std::span<const int32_t> blocks);

 private:
  int32_t n_blocks_;
  std::vector<int32_t> free_;      // LIFO free list
  std::vector<uint8_t> in_use_;    // [n_blocks], guards against double release
};

}  // namespace vela

#include "kv/block_allocator.h"

#include <cassert>

namespace vela {

BlockAllocator::BlockAllocator(int32_t n_blocks) : n_blocks_(n_blocks), in_use_(size_t(n_blocks), 0) {
  free_.reserve(size_t(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool BlockAllocator::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n < 0 || n > n_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    in_use_[size_t(b)] = 1;
    out.push_back(b);
  }
  return true;
}

void BlockAllocator::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    assert(b >= 0 && b < n_blocks_ && in_use_[size_t(b)]);
    in_use_[size_t(b)] = 0;
    free_.push_back(b);
  }
}

}  // namespace vela

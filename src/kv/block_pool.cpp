#include "kv/block_pool.h"

#include <cassert>

namespace vela {

BlockPool::BlockPool(int32_t n_blocks, bool enable_prefix_caching)
    : prefix_caching_(enable_prefix_caching), blocks_(size_t(n_blocks)) {
  for (int32_t b = 0; b < n_blocks; ++b) queue_push_back(b);
}

void BlockPool::queue_push_back(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  assert(!blk.in_queue);
  blk.prev = tail_;
  blk.next = kNone;
  if (tail_ != kNone)
    blocks_[size_t(tail_)].next = b;
  else
    head_ = b;
  tail_ = b;
  blk.in_queue = true;
  ++n_free_;
}

void BlockPool::queue_remove(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  assert(blk.in_queue);
  if (blk.prev != kNone)
    blocks_[size_t(blk.prev)].next = blk.next;
  else
    head_ = blk.next;
  if (blk.next != kNone)
    blocks_[size_t(blk.next)].prev = blk.prev;
  else
    tail_ = blk.prev;
  blk.prev = blk.next = kNone;
  blk.in_queue = false;
  --n_free_;
}

void BlockPool::drop_hash(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (!blk.has_hash) return;
  auto it = by_hash_.find(blk.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  blk.has_hash = false;
}

bool BlockPool::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n < 0 || n > n_free_) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = head_;
    queue_remove(b);
    if (blocks_[size_t(b)].has_hash) {
      ++evictions_;
      drop_hash(b);
    }
    blocks_[size_t(b)].ref_count = 1;
    out.push_back(b);
  }
  return true;
}

void BlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    Block& blk = blocks_[size_t(b)];
    assert(blk.ref_count > 0);
    if (--blk.ref_count == 0) queue_push_back(b);
  }
}

std::optional<int32_t> BlockPool::lookup(uint64_t hash, bool count) {
  if (!prefix_caching_) return std::nullopt;
  queries_ += count;
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  hits_ += count;
  return it->second;
}

void BlockPool::count_lookups(uint64_t queries, uint64_t hits) {
  queries_ += queries;
  hits_ += hits;
}

void BlockPool::touch(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (blk.ref_count == 0) queue_remove(b);
  ++blk.ref_count;
}

void BlockPool::cache(int32_t b, uint64_t hash) {
  if (!prefix_caching_) return;
  Block& blk = blocks_[size_t(b)];
  if (blk.has_hash) return;
  if (!by_hash_.emplace(hash, b).second) return;
  blk.has_hash = true;
  blk.hash = hash;
}

BlockPoolUsage BlockPool::usage() const {
  BlockPoolUsage u;
  u.total = n_blocks();
  for (const Block& b : blocks_) {
    if (b.ref_count > 0)
      ++u.used;
    else if (b.has_hash)
      ++u.cached;
    else
      ++u.empty;
  }
  u.prefix_queries = queries_;
  u.prefix_hits = hits_;
  u.evictions = evictions_;
  return u;
}

std::string BlockPool::check_invariants() const {
  int32_t queued = 0;
  int32_t prev = kNone;
  for (int32_t b = head_; b != kNone; b = blocks_[size_t(b)].next) {
    const Block& blk = blocks_[size_t(b)];
    if (!blk.in_queue) return "block " + std::to_string(b) + " linked but not marked queued";
    if (blk.ref_count != 0) return "queued block " + std::to_string(b) + " has references";
    if (blk.prev != prev) return "broken back link at block " + std::to_string(b);
    prev = b;
    if (++queued > n_blocks()) return "free queue has a cycle";
  }
  if (prev != tail_) return "tail does not end the queue";
  if (queued != n_free_)
    return "free count " + std::to_string(n_free_) + " != queue length " + std::to_string(queued);
  for (int32_t b = 0; b < n_blocks(); ++b) {
    const Block& blk = blocks_[size_t(b)];
    if (blk.ref_count < 0) return "negative reference count";
    if ((blk.ref_count == 0) != blk.in_queue)
      return "block " + std::to_string(b) + " queue state disagrees with refs";
    if (blk.has_hash) {
      auto it = by_hash_.find(blk.hash);
      if (it == by_hash_.end() || it->second != b)
        return "hashed block " + std::to_string(b) + " not in the map";
    }
  }
  for (const auto& [hash, b] : by_hash_)
    if (!blocks_[size_t(b)].has_hash || blocks_[size_t(b)].hash != hash)
      return "map entry points at a block without it";
  return "";
}

}  // namespace vela

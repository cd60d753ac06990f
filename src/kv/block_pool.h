#pragma once
// The pool of KV-cache blocks: reference counts, all-or-none allocation, and the prefix cache.
//
// A block is in one of three states:
//   in use   — ref_count > 0 (one or more requests' block tables hold it);
//   cached   — ref_count == 0 but it still holds a full block's K/V and is findable by its hash;
//   empty    — ref_count == 0, no hash.
// Cached and empty blocks sit together in one free queue in eviction order (least recently
// freed first): allocation takes from the front and drops a cached block's hash (eviction), a
// prefix-cache hit revives a cached block wherever it is (touch). All operations are O(1) per
// block except the hash lookup (hash map).
// Thread-safety: not synchronised; the engine thread owns it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace vela {

struct BlockPoolUsage {
  int32_t total = 0;
  int32_t used = 0;    // referenced by at least one request
  int32_t cached = 0;  // unreferenced but holding reusable K/V
  int32_t empty = 0;
  uint64_t prefix_queries = 0;  // blocks looked up
  uint64_t prefix_hits = 0;     // blocks found
  uint64_t evictions = 0;       // cached blocks whose contents were given up
};

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, bool enable_prefix_caching);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Blocks an allocation can take now (empty + cached).
  int32_t n_free() const { return n_free_; }
  bool prefix_caching() const { return prefix_caching_; }

  // Appends n fresh blocks (ref_count 1, no hash) to `out`; all or none.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // Drops one reference of each block, in the given order: blocks reaching zero join the back
  // of the free queue (kept findable if they carry a hash). Callers free a request's blocks
  // last-first, so a sequence's tail is evicted before its shared head.
  void release(std::span<const int32_t> blocks);

  // Prefix cache. lookup() counts a query (and a hit) unless told not to; touch() takes a
  // reference on a found block, reviving it from the free queue if unreferenced.
  std::optional<int32_t> lookup(uint64_t hash, bool count = true);
  // Counts lookups made uncounted, once the caller knows which of the hits it uses.
  void count_lookups(uint64_t queries, uint64_t hits);
  void touch(int32_t block);
  // Records that a full block holds the K/V for `hash` (no-op when caching is off or the hash
  // is already mapped to another block — the first copy stays canonical).
  void cache(int32_t block, uint64_t hash);

  int32_t ref_count(int32_t block) const { return blocks_[size_t(block)].ref_count; }
  BlockPoolUsage usage() const;

  // For tests: checks every internal invariant; returns "" or a description of what is wrong.
  std::string check_invariants() const;

 private:
  static constexpr int32_t kNone = -1;
  struct Block {
    int32_t ref_count = 0;
    int32_t prev = kNone;  // free-queue links (only while ref_count == 0)
    int32_t next = kNone;
    bool in_queue = false;
    bool has_hash = false;
    uint64_t hash = 0;
  };

  void queue_push_back(int32_t b);
  void queue_remove(int32_t b);
  void drop_hash(int32_t b);

  bool prefix_caching_;
  std::vector<Block> blocks_;
  int32_t head_ = kNone;  // next to evict / allocate
  int32_t tail_ = kNone;
  int32_t n_free_ = 0;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  uint64_t queries_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace vela

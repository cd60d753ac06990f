#pragma once
// Maps requests' tokens onto KV blocks: finds the cached prefix of a new request, allocates
// slots for the tokens a step will compute (all or nothing, so the scheduler can preempt),
// registers blocks as they fill up so later requests can share them, and frees a request.
//
// Layer groups (vLLM's hybrid cache manager): a model whose layers attend through different
// sliding windows keeps its attention layers in groups of one window each (kv_cache.h), and a
// sequence holds a block per group at every block position. A windowed group's blocks that slid
// wholly out of the window go back to the pool (release_out_of_window), still findable by their
// hash until evicted; a cached prefix is reused where every global group has all of its blocks and
// every windowed group the blocks its window needs.
//
// For a model with recurrent layers it also gives each running sequence a state slot (taken with
// its first blocks, all or none, and given back with them). Such a sequence's state covers
// exactly the tokens it computed (truncating its blocks leaves the state to the caller), and a
// cached prefix is of use only up to a state checkpoint (state_checkpoints.h): the longest prefix
// of cached blocks that ends where a checkpoint was taken is reused, and the checkpoint's state
// restored into the slot.
// Thread-safety: not synchronised; the engine thread owns it (with the pool).
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/state_checkpoints.h"
#include "kv/state_slot_pool.h"

namespace vela {

// A request's view of its KV blocks.
struct KvSequence {
  // Block tables, position-major: group g's block for token p is blocks[p / block_size *
  // n_groups + g]; -1 where a windowed group's block slid out of the window.
  std::vector<int32_t> blocks;
  std::vector<uint64_t>
      block_hashes;             // chained hashes of the full blocks of the token list known so far
  int32_t n_cached_blocks = 0;  // leading block positions already registered with the pool
  int32_t state_slot = -1;      // recurrent-state slot while it holds blocks (recurrent models)
  // A checkpoint slot whose state the sequence's slot must take before its next pass (its cached
  // prefix ends there), or -1.
  int32_t restore_from = -1;
};

// A recurrent state to save during a pass: the state after a sequence's first `position` tokens
// into checkpoint slot `slot`.
struct PlannedCheckpoint {
  int32_t position = 0;
  int32_t slot = 0;
};

class KvCacheManager {
 public:
  // state_slots: the recurrent-state slots of a model with recurrent layers, else null;
  // checkpoints: where its prefixes' states are saved (null or disabled: no prefix reuse);
  // group_windows: each layer group's sliding window (0: global; empty: one global group).
  KvCacheManager(BlockPool& pool, int32_t block_size, StateSlotPool* state_slots = nullptr,
                 StateCheckpoints* checkpoints = nullptr, std::vector<int32_t> group_windows = {});

  int32_t block_size() const { return block_size_; }
  int32_t n_groups() const { return int32_t(windows_.size()); }
  BlockPool& pool() { return pool_; }
  const StateSlotPool* state_slots() const { return state_slots_; }

  // For a request with no blocks yet: takes references on the longest run of cached full blocks
  // that prefixes `tokens`, capped so at least the last token is left to compute (it must
  // produce logits). Returns how many tokens are already computed.
  int32_t acquire_cached_prefix(std::span<const int32_t> tokens, KvSequence& seq);

  // Ensures blocks for the first n_tokens positions, and a state slot for a recurrent model; all
  // or none.
  bool allocate(KvSequence& seq, int32_t n_tokens);

  // Registers every block fully covered by the first n_computed tokens with the prefix cache.
  void cache_full_blocks(std::span<const int32_t> tokens, int32_t n_computed, KvSequence& seq);

  // Gives back the windowed groups' blocks no token after the first n_computed can see.
  void release_out_of_window(KvSequence& seq, int32_t n_computed);

  // Recurrent models: the checkpoints a pass computing tokens [n_computed, n_computed + n_new)
  // of `tokens` saves, appended to `out` (slots reserved; the caller commits or cancels them):
  // one at each multiple of the checkpoint interval in (n_computed, n_computed + n_new] whose
  // prefix has none yet.
  void plan_checkpoints(std::span<const int32_t> tokens, int32_t n_computed, int32_t n_new,
                        KvSequence& seq, std::vector<PlannedCheckpoint>& out);

  // Returns the blocks past the first n_tokens positions (rolled-back speculative tokens). They
  // hold no verified full block, so none of them is registered with the prefix cache.
  void truncate(KvSequence& seq, int32_t n_tokens);

  // Drops the request's references, tail first (so its shared head is evicted last), and its
  // state slot.
  void release(KvSequence& seq);

  // Block positions needed to hold n tokens (each a block of every group).
  int32_t blocks_for(int32_t n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }

 private:
  // Extends seq.block_hashes to cover the first n_full full blocks of tokens.
  void hash_blocks(std::span<const int32_t> tokens, int32_t n_full, KvSequence& seq) const;
  // The prefix-cache key of group g's block whose token chain hashes to `hash`.
  static uint64_t group_hash(uint64_t hash, int32_t g);
  // The first block position a windowed group still needs when the next token is at `position`.
  int32_t first_needed(int32_t g, int32_t position) const;
  // Whether a cached prefix of m block positions has every block it needs (lookups uncounted).
  bool prefix_usable(const KvSequence& seq, int32_t m);

  BlockPool& pool_;
  int32_t block_size_;
  StateSlotPool* state_slots_;
  StateCheckpoints* checkpoints_;
  std::vector<int32_t> windows_;  // [n_groups] 0: global
  bool grouped_ = false;          // more than one group
  BlockHasher hasher_;
};

}  // namespace vela

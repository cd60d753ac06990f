#pragma once
// Saved recurrent states of cached prefixes, so that a hybrid model (attention beside recurrent
// layers) can reuse a prefix from the cache: the attention layers' K/V come from the prefix's
// cached blocks, the recurrent layers' state from a checkpoint taken when some sequence had
// computed exactly that prefix. A checkpoint is keyed by the chained hash of the prefix's last
// block (block_hash.h), and held in a state slot of the cache of its own.
//
// Checkpoints are taken every interval_tokens positions; their slots are few (a state can weigh
// as much as thousands of tokens of K/V), so the least recently used one is overwritten first.
// A checkpoint is reserved when a pass is planned, written by the pass, and findable only once
// committed after it.
// Thread-safety: not synchronised; the engine thread owns it (with the block pool).
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace vela {

struct StateCheckpointUsage {
  int32_t slots = 0;
  int32_t held = 0;       // committed checkpoints
  uint64_t hits = 0;      // prefixes resumed from a checkpoint
  uint64_t saved = 0;     // checkpoints committed
  uint64_t replaced = 0;  // committed checkpoints overwritten by newer ones
};

class StateCheckpoints {
 public:
  // Slots [first_slot, first_slot + n_slots) of the cache's state slots.
  StateCheckpoints(int32_t first_slot, int32_t n_slots, int32_t interval_tokens);

  int32_t interval_tokens() const { return interval_tokens_; }
  bool owns(int32_t slot) const {
    return slot >= first_slot_ && slot < first_slot_ + int32_t(entries_.size());
  }
  bool enabled() const { return !entries_.empty() && interval_tokens_ > 0; }

  // The committed checkpoint of the prefix ending with the block of `hash` (counts a hit and
  // makes it the most recently used), or nullopt.
  std::optional<int32_t> find(uint64_t hash);
  // A slot to write the checkpoint of `hash` into: nullopt when that prefix already has one
  // (committed or reserved) or every slot is reserved. Overwrites the least recently used
  // committed checkpoint.
  std::optional<int32_t> reserve(uint64_t hash);
  // The pass that wrote a reserved slot completed: its checkpoint is findable. Or it failed.
  void commit(int32_t slot);
  void cancel(int32_t slot);

  StateCheckpointUsage usage() const;

 private:
  enum class State { kEmpty, kReserved, kReady };
  struct Entry {
    State state = State::kEmpty;
    uint64_t hash = 0;
    uint64_t last_use = 0;
  };
  Entry& entry(int32_t slot) { return entries_[size_t(slot - first_slot_)]; }

  int32_t first_slot_;
  int32_t interval_tokens_;
  std::vector<Entry> entries_;                     // [n_slots]
  std::unordered_map<uint64_t, int32_t> by_hash_;  // reserved and committed checkpoints
  uint64_t clock_ = 0;
  uint64_t hits_ = 0, saved_ = 0, replaced_ = 0;
};

}  // namespace vela

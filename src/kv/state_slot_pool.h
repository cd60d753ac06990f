#pragma once
// The recurrent-state slots of a cache (KvCache::state): a sequence of a model with recurrent
// layers holds one slot while it runs, whatever its length, and gives it back when it finishes or
// is preempted. Slots are handed out lowest id first, so a small batch touches few pages.
// Thread-safety: not synchronised; the engine thread owns it (with the block pool).
#include <cstdint>
#include <optional>
#include <vector>

namespace vela {

class StateSlotPool {
 public:
  explicit StateSlotPool(int32_t n_slots);

  int32_t n_slots() const { return n_slots_; }
  int32_t n_free() const { return int32_t(free_.size()); }
  int32_t n_used() const { return n_slots_ - n_free(); }

  std::optional<int32_t> allocate();
  void release(int32_t slot);

 private:
  int32_t n_slots_;
  std::vector<int32_t> free_;  // [<= n_slots] free slot ids, highest first (taken from the back)
  std::vector<bool> in_use_;   // [n_slots]
};

}  // namespace vela

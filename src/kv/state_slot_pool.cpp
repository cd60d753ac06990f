#include "kv/state_slot_pool.h"

#include <cassert>

namespace vela {

StateSlotPool::StateSlotPool(int32_t n_slots) : n_slots_(n_slots), in_use_(size_t(n_slots)) {
  free_.reserve(size_t(n_slots));
  for (int32_t s = n_slots - 1; s >= 0; --s) free_.push_back(s);
}

std::optional<int32_t> StateSlotPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t slot = free_.back();
  free_.pop_back();
  in_use_[size_t(slot)] = true;
  return slot;
}

void StateSlotPool::release(int32_t slot) {
  assert(slot >= 0 && slot < n_slots_ && in_use_[size_t(slot)]);
  in_use_[size_t(slot)] = false;
  // Keep the list sorted (highest first) so the lowest free slot is reused first.
  auto it = free_.begin();
  while (it != free_.end() && *it > slot) ++it;
  free_.insert(it, slot);
}

}  // namespace vela

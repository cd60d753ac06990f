#include "kv/state_checkpoints.h"

#include <cassert>

namespace vela {

StateCheckpoints::StateCheckpoints(int32_t first_slot, int32_t n_slots, int32_t interval_tokens)
    : first_slot_(first_slot), interval_tokens_(interval_tokens), entries_(size_t(n_slots)) {}

std::optional<int32_t> StateCheckpoints::find(uint64_t hash) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  Entry& e = entry(it->second);
  if (e.state != State::kReady) return std::nullopt;
  e.last_use = ++clock_;
  ++hits_;
  return it->second;
}

std::optional<int32_t> StateCheckpoints::reserve(uint64_t hash) {
  if (by_hash_.count(hash) != 0) return std::nullopt;
  // An empty slot, else the least recently used committed one (a linear scan: slots are few).
  int32_t chosen = -1;
  for (int32_t i = 0; i < int32_t(entries_.size()); ++i) {
    const Entry& e = entries_[size_t(i)];
    if (e.state == State::kEmpty) {
      chosen = i;
      break;
    }
    if (e.state == State::kReady && (chosen < 0 || e.last_use < entries_[size_t(chosen)].last_use))
      chosen = i;
  }
  if (chosen < 0) return std::nullopt;
  Entry& e = entries_[size_t(chosen)];
  if (e.state == State::kReady) {
    by_hash_.erase(e.hash);
    ++replaced_;
  }
  e = {State::kReserved, hash, ++clock_};
  by_hash_[hash] = first_slot_ + chosen;
  return first_slot_ + chosen;
}

void StateCheckpoints::commit(int32_t slot) {
  Entry& e = entry(slot);
  assert(e.state == State::kReserved);
  e.state = State::kReady;
  ++saved_;
}

void StateCheckpoints::cancel(int32_t slot) {
  Entry& e = entry(slot);
  assert(e.state == State::kReserved);
  by_hash_.erase(e.hash);
  e = {};
}

StateCheckpointUsage StateCheckpoints::usage() const {
  StateCheckpointUsage u;
  u.slots = int32_t(entries_.size());
  for (const Entry& e : entries_) u.held += e.state == State::kReady;
  u.hits = hits_;
  u.saved = saved_;
  u.replaced = replaced_;
  return u;
}

}  // namespace vela

#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

namespace vela {

KvCacheManager::KvCacheManager(BlockPool& pool, int32_t block_size, StateSlotPool* state_slots,
                               StateCheckpoints* checkpoints, std::vector<int32_t> group_windows)
    : pool_(pool),
      block_size_(block_size),
      state_slots_(state_slots),
      checkpoints_(checkpoints),
      windows_(group_windows.empty() ? std::vector<int32_t>{0} : std::move(group_windows)),
      grouped_(windows_.size() > 1 || windows_[0] > 0) {}

void KvCacheManager::hash_blocks(std::span<const int32_t> tokens, int32_t n_full,
                                 KvSequence& seq) const {
  for (int32_t b = static_cast<int32_t>(seq.block_hashes.size()); b < n_full; ++b) {
    const uint64_t parent = b == 0 ? BlockHasher::kNoParent : seq.block_hashes[size_t(b - 1)];
    seq.block_hashes.push_back(
        hasher_.hash(parent, tokens.subspan(size_t(b) * size_t(block_size_), size_t(block_size_))));
  }
}

uint64_t KvCacheManager::group_hash(uint64_t hash, int32_t g) {
  if (g == 0) return hash;
  // splitmix64 of the hash offset by the group: another key for each group's copy of a block.
  uint64_t x = hash + 0x9E3779B97F4A7C15ull * uint64_t(g);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int32_t KvCacheManager::first_needed(int32_t g, int32_t position) const {
  const int32_t window = windows_[size_t(g)];
  return window == 0 ? 0 : std::max(0, position - window + 1) / block_size_;
}

bool KvCacheManager::prefix_usable(const KvSequence& seq, int32_t m) {
  for (int32_t g = 0; g < n_groups(); ++g)
    for (int32_t b = first_needed(g, m * block_size_); b < m; ++b)
      if (!pool_.lookup(group_hash(seq.block_hashes[size_t(b)], g), false)) return false;
  return true;
}

int32_t KvCacheManager::acquire_cached_prefix(std::span<const int32_t> tokens, KvSequence& seq) {
  assert(seq.blocks.empty());
  const bool recurrent = state_slots_ != nullptr;
  if (!pool_.prefix_caching() || tokens.empty()) return 0;
  if (recurrent && (checkpoints_ == nullptr || !checkpoints_->enabled())) return 0;
  const int32_t n_candidates = static_cast<int32_t>((tokens.size() - 1) / size_t(block_size_));
  hash_blocks(tokens, n_candidates, seq);
  if (!grouped_ && !recurrent) {  // every block of the run, in order
    for (int32_t b = 0; b < n_candidates; ++b) {
      const auto hit = pool_.lookup(seq.block_hashes[size_t(b)]);
      if (!hit) break;
      pool_.touch(*hit);
      seq.blocks.push_back(*hit);
    }
    seq.n_cached_blocks = static_cast<int32_t>(seq.blocks.size());
    return seq.n_cached_blocks * block_size_;
  }
  // The longest run whose global groups' blocks are all cached, then the longest prefix of it
  // whose windowed groups have the blocks their window needs and, for a recurrent model, that
  // ends at a checkpoint.
  int32_t run = 0;
  for (; run < n_candidates; ++run) {
    bool all = true;
    for (int32_t g = 0; g < n_groups() && all; ++g)
      all = windows_[size_t(g)] > 0 ||
            pool_.lookup(group_hash(seq.block_hashes[size_t(run)], g), false).has_value();
    if (!all) break;
  }
  const int32_t every = recurrent ? checkpoints_->interval_tokens() / block_size_ : 1;
  int32_t keep = 0;
  for (int32_t m = run / every * every; m > 0 && keep == 0; m -= every) {
    if (!prefix_usable(seq, m)) continue;
    if (recurrent) {
      const auto slot = checkpoints_->find(seq.block_hashes[size_t(m - 1)]);
      if (!slot) continue;
      seq.restore_from = *slot;
    }
    keep = m;
  }
  pool_.count_lookups(uint64_t(keep + (keep < n_candidates ? 1 : 0)), uint64_t(keep));
  for (int32_t b = 0; b < keep; ++b)
    for (int32_t g = 0; g < n_groups(); ++g) {
      if (b < first_needed(g, keep * block_size_)) {
        seq.blocks.push_back(-1);
        continue;
      }
      const int32_t block = *pool_.lookup(group_hash(seq.block_hashes[size_t(b)], g), false);
      pool_.touch(block);
      seq.blocks.push_back(block);
    }
  seq.n_cached_blocks = keep;
  return keep * block_size_;
}

bool KvCacheManager::allocate(KvSequence& seq, int32_t n_tokens) {
  const bool need_slot = state_slots_ != nullptr && seq.state_slot < 0;
  if (need_slot && state_slots_->n_free() == 0) return false;
  const int32_t have = static_cast<int32_t>(seq.blocks.size()) / n_groups();
  const int32_t need = (blocks_for(n_tokens) - have) * n_groups();
  if (need > 0 && !pool_.allocate(need, seq.blocks)) return false;
  if (need_slot) seq.state_slot = *state_slots_->allocate();
  return true;
}

void KvCacheManager::cache_full_blocks(std::span<const int32_t> tokens, int32_t n_computed,
                                       KvSequence& seq) {
  if (!pool_.prefix_caching()) return;
  const int32_t n_full =
      std::min(n_computed / block_size_, static_cast<int32_t>(seq.blocks.size()) / n_groups());
  if (n_full <= seq.n_cached_blocks) return;
  hash_blocks(tokens, n_full, seq);
  for (int32_t b = seq.n_cached_blocks; b < n_full; ++b)
    for (int32_t g = 0; g < n_groups(); ++g) {
      const int32_t block = seq.blocks[size_t(b) * size_t(n_groups()) + size_t(g)];
      if (block >= 0) pool_.cache(block, group_hash(seq.block_hashes[size_t(b)], g));
    }
  seq.n_cached_blocks = n_full;
}

void KvCacheManager::release_out_of_window(KvSequence& seq, int32_t n_computed) {
  if (!grouped_) return;
  const int32_t n_positions = static_cast<int32_t>(seq.blocks.size()) / n_groups();
  for (int32_t g = 0; g < n_groups(); ++g) {
    if (windows_[size_t(g)] == 0) continue;
    const int32_t end = std::min(first_needed(g, n_computed), n_positions);
    for (int32_t b = 0; b < end; ++b) {
      int32_t& block = seq.blocks[size_t(b) * size_t(n_groups()) + size_t(g)];
      if (block < 0) continue;
      pool_.release(std::span<const int32_t>(&block, 1));
      block = -1;
    }
  }
}

void KvCacheManager::plan_checkpoints(std::span<const int32_t> tokens, int32_t n_computed,
                                      int32_t n_new, KvSequence& seq,
                                      std::vector<PlannedCheckpoint>& out) {
  if (checkpoints_ == nullptr || !checkpoints_->enabled() || !pool_.prefix_caching()) return;
  const int32_t every = checkpoints_->interval_tokens();
  const int32_t end = n_computed + n_new;
  for (int32_t p = (n_computed / every + 1) * every; p <= end; p += every) {
    hash_blocks(tokens, p / block_size_, seq);
    if (auto slot = checkpoints_->reserve(seq.block_hashes[size_t(p / block_size_ - 1)]))
      out.push_back({p, *slot});
  }
}

void KvCacheManager::truncate(KvSequence& seq, int32_t n_tokens) {
  const size_t keep = size_t(blocks_for(n_tokens)) * size_t(n_groups());
  if (keep >= seq.blocks.size()) return;
  assert(seq.n_cached_blocks <= blocks_for(n_tokens));
  for (size_t i = seq.blocks.size(); i-- > keep;)
    if (seq.blocks[i] >= 0) pool_.release(std::span<const int32_t>(&seq.blocks[i], 1));
  seq.blocks.resize(keep);
}

void KvCacheManager::release(KvSequence& seq) {
  if (!grouped_) {
    std::reverse(seq.blocks.begin(), seq.blocks.end());
    pool_.release(seq.blocks);
  } else {
    for (size_t i = seq.blocks.size(); i-- > 0;)
      if (seq.blocks[i] >= 0) pool_.release(std::span<const int32_t>(&seq.blocks[i], 1));
  }
  seq.blocks.clear();
  seq.n_cached_blocks = 0;
  if (seq.state_slot >= 0) {
    state_slots_->release(seq.state_slot);
    seq.state_slot = -1;
  }
  seq.restore_from = -1;
  // Hashes depend only on tokens: keep them for a re-admission after preemption.
}

}  // namespace vela

#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

namespace vela {

void KvCacheManager::hash_blocks(std::span<const int32_t> tokens, int32_t n_full,
                                 KvSequence& seq) const {
  for (int32_t b = static_cast<int32_t>(seq.block_hashes.size()); b < n_full; ++b) {
    const uint64_t parent = b == 0 ? BlockHasher::kNoParent : seq.block_hashes[size_t(b - 1)];
    seq.block_hashes.push_back(
        hasher_.hash(parent, tokens.subspan(size_t(b) * size_t(block_size_), size_t(block_size_))));
  }
}

int32_t KvCacheManager::acquire_cached_prefix(std::span<const int32_t> tokens, KvSequence& seq) {
  assert(seq.blocks.empty());
  const bool recurrent = state_slots_ != nullptr;
  if (!pool_.prefix_caching() || tokens.empty()) return 0;
  if (recurrent && (checkpoints_ == nullptr || !checkpoints_->enabled())) return 0;
  const int32_t n_candidates = static_cast<int32_t>((tokens.size() - 1) / size_t(block_size_));
  hash_blocks(tokens, n_candidates, seq);
  for (int32_t b = 0; b < n_candidates; ++b) {
    const auto hit = pool_.lookup(seq.block_hashes[size_t(b)], !recurrent);
    if (!hit) break;
    pool_.touch(*hit);
    seq.blocks.push_back(*hit);
  }
  if (recurrent) {  // only as far as the last checkpoint within the hit
    const int32_t every = checkpoints_->interval_tokens() / block_size_;
    const int32_t n_hit = static_cast<int32_t>(seq.blocks.size());
    int32_t keep = 0;
    for (int32_t b = n_hit / every * every; b > 0 && keep == 0; b -= every) {
      if (auto slot = checkpoints_->find(seq.block_hashes[size_t(b - 1)])) {
        keep = b;
        seq.restore_from = *slot;
      }
    }
    std::reverse(seq.blocks.begin() + keep, seq.blocks.end());
    pool_.release(std::span<const int32_t>(seq.blocks).subspan(size_t(keep)));
    seq.blocks.resize(size_t(keep));
    // As if the lookups had stopped after the blocks kept.
    pool_.count_lookups(uint64_t(keep + (keep < n_candidates ? 1 : 0)), uint64_t(keep));
  }
  seq.n_cached_blocks = static_cast<int32_t>(seq.blocks.size());
  return seq.n_cached_blocks * block_size_;
}

bool KvCacheManager::allocate(KvSequence& seq, int32_t n_tokens) {
  const bool need_slot = state_slots_ != nullptr && seq.state_slot < 0;
  if (need_slot && state_slots_->n_free() == 0) return false;
  const int32_t need = blocks_for(n_tokens) - static_cast<int32_t>(seq.blocks.size());
  if (need > 0 && !pool_.allocate(need, seq.blocks)) return false;
  if (need_slot) seq.state_slot = *state_slots_->allocate();
  return true;
}

void KvCacheManager::cache_full_blocks(std::span<const int32_t> tokens, int32_t n_computed,
                                       KvSequence& seq) {
  if (!pool_.prefix_caching()) return;
  const int32_t n_full =
      std::min(n_computed / block_size_, static_cast<int32_t>(seq.blocks.size()));
  if (n_full <= seq.n_cached_blocks) return;
  hash_blocks(tokens, n_full, seq);
  for (int32_t b = seq.n_cached_blocks; b < n_full; ++b)
    pool_.cache(seq.blocks[size_t(b)], seq.block_hashes[size_t(b)]);
  seq.n_cached_blocks = n_full;
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
  const int32_t keep = blocks_for(n_tokens);
  const int32_t have = static_cast<int32_t>(seq.blocks.size());
  if (keep >= have) return;
  assert(seq.n_cached_blocks <= keep);
  std::reverse(seq.blocks.begin() + keep, seq.blocks.end());
  pool_.release(std::span<const int32_t>(seq.blocks).subspan(size_t(keep)));
  seq.blocks.resize(size_t(keep));
}

void KvCacheManager::release(KvSequence& seq) {
  std::reverse(seq.blocks.begin(), seq.blocks.end());
  pool_.release(seq.blocks);
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

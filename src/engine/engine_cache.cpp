// The engine's cache layout and its bookkeeping: what a request can hold, which states to copy,
// and each cache group's usage.
#include "engine/engine_cache.h"

#include <algorithm>
#include <numeric>

#include "engine/engine_live.h"
#include "model/gated_delta_rule.h"

namespace vela {
namespace engine_cache {
namespace {

int32_t default_blocks(const EngineConfig& c) {
  return int32_t(int64_t(c.scheduler.max_num_seqs) *
                 ((c.max_context + c.block_size - 1) / c.block_size));
}

}  // namespace

int32_t state_checkpoint_slots(const Model& model, const EngineConfig& c) {
  if (!model.config().recurrent() || !c.enable_prefix_caching) return 0;
  return c.n_state_checkpoints < 0 ? c.scheduler.max_num_seqs : c.n_state_checkpoints;
}

// A speculating sequence of a recurrent model saves its state after each proposal, so that the
// state of whatever verification accepts is at hand: num_speculative_tokens slots per sequence.
int32_t speculation_state_slots(const Model& model, const EngineConfig& c) {
  if (!model.config().recurrent() || !c.speculative.enabled()) return 0;
  return c.scheduler.max_num_seqs * c.speculative.num_speculative_tokens;
}

// A recurrent model's running sequences each hold a state slot (one per sequence that may run),
// after them the checkpoint slots, then the speculation slots. Layers of different sliding
// windows keep their K/V in groups whose blocks leave the window (in one process: the ranks of a
// parallel group exchange batches of one block table per sequence).
KvCacheConfig cache_config(const Model& model, const EngineConfig& c) {
  KvCacheConfig kc =
      model_cache_config(model.config(), c.block_size, 1, c.kv_type,
                         c.scheduler.max_num_seqs + state_checkpoint_slots(model, c) +
                             speculation_state_slots(model, c),
                         /*group_windows=*/c.tensor_parallel == nullptr);
  kc.n_blocks = c.n_blocks > 0 ? c.n_blocks : default_blocks(c) * kc.n_groups();
  return kc;
}

// Positions between checkpoints: a multiple of the block size and of the DeltaNet chunk (so that
// saving one does not change how the rule splits a prompt), at least the configured interval, or
// enough tokens that their K/V weigh about what one checkpoint does.
int32_t state_checkpoint_interval(const KvCacheConfig& kc, const EngineConfig& c) {
  const int32_t step = std::lcm(c.block_size, kDeltaChunk);
  int64_t want = c.state_checkpoint_interval;
  if (want <= 0) {
    const size_t kv_per_token = KvCache::bytes_per_block(kc) / size_t(kc.block_size);
    want = kv_per_token == 0 ? step : int64_t(KvCache::bytes_per_state_slot(kc) / kv_per_token);
  }
  return int32_t(std::clamp<int64_t>((want + step - 1) / step, 1, int64_t(1) << 20) * step);
}

}  // namespace engine_cache

int64_t Engine::request_capacity() const {
  // Blocks a request of n tokens holds at most: every block of each global group; a windowed
  // group's blocks of its window and of the largest step's tokens, whose K/V are all written
  // before any block slides out.
  const KvCacheConfig& kc = cache_.config();
  const int32_t bs = config_.block_size;
  const auto blocks_held = [&](int64_t n) {
    const int64_t all = (n + bs - 1) / bs;
    int64_t held = 0;
    for (int32_t g = 0; g < kc.n_groups(); ++g) {
      const int32_t window = kc.group_windows.empty() ? 0 : kc.group_windows[size_t(g)];
      held += window == 0 ? all
                          : std::min<int64_t>(
                                all, (window + config_.scheduler.max_num_batched_tokens) / bs + 2);
    }
    return held;
  };
  int64_t lo = 0, hi = config_.max_context;  // the longest n whose blocks fit the pool
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (blocks_held(mid) <= config_.n_blocks)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

void Engine::record_kv_occupancy() {
  uint64_t capacity = 0, used = 0;
  for (const auto& [id, live] : requests_) {
    const Request& r = live->request;
    // Each block held (windowed groups hold the recent ones only) and the tokens it holds.
    const int32_t bs = config_.block_size;
    for (size_t i = 0; i < r.kv.blocks.size(); ++i) {
      if (r.kv.blocks[i] < 0) continue;
      capacity += uint64_t(bs);
      const int32_t first = int32_t(i / size_t(kv_.n_groups())) * bs;
      used += uint64_t(std::clamp(r.num_computed - first, 0, bs));
    }
  }
  if (capacity > counters_.peak_slot_capacity) {
    counters_.peak_slot_capacity = capacity;
    counters_.peak_slots_used = used;
  }
}

void Engine::describe_cache_groups() {
  const KvCacheConfig& kc = cache_.config();
  const auto window_of = [&](int32_t g) {
    return kc.group_windows.empty() ? 0 : kc.group_windows[size_t(g)];
  };
  // One entry per window: its layers and bytes; group_entry_ maps each layer group to it.
  const KvLayerGroups layers =
      kv_layer_groups(forward_->model().config(), !kc.group_windows.empty());
  const uint64_t block_bytes = KvCache::bytes_per_block(kc);
  for (int32_t g = 0; g < kc.n_groups(); ++g) {
    const int32_t w = window_of(g);
    size_t e = 0;
    while (e < cache_groups_.size() && cache_groups_[e].window != w) ++e;
    if (e == cache_groups_.size())
      cache_groups_.push_back({.name = w == 0 ? "attention" : "sliding_window", .window = w});
    group_entry_.push_back(int32_t(e));
    CacheGroupUsage& u = cache_groups_[e];
    u.bytes_per_token += block_bytes / uint64_t(kc.block_size);
    if (w > 0)  // the window's positions and the block being filled
      u.bytes_per_sequence += block_bytes * uint64_t((w + kc.block_size - 1) / kc.block_size + 1);
  }
  for (int32_t g : layers.group)
    if (g >= 0) ++cache_groups_[size_t(group_entry_[size_t(g)])].n_layers;
  if (kc.n_state_layers > 0)
    cache_groups_.push_back({.name = "recurrent_state",
                             .n_layers = kc.n_state_layers,
                             .bytes_per_sequence = KvCache::bytes_per_state_slot(kc)});
}

std::vector<CacheGroupUsage> Engine::cache_groups() const {
  std::vector<CacheGroupUsage> groups = cache_groups_;
  const BlockPoolUsage blocks = pool_.usage();
  for (CacheGroupUsage& g : groups) {
    const bool state = g.bytes_per_token == 0;
    g.total = state ? state_slots_.n_slots() : blocks.total;
    g.used = state ? state_slots_.n_used() : 0;
  }
  if (group_entry_.size() == 1) {  // one K/V entry: every block held is its
    groups[0].used = blocks.used;
  } else {  // the blocks each window's groups hold
    for (const auto& [id, live] : requests_) {
      const std::vector<int32_t>& table = live->request.kv.blocks;
      for (size_t i = 0; i < table.size(); ++i)
        groups[size_t(group_entry_[i % group_entry_.size()])].used += table[i] >= 0;
    }
  }
  return groups;
}

void Engine::restore_states(const SchedulerOutput& scheduled) {
  for (const ScheduledRequest& s : scheduled.scheduled) {
    KvSequence& seq = s.request->kv;
    if (seq.restore_from < 0) continue;
    pending_state_copies_.push_back({seq.restore_from, seq.state_slot});
    seq.restore_from = -1;
  }
}

void Engine::populate_state_slots(const SchedulerOutput& scheduled) {
  for (const ScheduledRequest& s : scheduled.scheduled) {
    const int32_t slot = s.request->kv.state_slot;
    if (slot < 0 || size_t(slot) >= state_slot_populated_.size() ||
        state_slot_populated_[size_t(slot)])
      continue;
    state_slot_populated_[size_t(slot)] = true;
    cache_.populate_state_slot(slot);
    if (speculation_slots_ >= 0)
      for (int32_t j = 0; j < config_.speculative.num_speculative_tokens; ++j)
        cache_.populate_state_slot(speculation_slot(slot, j));
  }
}

}  // namespace vela

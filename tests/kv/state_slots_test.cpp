// Recurrent-state slots and prefix checkpoints: a running sequence of a recurrent model holds a
// slot (taken with its blocks, all or none, freed with them), a cached prefix is reused only up to
// its last checkpoint, and checkpoints are reserved, committed or cancelled, then overwritten
// least recently used first.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/state_checkpoints.h"
#include "kv/state_slot_pool.h"

namespace vela {
namespace {

TEST(StateSlotPool, LowestFreeSlotFirst) {
  StateSlotPool slots(3);
  EXPECT_EQ(*slots.allocate(), 0);
  EXPECT_EQ(*slots.allocate(), 1);
  EXPECT_EQ(*slots.allocate(), 2);
  EXPECT_FALSE(slots.allocate());
  slots.release(1);
  slots.release(0);
  EXPECT_EQ(slots.n_used(), 1);
  EXPECT_EQ(*slots.allocate(), 0);
  EXPECT_EQ(*slots.allocate(), 1);
}

TEST(StateCheckpoints, ReservedThenCommittedThenReplacedLeastRecentlyUsed) {
  StateCheckpoints cp(/*first_slot=*/4, /*n_slots=*/2, /*interval_tokens=*/64);
  const auto a = cp.reserve(100), b = cp.reserve(200);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, 4);
  EXPECT_EQ(*b, 5);
  EXPECT_FALSE(cp.reserve(100));  // already reserved
  EXPECT_FALSE(cp.reserve(300));  // every slot reserved
  EXPECT_FALSE(cp.find(100));     // not written yet
  cp.commit(*a);
  cp.cancel(*b);
  EXPECT_EQ(cp.find(100), 4);
  EXPECT_FALSE(cp.find(200));
  const auto c = cp.reserve(300);  // the free slot, not the committed one
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, 5);
  cp.commit(*c);
  EXPECT_EQ(cp.find(100), 4);      // 100 is now the most recently used
  const auto d = cp.reserve(400);  // replaces 300
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, 5);
  cp.commit(*d);
  EXPECT_FALSE(cp.find(300));
  EXPECT_EQ(cp.find(100), 4);
  const StateCheckpointUsage u = cp.usage();
  EXPECT_EQ(u.held, 2);
  EXPECT_EQ(u.saved, 3u);
  EXPECT_EQ(u.replaced, 1u);
}

TEST(KvCacheManager, RecurrentSequencesHoldASlotAndReuseOnlyCheckpointedPrefixes) {
  constexpr int32_t kBlock = 4;
  BlockPool pool(64, true);
  StateSlotPool slots(2);
  StateCheckpoints checkpoints(2, 2, /*interval_tokens=*/8);
  KvCacheManager kv(pool, kBlock, &slots, &checkpoints);
  std::vector<int32_t> tokens(30);
  std::iota(tokens.begin(), tokens.end(), 1);

  // A first sequence: slot and blocks together; checkpoints planned at 8, 16, 24.
  KvSequence a;
  EXPECT_EQ(kv.acquire_cached_prefix(tokens, a), 0);
  ASSERT_TRUE(kv.allocate(a, 30));
  EXPECT_EQ(a.state_slot, 0);
  std::vector<PlannedCheckpoint> planned;
  kv.plan_checkpoints(tokens, 0, 20, a, planned);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_EQ(planned[0].position, 8);
  EXPECT_EQ(planned[1].position, 16);
  checkpoints.commit(planned[0].slot);
  checkpoints.commit(planned[1].slot);
  planned.clear();
  kv.plan_checkpoints(tokens, 20, 10, a, planned);  // both checkpoint slots are held
  EXPECT_EQ(planned.size(), 1u);                    // 24 replaces the least recently used
  checkpoints.cancel(planned[0].slot);
  kv.cache_full_blocks(tokens, 30, a);

  // A second sequence with the same tokens: 7 cached blocks (28 positions, the last token left
  // to compute), reused up to the checkpoint at 16 only.
  KvSequence b;
  EXPECT_EQ(kv.acquire_cached_prefix(tokens, b), 16);
  EXPECT_EQ(b.blocks.size(), 4u);
  EXPECT_GE(b.restore_from, 2);
  ASSERT_TRUE(kv.allocate(b, 30));
  EXPECT_EQ(b.state_slot, 1);

  // No third slot: a third sequence cannot start, and takes no blocks trying.
  KvSequence c;
  const int32_t free_before = pool.n_free();
  EXPECT_FALSE(kv.allocate(c, 4));
  EXPECT_EQ(pool.n_free(), free_before);
  EXPECT_EQ(c.state_slot, -1);

  kv.release(a);
  kv.release(b);
  EXPECT_EQ(slots.n_used(), 0);
  EXPECT_EQ(b.restore_from, -1);
  ASSERT_TRUE(kv.allocate(c, 4));
  EXPECT_EQ(c.state_slot, 0);
  kv.release(c);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(KvCacheManager, RecurrentPrefixWithoutCheckpointsIsNotReused) {
  BlockPool pool(16, true);
  StateSlotPool slots(2);
  StateCheckpoints none(2, 0, 8);
  KvCacheManager kv(pool, 4, &slots, &none);
  std::vector<int32_t> tokens(20, 7);
  KvSequence a;
  ASSERT_TRUE(kv.allocate(a, 20));
  kv.cache_full_blocks(tokens, 20, a);
  KvSequence b;
  EXPECT_EQ(kv.acquire_cached_prefix(tokens, b), 0);
  EXPECT_TRUE(b.blocks.empty());
  kv.release(a);
  EXPECT_EQ(pool.check_invariants(), "");
}

}  // namespace
}  // namespace vela

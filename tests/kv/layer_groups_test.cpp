// Layer groups by sliding window: a sequence holds a block of every group at each block position,
// a windowed group's blocks that slid out of its window go back to the pool, and a cached prefix
// is reused only where the global groups have every block and the windowed groups the blocks of
// the window before it.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"

namespace vela {
namespace {

constexpr int32_t kBlock = 4;

int32_t held(const KvSequence& s) {
  int32_t n = 0;
  for (int32_t b : s.blocks) n += b >= 0;
  return n;
}

TEST(KvLayerGroups, WindowedBlocksLeaveAndThePrefixNeedsOnlyTheWindow) {
  BlockPool pool(64, true);
  // Group 0 global, group 1 windowed (6 positions: a token sees itself and the 5 before it).
  KvCacheManager kv(pool, kBlock, nullptr, nullptr, {0, 6});
  ASSERT_EQ(kv.n_groups(), 2);
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 100);

  KvSequence a;
  ASSERT_TRUE(kv.allocate(a, 10));
  EXPECT_EQ(a.blocks.size(), 6u);  // 3 block positions x 2 groups
  kv.cache_full_blocks(tokens, 10, a);
  kv.release_out_of_window(a, 10);
  // The next token (position 10) sees 5..10: the windowed group keeps blocks 1 and 2.
  EXPECT_EQ(a.blocks[1], -1);
  EXPECT_GE(a.blocks[3], 0);
  EXPECT_EQ(held(a), 5);
  // Grown to 36 tokens a step at a time: the windowed group never holds more than 3 blocks.
  for (int32_t n = 11; n <= 36; ++n) {
    ASSERT_TRUE(kv.allocate(a, n));
    kv.cache_full_blocks(tokens, n, a);
    kv.release_out_of_window(a, n);
    int32_t windowed = 0;
    for (size_t i = 1; i < a.blocks.size(); i += 2) windowed += a.blocks[i] >= 0;
    EXPECT_LE(windowed, 3) << n << " tokens";
  }
  EXPECT_EQ(pool.check_invariants(), "");

  // Another sequence with the same 36 tokens: 8 full block positions can be reused (the last
  // token is left to compute) where the windowed group still has the blocks before each end:
  // those of a's last window (positions 27..35) are held, the earlier ones went back to the pool
  // with their hashes and are still cached.
  KvSequence b;
  const std::span<const int32_t> prompt(tokens.data(), 36);
  EXPECT_EQ(kv.acquire_cached_prefix(prompt, b), 32);
  ASSERT_EQ(b.blocks.size(), 16u);
  // Position 32 sees 27..32: the windowed group needs blocks 6 and 7 only.
  for (int32_t pos = 0; pos < 8; ++pos) {
    EXPECT_GE(b.blocks[size_t(pos) * 2], 0) << pos;
    EXPECT_EQ(b.blocks[size_t(pos) * 2 + 1] >= 0, pos >= 6) << pos;
  }
  kv.release(b);
  kv.release(a);
  EXPECT_EQ(pool.usage().used, 0);
  EXPECT_EQ(pool.check_invariants(), "");

  // Once the windowed group's blocks are evicted, the prefix stops where its window is gone.
  std::vector<int32_t> filler;
  ASSERT_TRUE(pool.allocate(pool.n_free(), filler));  // evicts every cached block
  pool.release(filler);
  KvSequence c;
  EXPECT_EQ(kv.acquire_cached_prefix(prompt, c), 0);
  EXPECT_EQ(pool.check_invariants(), "");
}

}  // namespace
}  // namespace vela

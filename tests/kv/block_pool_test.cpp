// Block pool and KV cache manager: all-or-none allocation, reference counts, prefix-cache
// revival and LRU eviction, and a property test over random operation sequences against a
// simple model of what every block's reference count must be.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"

namespace vela {
namespace {

TEST(BlockPool, AllocationIsAllOrNone) {
  BlockPool pool(4, true);
  std::vector<int32_t> got;
  EXPECT_FALSE(pool.allocate(5, got));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_TRUE(pool.allocate(3, got));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_FALSE(pool.allocate(2, got));
  EXPECT_EQ(got.size(), 3u);
  pool.release(got);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, CachedBlocksAreRevivedThenEvictedLeastRecentlyFreedFirst) {
  BlockPool pool(3, true);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.allocate(2, a));
  pool.cache(a[0], 111);
  pool.cache(a[1], 222);
  pool.release(std::vector<int32_t>{a[1], a[0]});  // tail first: a[1] is evicted before a[0]
  auto hit = pool.lookup(111);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, a[0]);
  EXPECT_EQ(pool.usage().cached, 2);
  // Two fresh blocks: the empty one first, then the least recently freed cached one (a[1]).
  ASSERT_TRUE(pool.allocate(2, b));
  EXPECT_FALSE(pool.lookup(222));
  ASSERT_TRUE(pool.lookup(111));
  pool.touch(a[0]);
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_EQ(pool.usage().evictions, 1u);
  EXPECT_EQ(pool.usage().prefix_queries, 3u);
  EXPECT_EQ(pool.usage().prefix_hits, 2u);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, PrefixCachingOffFindsNothing) {
  BlockPool pool(2, false);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(1, a));
  pool.cache(a[0], 5);
  pool.release(a);
  EXPECT_FALSE(pool.lookup(5));
  EXPECT_EQ(pool.usage().cached, 0);
}

TEST(KvCacheManager, SharedPrefixIsFoundAndLastTokenAlwaysComputed) {
  BlockPool pool(16, true);
  KvCacheManager kv(pool, 4);
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  KvSequence a;
  EXPECT_EQ(kv.acquire_cached_prefix(prompt, a), 0);
  ASSERT_TRUE(kv.allocate(a, 10));
  kv.cache_full_blocks(prompt, 10, a);  // blocks [1..4] and [5..8] are full
  // Same first 8 tokens: both full blocks hit.
  std::vector<int32_t> other = {1, 2, 3, 4, 5, 6, 7, 8, 42, 43, 44};
  KvSequence b;
  EXPECT_EQ(kv.acquire_cached_prefix(other, b), 8);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(pool.ref_count(a.blocks[1]), 2);
  // Exactly 8 tokens: the last one must still be computed, so only the first block is reused.
  std::vector<int32_t> exact(prompt.begin(), prompt.begin() + 8);
  KvSequence c;
  EXPECT_EQ(kv.acquire_cached_prefix(exact, c), 4);
  // A different first block shares nothing even if later tokens match.
  std::vector<int32_t> diverged = {9, 2, 3, 4, 5, 6, 7, 8, 9};
  KvSequence d;
  EXPECT_EQ(kv.acquire_cached_prefix(diverged, d), 0);
  for (KvSequence* s : {&a, &b, &c, &d}) kv.release(*s);
  EXPECT_EQ(pool.usage().used, 0);
  EXPECT_EQ(pool.check_invariants(), "");
}

// Random allocate / share / cache / free / evict against a model of the reference counts.
TEST(BlockPool, RandomOperationsKeepInvariants) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const int32_t n_blocks = 1 + int32_t(rng() % 24);
    BlockPool pool(n_blocks, true);
    std::vector<std::vector<int32_t>> owners;  // each owner holds one reference per listed block
    std::map<int32_t, int32_t> refs;           // expected reference counts
    std::map<uint64_t, int32_t> cached;        // hash -> block, as far as we know
    for (int op = 0; op < 400; ++op) {
      switch (rng() % 5) {
        case 0: {  // allocate
          const int32_t n = int32_t(rng() % 5);
          std::vector<int32_t> got;
          const int32_t free_before = pool.n_free();
          const bool ok = pool.allocate(n, got);
          ASSERT_EQ(ok, n <= free_before);
          if (!ok) {
            ASSERT_TRUE(got.empty());
          }
          for (int32_t b : got) {
            ASSERT_EQ(refs[b], 0);
            refs[b] = 1;
            for (auto it = cached.begin(); it != cached.end();)  // a reused block lost its hash
              it = it->second == b ? cached.erase(it) : std::next(it);
          }
          if (!got.empty()) owners.push_back(got);
          break;
        }
        case 1: {  // free an owner
          if (owners.empty()) break;
          const size_t i = rng() % owners.size();
          pool.release(owners[i]);
          for (int32_t b : owners[i]) --refs[b];
          owners.erase(owners.begin() + long(i));
          break;
        }
        case 2: {  // cache a held block under a fresh hash
          if (owners.empty()) break;
          const auto& o = owners[rng() % owners.size()];
          const int32_t b = o[rng() % o.size()];
          const uint64_t h = rng() | 1;
          bool has_hash = false;
          for (const auto& [hh, bb] : cached) has_hash |= bb == b;
          pool.cache(b, h);
          if (!has_hash) cached[h] = b;
          break;
        }
        case 3: {  // prefix hit: share a cached block
          if (cached.empty()) break;
          auto it = cached.begin();
          std::advance(it, long(rng() % cached.size()));
          const auto hit = pool.lookup(it->first);
          ASSERT_TRUE(hit);
          ASSERT_EQ(*hit, it->second);
          pool.touch(*hit);
          ++refs[*hit];
          owners.push_back({*hit});
          break;
        }
        case 4: {  // lookup of an unknown hash
          ASSERT_FALSE(pool.lookup(0xdeadbeefull << 3));
          break;
        }
      }
      ASSERT_EQ(pool.check_invariants(), "") << "seed " << seed << " op " << op;
      for (const auto& [b, r] : refs) ASSERT_EQ(pool.ref_count(b), r) << "block " << b;
    }
    for (auto& o : owners) pool.release(o);
    EXPECT_EQ(pool.usage().used, 0);
    EXPECT_EQ(pool.n_free(), n_blocks);
    EXPECT_EQ(pool.check_invariants(), "");
  }
}

}  // namespace
}  // namespace vela

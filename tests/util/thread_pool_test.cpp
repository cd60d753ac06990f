// The persistent thread pool: every task runs exactly once on a valid thread id, the caller
// takes part, nested and concurrent use are safe, thousands of tiny loops in a row work (the
// per-token pattern), and workers that went to sleep wake up and shut down cleanly.
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace vela {
namespace {

using namespace std::chrono_literals;

// Runs n_tasks and checks each index ran exactly once with a valid thread id.
void expect_each_once(ThreadPool& pool, int64_t n_tasks) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n_tasks));
  std::atomic<bool> bad_id{false};
  pool.parallel_for(n_tasks, [&](int64_t task, int32_t thread) {
    runs[size_t(task)].fetch_add(1, std::memory_order_relaxed);
    if (thread < 0 || thread >= pool.n_threads()) bad_id = true;
  });
  for (int64_t t = 0; t < n_tasks; ++t)
    ASSERT_EQ(runs[size_t(t)].load(), 1) << "task " << t << " of " << n_tasks;
  EXPECT_FALSE(bad_id.load());
}

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  for (int32_t n_threads : {1, 2, 3, 8}) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.n_threads(), n_threads);
    for (int64_t n_tasks : {0, 1, 2, 3, 7, 64, 1000}) expect_each_once(pool, n_tasks);
  }
}

TEST(ThreadPool, AtLeastOneThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.n_threads(), 1);
  expect_each_once(pool, 5);
}

TEST(ThreadPool, OneThreadRunsInOrderOnTheCaller) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  std::vector<int64_t> order;
  pool.parallel_for(5, [&](int64_t task, int32_t thread) {
    EXPECT_EQ(thread, 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(task);
  });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// n tasks that each wait until all n have started can only finish if n threads run them at once,
// the caller included (the pool has n - 1 workers).
TEST(ThreadPool, AllThreadsIncludingTheCallerRunConcurrently) {
  for (int32_t n : {2, 4}) {
    ThreadPool pool(n);
    std::atomic<int> started{0};
    std::atomic<bool> all_met{true};
    std::vector<std::atomic<int>> by_thread(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t, int32_t thread) {
      by_thread[size_t(thread)].fetch_add(1);
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (started.load() < n) {
        if (std::chrono::steady_clock::now() > deadline) {
          all_met = false;
          return;
        }
        std::this_thread::yield();
      }
    });
    EXPECT_TRUE(all_met.load()) << n << " threads";
    for (int32_t t = 0; t < n; ++t) EXPECT_EQ(by_thread[size_t(t)].load(), 1) << "thread " << t;
  }
}

TEST(ThreadPool, NestedLoopsRunInlineOnTheTasksThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> runs(8 * 5);
  pool.parallel_for(8, [&](int64_t outer, int32_t outer_thread) {
    const auto self = std::this_thread::get_id();
    pool.parallel_for(5, [&](int64_t inner, int32_t inner_thread) {
      EXPECT_EQ(inner_thread, outer_thread);
      EXPECT_EQ(std::this_thread::get_id(), self);
      runs[size_t(outer * 5 + inner)].fetch_add(1);
    });
  });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(ThreadPool, ManyConsecutiveSmallLoops) {
  ThreadPool pool(2);
  std::vector<int64_t> out(4);
  int64_t total = 0;
  for (int job = 0; job < 20000; ++job) {
    // Each task writes its own slot; the caller reads them after the loop returns.
    pool.parallel_for(int64_t(1 + job % 4),
                      [&](int64_t task, int32_t) { out[size_t(task)] = job + task; });
    for (int64_t t = 0; t < 1 + job % 4; ++t) total += out[size_t(t)] - job;
  }
  int64_t expected = 0;
  for (int job = 0; job < 20000; ++job)
    for (int64_t t = 0; t < 1 + job % 4; ++t) expected += t;
  EXPECT_EQ(total, expected);
}

// Thread ids index per-thread scratch, so two tasks with the same id must never overlap in time,
// even when several threads submit loops to one pool (their loops run one after another).
TEST(ThreadPool, CallsFromSeveralThreadsAreSerialised) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> busy(3);
  std::atomic<bool> clash{false};
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int job = 0; job < 200; ++job) {
        pool.parallel_for(6, [&](int64_t task, int32_t thread) {
          if (busy[size_t(thread)].fetch_add(1) != 0) clash = true;
          sum.fetch_add(task);
          std::this_thread::yield();
          busy[size_t(thread)].fetch_sub(1);
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(sum.load(), 3 * 200 * (0 + 1 + 2 + 3 + 4 + 5));
  EXPECT_FALSE(clash.load());
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(5ms);  // well past the spin time: the workers are asleep
    expect_each_once(pool, 100);
  }
}

TEST(ThreadPool, DestructionWithIdleOrSleepingWorkers) {
  { ThreadPool pool(4); }  // workers may not even have started
  {
    ThreadPool pool(4);
    expect_each_once(pool, 10);
  }  // workers spinning
  {
    ThreadPool pool(4);
    expect_each_once(pool, 10);
    std::this_thread::sleep_for(5ms);
  }  // workers asleep
  SUCCEED();
}

TEST(ThreadPool, ExceptionOnTheCallerPropagatesAndThePoolStaysUsable) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(50,
                                 [&](int64_t, int32_t) {
                                   ran.fetch_add(1);
                                   std::this_thread::sleep_for(100us);  // the caller gets some
                                   if (std::this_thread::get_id() == caller)
                                     throw std::runtime_error("task failed");
                                 }),
               std::runtime_error);
  EXPECT_GE(ran.load(), 1);
  expect_each_once(pool, 100);
}

}  // namespace
}  // namespace vela

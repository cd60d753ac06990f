// The server's hygiene parts on their own: the connection table's shedding order and cap, the
// request workers keeping a worker free for small jobs, and the access-log writer that drops
// (and counts) lines instead of blocking when its output stalls.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "engine/memory_guard.h"
#include "server/access_log.h"
#include "server/connection_limits.h"
#include "server/request_workers.h"

namespace vela::server {
namespace {

HttpSession* fake(uintptr_t n) {
  return reinterpret_cast<HttpSession*>(n * 64);
}

TEST(ConnectionTable, ShedsTheLongestIdleAndNeverABusyOne) {
  ConnectionTable t(3);
  t.add(fake(1));
  t.add(fake(2));
  t.add(fake(3));
  EXPECT_TRUE(t.full());
  EXPECT_EQ(t.oldest_idle(), fake(1));
  t.mark_busy(fake(1));  // a request is running on 1: not sheddable
  EXPECT_EQ(t.oldest_idle(), fake(2));
  t.mark_idle(fake(1));  // idle again, now the youngest
  t.mark_busy(fake(2));
  EXPECT_EQ(t.oldest_idle(), fake(3));
  t.remove(fake(3));
  t.remove(fake(3));  // idempotent
  EXPECT_EQ(t.open(), 2u);
  EXPECT_FALSE(t.full());
  EXPECT_EQ(t.oldest_idle(), fake(1));
  t.mark_busy(fake(1));
  EXPECT_EQ(t.oldest_idle(), nullptr);
  EXPECT_TRUE(t.contains(fake(2)));
  EXPECT_EQ(t.all().size(), 2u);
}

TEST(ConnectionTable, LogLinesAreRateLimitedAndSumWhatHappened) {
  ConnectionTable t(1);
  t.add(fake(1));
  const auto t0 = std::chrono::steady_clock::now();
  auto first = t.note_shed(t0);
  ASSERT_TRUE(first);
  EXPECT_NE(first->find("connection limit reached (1 of 1 open"), std::string::npos) << *first;
  EXPECT_FALSE(t.note_shed(t0 + std::chrono::seconds(1)));
  EXPECT_FALSE(t.note_refused(t0 + std::chrono::seconds(2)));
  auto later = t.note_refused(t0 + std::chrono::seconds(11));
  ASSERT_TRUE(later);
  EXPECT_NE(later->find("closed 1 idle connection(s), refused 2 new one(s)"), std::string::npos)
      << *later;
}

TEST(ConnectionTable, CapStaysBelowTheOpenFileLimit) {
  EXPECT_EQ(effective_max_connections(0, 256), 192u);
  EXPECT_EQ(effective_max_connections(100, 256), 100u);
  EXPECT_EQ(effective_max_connections(1000, 256), 192u);
  EXPECT_EQ(effective_max_connections(0, 100), 50u);  // tiny limits keep half
  EXPECT_EQ(effective_max_connections(0, 4), 8u);
  EXPECT_GE(raise_open_file_limit(), 64u);
}

TEST(RequestWorkers, SmallJobsRunWhileLargeOnesOccupyTheOtherWorkers) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> large_started{0};
  std::promise<void> small_done;
  // Declared after what the jobs touch, so its destructor (which runs the queued jobs) runs
  // while they still exist.
  RequestWorkers workers(2);
  // Two large jobs that block: only one may run, so one worker stays for small jobs.
  for (int i = 0; i < 2; ++i)
    workers.post(RequestWorkers::kLargeJobBytes, [&, released] {
      ++large_started;
      released.wait();
    });
  workers.post(10, [&] { small_done.set_value(); });
  EXPECT_EQ(small_done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(large_started.load(), 1);
  release.set_value();
  // The destructor runs what is queued: the second large job starts and ends.
}

TEST(AccessLogWriter, DropsAndCountsInsteadOfBlockingOnAStalledOutput) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  fcntl(fds[1], F_SETPIPE_SZ, 4096);
  std::FILE* out = fdopen(fds[1], "w");
  ASSERT_NE(out, nullptr);
  std::atomic<int> dropped{0};
  std::thread reader;
  {
    AccessLogWriter writer(out, 16, [&] { ++dropped; });
    AccessRecord r;
    r.method = "GET";
    r.path = "/" + std::string(200, 'x');
    r.status = 200;
    // Nobody reads the pipe: the writer thread blocks on it, and write() must not.
    const auto start = std::chrono::steady_clock::now();
    int accepted = 0;
    for (int i = 0; i < 2000; ++i) accepted += writer.write(r) ? 1 : 0;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_EQ(accepted + dropped.load(), 2000);
    EXPECT_GT(dropped.load(), 1000);
    // Drain the pipe so the destructor can write what it holds.
    reader = std::thread([fd = fds[0]] {
      char buf[4096];
      while (read(fd, buf, sizeof(buf)) > 0) {
      }
    });
  }
  std::fclose(out);  // the reader sees the end
  reader.join();
  close(fds[0]);
}

TEST(AccessLogWriter, WritesEveryLineInOrderWhenKeepingUp) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    AccessLogWriter writer(out, 1024, nullptr);
    for (int i = 0; i < 100; ++i) {
      AccessRecord r;
      r.method = "GET";
      r.path = "/p" + std::to_string(i);
      r.status = 200;
      EXPECT_TRUE(writer.write(r));
    }
  }
  std::rewind(out);
  char line[1024];
  int n = 0;
  while (std::fgets(line, sizeof(line), out)) {
    EXPECT_NE(std::string(line).find("\"path\":\"/p" + std::to_string(n) + "\""), std::string::npos)
        << line;
    ++n;
  }
  EXPECT_EQ(n, 100);
  std::fclose(out);
}

TEST(MemoryGuard, RefusesKvPlusWeightsBeyondAvailableOrCgroupMemory) {
  const uint64_t gib = uint64_t(1) << 30;
  MemoryLimits limits;
  limits.mem_available = 8 * gib;
  EXPECT_TRUE(check_memory_budget(2 * gib, 3 * gib, limits).ok());
  const Status over = check_memory_budget(6 * gib, 3 * gib, limits);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("6.00 GiB"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("3.00 GiB"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("9.00 GiB"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("MemAvailable"), std::string::npos) << over.message();
  limits.cgroup_limit = 4 * gib;  // a container's limit is tighter than the machine
  const Status cgroup = check_memory_budget(2 * gib, 3 * gib, limits);
  ASSERT_FALSE(cgroup.ok());
  EXPECT_NE(cgroup.message().find("cgroup"), std::string::npos) << cgroup.message();
  EXPECT_TRUE(check_memory_budget(1, 1, MemoryLimits{}).ok());  // nothing known: no refusal
}

}  // namespace
}  // namespace vela::server

#include "util/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace vela {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls with only a pause between them before an idle thread starts yielding its core: long
// enough to cover the gap between two loops of one token (~10-100 us), short enough that, when
// threads outnumber cores, a spinning thread soon stops keeping a working one off the CPU.
constexpr int kPauseSpins = 2000;
// How long an idle worker keeps polling (yielding between polls) before it sleeps: covers the
// gap between two tokens (sampling, detokenizing), so decoding never pays a wake-up syscall,
// while an idle engine goes quiet within a millisecond.
constexpr auto kSpinTime = std::chrono::microseconds(500);

// The pool whose loop the current thread is running (nested loops then run inline) and the
// thread's id in it.
thread_local const ThreadPool* tls_pool = nullptr;
thread_local int32_t tls_thread_id = 0;

struct ScopedPoolThread {
  const ThreadPool* saved_pool;
  int32_t saved_id;
  ScopedPoolThread(const ThreadPool* pool, int32_t id)
      : saved_pool(tls_pool), saved_id(tls_thread_id) {
    tls_pool = pool;
    tls_thread_id = id;
  }
  ~ScopedPoolThread() {
    tls_pool = saved_pool;
    tls_thread_id = saved_id;
  }
};

}  // namespace

struct ThreadPool::State {
  using CallFn = void (*)(void*, int64_t, int32_t);

  // A loop's description. Two alternate by generation parity so that a worker still looking at
  // the previous loop never reads fields being rewritten; `readers` counts the workers looking.
  struct Job {
    std::atomic<void*> object{nullptr};
    std::atomic<CallFn> call{nullptr};
    std::atomic<int64_t> n_tasks{0};
    alignas(64) std::atomic<int32_t> readers{0};
  };

  std::vector<std::thread> workers;
  std::mutex submit_mutex;  // one loop at a time
  Job jobs[2];
  std::atomic<bool> stop{false};
  // generation << 32 | index of the next unclaimed task. Packing both makes a claim fail once
  // its loop is over, so a worker that arrives late (descheduled, or just woken) can never run a
  // task of the wrong loop, and the submitter never has to wait for workers that did not come.
  alignas(64) std::atomic<uint64_t> work{0};
  alignas(64) std::atomic<int64_t> done{0};  // tasks of the current loop that have returned

  // Sleeping workers: the submitter only touches the mutex when there are some.
  alignas(64) std::atomic<int32_t> sleepers{0};
  std::mutex sleep_mutex;
  std::condition_variable wake;

  static uint32_t generation_of(uint64_t w) { return uint32_t(w >> 32); }

  // Claims and runs tasks of loop `generation` until none are left or the loop is over.
  void run_tasks(uint32_t generation, const Job& job, int32_t thread_id) {
    const int64_t n = job.n_tasks.load(std::memory_order_relaxed);
    void* const object = job.object.load(std::memory_order_relaxed);
    const CallFn call = job.call.load(std::memory_order_relaxed);
    uint64_t w = work.load(std::memory_order_relaxed);
    while (generation_of(w) == generation && int64_t(w & 0xffffffffu) < n) {
      if (!work.compare_exchange_weak(w, w + 1, std::memory_order_relaxed)) continue;
      call(object, int64_t(w & 0xffffffffu), thread_id);
      done.fetch_add(1, std::memory_order_release);
      w = work.load(std::memory_order_relaxed);
    }
  }

  // Returns the first generation different from `seen`: spins, then yields, then sleeps.
  uint32_t wait_for_generation(uint32_t seen) {
    uint32_t g;
    for (int i = 0; i < kPauseSpins; ++i) {
      if ((g = generation_of(work.load(std::memory_order_acquire))) != seen) return g;
      cpu_relax();
    }
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    do {
      for (int i = 0; i < 64; ++i) {
        if ((g = generation_of(work.load(std::memory_order_acquire))) != seen) return g;
        cpu_relax();
      }
      std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < deadline);
    // Sleep. sleepers is raised before work is re-read, both seq_cst, so a submitter that
    // publishes and then reads sleepers == 0 is ordered before our re-read: we see its loop.
    std::unique_lock<std::mutex> lock(sleep_mutex);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    wake.wait(lock,
              [&] { return (g = generation_of(work.load(std::memory_order_seq_cst))) != seen; });
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return g;
  }

  // Starts generation g (its job already written) and wakes sleeping workers.
  void publish(uint32_t g) {
    work.store(uint64_t(g) << 32, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      // Taking the mutex orders us after a worker that is between raising sleepers and waiting.
      std::lock_guard<std::mutex> lock(sleep_mutex);
      wake.notify_all();
    }
  }

  void worker_main(const ThreadPool* pool, int32_t thread_id) {
    ScopedPoolThread scope(pool, thread_id);
    uint32_t seen = 0;
    for (;;) {
      const uint32_t g = seen = wait_for_generation(seen);
      if (stop.load(std::memory_order_acquire)) return;
      Job& job = jobs[g & 1];
      // Announce the read, then check the loop is still current: the submitter only rewrites a
      // job after seeing readers == 0 with the loop already replaced (all seq_cst).
      job.readers.fetch_add(1, std::memory_order_seq_cst);
      if (generation_of(work.load(std::memory_order_seq_cst)) == g) run_tasks(g, job, thread_id);
      job.readers.fetch_sub(1, std::memory_order_release);
    }
  }

  void shut_down() {
    {
      std::lock_guard<std::mutex> lock(submit_mutex);
      stop.store(true, std::memory_order_release);
      publish(generation_of(work.load(std::memory_order_relaxed)) + 1);
    }
    for (std::thread& w : workers) w.join();
    workers.clear();
  }
};

ThreadPool::ThreadPool(int32_t n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), state_(std::make_unique<State>()) {
  state_->workers.reserve(size_t(n_threads_ - 1));
  try {
    for (int32_t id = 1; id < n_threads_; ++id)
      state_->workers.emplace_back([this, id] { state_->worker_main(this, id); });
  } catch (...) {
    state_->shut_down();  // join the workers that did start before giving up
    throw;
  }
}

ThreadPool::~ThreadPool() {
  state_->shut_down();
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn) {
  if (n_tasks <= 0) return;
  if (tls_pool == this) {  // nested inside one of our tasks: run inline on this thread
    for (int64_t t = 0; t < n_tasks; ++t) fn.call(fn.object, t, tls_thread_id);
    return;
  }
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.submit_mutex);
  ScopedPoolThread scope(this, 0);
  constexpr int64_t kMaxLoopTasks = 0xffffffffLL;  // the task index has 32 bits in `work`
  if (n_threads_ == 1 || n_tasks == 1 || n_tasks > kMaxLoopTasks) {
    for (int64_t t = 0; t < n_tasks; ++t) fn.call(fn.object, t, 0);
    return;
  }
  const uint32_t g = State::generation_of(s.work.load(std::memory_order_relaxed)) + 1;
  State::Job& job = s.jobs[g & 1];
  // A worker may still be looking at loop g - 2, which used this job: let it find the loop over.
  for (int spins = 0; job.readers.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (spins < kPauseSpins)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  job.object.store(fn.object, std::memory_order_relaxed);
  job.call.store(fn.call, std::memory_order_relaxed);
  job.n_tasks.store(n_tasks, std::memory_order_relaxed);
  s.done.store(0, std::memory_order_relaxed);
  s.publish(g);  // release: a worker that sees generation g sees the job

  int64_t expected = n_tasks;
  std::exception_ptr error;
  try {
    s.run_tasks(g, job, 0);
  } catch (...) {
    error = std::current_exception();
    // No more claims; wait only for the tasks already claimed, less the one that threw.
    const uint64_t w =
        s.work.exchange((uint64_t(g) << 32) | uint64_t(n_tasks), std::memory_order_relaxed);
    expected = int64_t(w & 0xffffffffu) - 1;
  }
  for (int spins = 0; s.done.load(std::memory_order_acquire) != expected; ++spins) {
    if (spins < kPauseSpins)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace vela

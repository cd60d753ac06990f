#pragma once
// A fixed set of persistent worker threads that run parallel loops for the forward pass. One
// token's pass issues ~200 small loops back to back, so starting one must cost about as much as
// a cache-line handoff, not a thread creation or a syscall: a loop is published by bumping an
// atomic generation counter that idle workers spin on for a short while (then they sleep on a
// condition variable, so an idle engine does not burn CPU). The calling thread runs tasks too,
// and tasks are claimed one at a time by whoever is there: a worker that is late (asleep or
// descheduled by a busy machine) misses the loop instead of holding up the caller.
//
// Thread-safety: parallel_for may be called from any number of threads; calls from different
// threads run one after another (a mutex). A parallel_for issued from inside a task of the same
// pool runs its tasks inline on that thread (no deadlock, no extra parallelism). The task
// function is called concurrently from several threads and must not throw on a worker thread
// (std::terminate); an exception on the calling thread is rethrown after the workers finish.
#include <cstdint>
#include <memory>
#include <type_traits>

namespace vela {

class ThreadPool {
 public:
  // n_threads counts the calling thread: the pool starts n_threads - 1 workers (at least 1 thread).
  explicit ThreadPool(int32_t n_threads);
  ~ThreadPool();  // wakes and joins the workers
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t n_threads() const { return n_threads_; }

  // Calls fn(task, thread_id) exactly once for every task in [0, n_tasks) and returns when all
  // calls have returned. thread_id is in [0, n_threads()): 0 is the calling thread, so per-thread
  // scratch can be indexed by it. Tasks are claimed dynamically; which thread runs a task is
  // unspecified, so a task's result must depend only on its index for reproducible output.
  template <class Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n_tasks,
        TaskFn{const_cast<void*>(static_cast<const void*>(&fn)),
               [](void* f, int64_t task, int32_t thread) { (*static_cast<F*>(f))(task, thread); }});
  }

 private:
  // A non-owning reference to the caller's callable: no allocation per loop.
  struct TaskFn {
    void* object;
    void (*call)(void* object, int64_t task, int32_t thread);
  };
  struct State;  // workers and synchronisation (thread_pool.cpp), so this header stays light

  void run(int64_t n_tasks, TaskFn fn);

  int32_t n_threads_;
  std::unique_ptr<State> state_;
};

}  // namespace vela

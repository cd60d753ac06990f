#pragma once
// A few threads that do a request's CPU work before and beside the engine (JSON parsing, chat
// template rendering, tokenization), so the one I/O thread never waits on it: a 100k-token
// prompt being tokenized does not hold up other connections. Jobs are sized by their input
// bytes; large ones may occupy all but one worker, so small requests always find one free.
// Thread-safety: post() may be called from any thread. Jobs run on the worker threads; the
// destructor runs what is queued, then joins.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vela::server {

class RequestWorkers {
 public:
  // Jobs with at least this many input bytes are "large" (a prompt of ~16k tokens and up).
  static constexpr size_t kLargeJobBytes = 64 * 1024;

  explicit RequestWorkers(int32_t n_threads);  // at least 1
  ~RequestWorkers();
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  void post(size_t input_bytes, std::function<void()> job);
  int32_t n_threads() const { return int32_t(threads_.size()); }

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> small_;
  std::deque<std::function<void()>> large_;
  int32_t large_running_ = 0;
  int32_t max_large_running_ = 1;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace vela::server

#include "server/request_workers.h"

#include <algorithm>

#include "util/trace.h"

namespace vela::server {

RequestWorkers::RequestWorkers(int32_t n_threads) {
  const int32_t n = std::max(n_threads, 1);
  max_large_running_ = std::max(n - 1, 1);
  threads_.reserve(size_t(n));
  for (int32_t i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

RequestWorkers::~RequestWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RequestWorkers::post(size_t input_bytes, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    (input_bytes >= kLargeJobBytes ? large_ : small_).push_back(std::move(job));
  }
  wake_.notify_one();
}

void RequestWorkers::run() {
  trace::name_this_thread("request_worker");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Small jobs first; a large one only while another worker stays free for small ones.
    const bool may_take_large = !large_.empty() && large_running_ < max_large_running_;
    if (small_.empty() && !may_take_large) {
      if (stopping_ && large_.empty()) return;
      wake_.wait(lock);
      continue;
    }
    const bool large = small_.empty();
    std::deque<std::function<void()>>& queue = large ? large_ : small_;
    std::function<void()> job = std::move(queue.front());
    queue.pop_front();
    if (large) ++large_running_;
    lock.unlock();
    job();
    job = nullptr;  // release what it captured outside the lock
    lock.lock();
    if (large) {
      --large_running_;
      wake_.notify_all();  // a waiting large job may run now
    }
  }
}

}  // namespace vela::server

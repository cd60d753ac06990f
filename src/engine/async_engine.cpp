#include "engine/async_engine.h"

#include "util/trace.h"

namespace vela {

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine, const AsyncEngineConfig& config)
    : engine_(std::move(engine)), config_(config) {
  stats_.kv = engine_->kv_usage();
  stats_.cache_groups = engine_->cache_groups();
  stats_.state_checkpoints = engine_->state_checkpoint_usage();
  thread_ = std::thread([this] { run(); });
}

AsyncEngine::~AsyncEngine() {
  shutdown(0);
}

Result<uint64_t> AsyncEngine::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                     int32_t priority, RequestCallback callback) {
  if (auto st = engine_->validate_request(prompt, params); !st) return st.error();
  return enqueue(Submission{0, std::move(prompt), params, priority, std::move(callback), {}});
}

Result<uint64_t> AsyncEngine::submit_embedding(std::vector<int32_t> prompt, Pooling pooling,
                                               int32_t priority, RequestCallback callback) {
  SamplingParams params;
  params.max_tokens = 1;
  if (auto st = engine_->validate_request(prompt, params); !st) return st.error();
  return enqueue(Submission{0, std::move(prompt), params, priority, std::move(callback), pooling});
}

Result<uint64_t> AsyncEngine::enqueue(Submission s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!accepting_) return make_error("the server is shutting down");
  if (config_.max_queued_requests > 0 &&
      stats_.waiting + inbox_.size() >= size_t(config_.max_queued_requests))
    return make_error(std::string(kQueueFull) + ": " + std::to_string(config_.max_queued_requests) +
                      " requests are already waiting");
  s.id = engine_->reserve_id();
  const uint64_t id = s.id;
  inbox_.push_back(std::move(s));
  wake_.notify_one();
  return id;
}

void AsyncEngine::abort(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  aborts_.push_back(request_id);
  wake_.notify_one();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats s = stats_;
  s.waiting += inbox_.size();
  return s;
}

void AsyncEngine::shutdown(double grace_seconds) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) return;
    accepting_ = false;
    stop_ = true;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(grace_seconds));
    wake_.notify_one();
  }
  thread_.join();
}

void AsyncEngine::run() {
  trace::name_this_thread("engine");
  std::vector<Submission> submissions;
  std::vector<uint64_t> aborts;
  bool idle = true;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (idle) {
        wake_.wait(lock, [&] { return stop_ || !inbox_.empty() || !aborts_.empty(); });
        // Batching window: give requests arriving together a moment to join the first step.
        if (!stop_ && config_.max_wait_ms > 0 && !inbox_.empty()) {
          const auto until =
              Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double, std::milli>(config_.max_wait_ms));
          const size_t full = size_t(engine_->config().scheduler.max_num_seqs);
          wake_.wait_until(lock, until, [&] { return stop_ || inbox_.size() >= full; });
        }
      }
      submissions.assign(std::make_move_iterator(inbox_.begin()),
                         std::make_move_iterator(inbox_.end()));
      inbox_.clear();
      aborts.swap(aborts_);
    }
    for (Submission& s : submissions) {
      auto added = s.pooling
                       ? engine_->add_embedding_request(std::move(s.prompt), *s.pooling, s.priority,
                                                        std::move(s.callback), s.id)
                       : engine_->add_request(std::move(s.prompt), s.params, s.priority,
                                              std::move(s.callback), s.id);
      (void)added;  // validated in submit(); the engine reports its own errors through nothing else
    }
    submissions.clear();
    for (uint64_t id : aborts) engine_->abort(id);
    aborts.clear();

    bool stopping;
    Clock::time_point deadline;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping = stop_;
      deadline = deadline_;
    }
    if (stopping && Clock::now() >= deadline) engine_->abort_all();
    (void)engine_->step();  // a failing step has already finished its requests with an error
    idle = !engine_->has_unfinished();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.counters = engine_->counters();
      stats_.kv = engine_->kv_usage();
      stats_.cache_groups = engine_->cache_groups();
      stats_.state_checkpoints = engine_->state_checkpoint_usage();
      stats_.preemptions = engine_->n_preemptions();
      stats_.running = engine_->n_running();
      stats_.waiting = engine_->n_waiting();
      if (stop_ && idle && inbox_.empty()) return;
    }
  }
}

}  // namespace vela

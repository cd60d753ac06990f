#pragma once
// Runs an Engine on its own thread so many callers (HTTP connections) can submit and cancel
// requests concurrently. Submissions are checked at once (parameters, prompt length, queue
// bound) and then wait in an inbox the engine thread drains before each step. An idle engine
// can wait a short batching window (max_wait_ms) after the first arrival so requests arriving
// together start together.
// Thread-safety: submit(), abort(), stats() and shutdown() may be called from any thread.
// Callbacks run on the engine thread: they must be quick and must not call back into the
// AsyncEngine's blocking functions (submit/abort are fine).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace vela {

struct AsyncEngineConfig {
  double max_wait_ms = 0;           // batching window before the first step of an idle engine
  int32_t max_queued_requests = 0;  // waiting requests beyond which submit() refuses (0 = no bound)
};

// A snapshot for metrics and health.
struct EngineStats {
  EngineCounters counters;
  BlockPoolUsage kv;
  std::vector<CacheGroupUsage> cache_groups;
  StateCheckpointUsage state_checkpoints;
  uint64_t preemptions = 0;
  size_t running = 0;
  size_t waiting = 0;  // in the engine's queue plus the inbox
};

class AsyncEngine {
 public:
  AsyncEngine(std::unique_ptr<Engine> engine, const AsyncEngineConfig& config);
  ~AsyncEngine();  // shutdown(0)

  // Queues a request. Errors: invalid input (same checks as Engine::add_request), "queue full"
  // (kQueueFull prefix) when max_queued_requests are already waiting, or shutting down.
  Result<uint64_t> submit(std::vector<int32_t> prompt_tokens, const SamplingParams& params,
                          int32_t priority, RequestCallback callback);
  // Queues an embedding request (Engine::add_embedding_request), with the same checks.
  Result<uint64_t> submit_embedding(std::vector<int32_t> prompt_tokens, Pooling pooling,
                                    int32_t priority, RequestCallback callback);
  void abort(uint64_t request_id);

  EngineStats stats() const;
  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }
  const Model& model() const { return engine_->model(); }
  const EngineConfig& engine_config() const { return engine_->config(); }

  // Stops accepting requests, lets running ones finish for up to `grace_seconds`, cancels the
  // rest, and joins the engine thread. Idempotent.
  void shutdown(double grace_seconds);

  static constexpr const char* kQueueFull = "queue full";

 private:
  struct Submission {
    uint64_t id;
    std::vector<int32_t> prompt;
    SamplingParams params;
    int32_t priority;
    RequestCallback callback;
    std::optional<Pooling> pooling;  // an embedding request
  };
  Result<uint64_t> enqueue(Submission submission);
  void run();

  std::unique_ptr<Engine> engine_;
  AsyncEngineConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Submission> inbox_;
  std::vector<uint64_t> aborts_;
  EngineStats stats_;
  bool accepting_ = true;
  bool stop_ = false;
  Clock::time_point deadline_{};  // when shutting down: cancel what is left at this time
  std::thread thread_;
};

}  // namespace vela

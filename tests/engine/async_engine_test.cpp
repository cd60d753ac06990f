// AsyncEngine: concurrent submissions from several threads, the queue bound, cancellation and
// shutdown with in-flight requests.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/async_engine.h"
#include "support/shared_data.h"

namespace vela {
namespace {

std::unique_ptr<Engine> make_engine(int32_t max_seqs = 8) {
  auto model = Model::load(test::shared_path("models/aidreams260K.gguf").string());
  EXPECT_TRUE(model.ok());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  EXPECT_TRUE(tok.ok());
  EngineConfig c;
  c.max_context = 128;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = 64;
  return std::make_unique<Engine>(*model, std::move(*tok), c);
}

// Collects one request's stream and waits for its end.
struct Collector {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::string text;
  bool done = false;
  FinishReason reason = FinishReason::kStop;
  std::vector<int32_t> tokens;

  RequestCallback callback() {
    return [this](const RequestEvent& e) {
      std::lock_guard<std::mutex> lock(mutex);
      text += e.text;
      if (e.finished) {
        done = true;
        reason = e.output->finish_reason;
        tokens = e.output->token_ids;
        EXPECT_EQ(text, e.output->text);
        done_cv.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(done_cv.wait_for(lock, std::chrono::seconds(60), [this] { return done; }));
  }
};

SamplingParams greedy(int32_t n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

TEST(AsyncEngine, ConcurrentSubmittersGetTheirOwnStreams) {
  VELA_REQUIRE_SHARED();
  AsyncEngine engine(make_engine(), AsyncEngineConfig{2.0, 0});
  const auto prompt = engine.tokenizer().encode("Once upon a time", true, true);
  constexpr int kThreads = 6;
  std::vector<Collector> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto id = engine.submit(prompt, greedy(20 + i), 0, results[size_t(i)].callback());
      ASSERT_TRUE(id.ok()) << id.message();
      results[size_t(i)].wait();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(results[size_t(i)].tokens.size(), size_t(20 + i));
    // Greedy: every stream is a prefix of the longest one.
    EXPECT_EQ(
        std::vector<int32_t>(results.back().tokens.begin(), results.back().tokens.begin() + 20 + i),
        results[size_t(i)].tokens);
  }
  // Stats are published after the step whose callbacks just ran: wait for that (bounded).
  EngineStats s = engine.stats();
  for (int i = 0;
       i < 2000 && (s.running + s.waiting != 0 || s.counters.finished_length != uint64_t(kThreads));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = engine.stats();
  }
  EXPECT_EQ(s.running + s.waiting, 0u);
  EXPECT_EQ(s.counters.finished_length, uint64_t(kThreads));
}

TEST(AsyncEngine, QueueBoundRefusesAtOnce) {
  VELA_REQUIRE_SHARED();
  AsyncEngine engine(make_engine(1), AsyncEngineConfig{0, 2});
  const auto prompt = engine.tokenizer().encode("Once upon a time", true, true);
  std::vector<Collector> c(8);
  int accepted = 0, refused = 0;
  for (auto& col : c) {
    auto id = engine.submit(prompt, greedy(100), 0, col.callback());
    if (id) {
      ++accepted;
    } else {
      ++refused;
      EXPECT_EQ(id.message().rfind(AsyncEngine::kQueueFull, 0), 0u) << id.message();
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_LE(accepted, 4);  // one running, two waiting, perhaps one more admitted meanwhile
  engine.shutdown(0);
}

TEST(AsyncEngine, AbortAndShutdownFinishEverything) {
  VELA_REQUIRE_SHARED();
  // A batching window, so the abort below reaches the engine before its first step: without it
  // the tiny model could generate all 100 tokens first on a busy machine (seen once in CTest).
  AsyncEngine engine(make_engine(), AsyncEngineConfig{300, 0});
  const auto prompt = engine.tokenizer().encode("Once upon a time", true, true);
  Collector a, b, late;
  auto ida = engine.submit(prompt, greedy(100), 0, a.callback());
  auto idb = engine.submit(prompt, greedy(100), 0, b.callback());
  ASSERT_TRUE(ida.ok() && idb.ok());
  engine.abort(*ida);
  a.wait();
  EXPECT_EQ(a.reason, FinishReason::kAbort);
  engine.shutdown(0);  // no grace: b is cancelled
  b.wait();
  EXPECT_TRUE(b.reason == FinishReason::kAbort || b.reason == FinishReason::kLength);
  EXPECT_FALSE(engine.submit(prompt, greedy(1), 0, late.callback()).ok());
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv.used, 0);
}

TEST(AsyncEngine, InvalidRequestsAreRefusedSynchronously) {
  VELA_REQUIRE_SHARED();
  AsyncEngine engine(make_engine(), AsyncEngineConfig{});
  SamplingParams bad = greedy(1);
  bad.top_p = 0;
  EXPECT_FALSE(engine.submit({1, 2}, bad, 0, {}).ok());
  EXPECT_FALSE(engine.submit(std::vector<int32_t>(500, 3), greedy(1), 0, {}).ok());
}

}  // namespace
}  // namespace vela

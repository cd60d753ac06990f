#pragma once
// A tensor- and pipeline-parallel group whose ranks are threads of one process (tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "model/tensor_parallel.h"

namespace vela::test {

// The ranks of one process, n_stages pipeline stages of n_ranks each. A stage's collectives
// meet at the stage's barrier: each rank publishes its buffer, then reads the others' (two
// barriers per operation: one after publishing, one after everyone has read). Batches and
// point-to-point messages go through mailboxes, so world rank 0 never waits for a rank that is
// still busy with an earlier pass (a pipeline keeps several in flight).
class ThreadGroup {
  struct Stage {
    explicit Stage(int32_t n) : sync(n), parts(size_t(n)) {}
    std::barrier<> sync;
    std::vector<std::span<float>> parts;
  };
  struct Inbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::deque<std::pair<int32_t, std::vector<float>>> messages;  // (sender, payload)
  };

 public:
  ThreadGroup(int32_t n_ranks, int32_t n_stages)
      : n_(n_ranks), n_stages_(n_stages), inbox_(size_t(n_ranks * n_stages)) {
    for (int32_t s = 0; s < n_stages; ++s) stages_.push_back(std::make_unique<Stage>(n_ranks));
  }

  class Rank : public TensorParallel {
   public:
    Rank(ThreadGroup& g, int32_t world_rank)
        : g_(g), world_rank_(world_rank), stage_(*g.stages_[size_t(world_rank / g.n_)]) {}
    int32_t rank() const override { return world_rank_ % g_.n_; }
    int32_t size() const override { return g_.n_; }
    int32_t stage() const override { return world_rank_ / g_.n_; }
    int32_t n_stages() const override { return g_.n_stages_; }
    void send_batch(const ForwardBatch& batch) override {
      BatchMessage message;
      message.encode(batch);
      g_.post_batch(message.words(), false);
    }
    void finish_batches(size_t) override {}  // send_batch copies
    std::optional<ForwardBatch> receive_batch() override {
      std::unique_lock lock(g_.batches_mutex_);
      g_.batch_posted_.wait(lock, [&] { return next_batch_ < g_.batches_.size(); });
      const auto& [closed, words] = g_.batches_[next_batch_++];
      if (closed) return std::nullopt;
      words_ = words;
      lock.unlock();
      auto b = received_.decode(words_);
      EXPECT_TRUE(b.ok()) << b.message();
      return *b;
    }
    void close() override { g_.post_batch({}, true); }
    void all_reduce_sum(std::span<float> x) override {
      stage_.parts[size_t(rank())] = x;
      stage_.sync.arrive_and_wait();
      std::vector<float> sum(x.size(), 0.0f);
      for (std::span<const float> part : stage_.parts)
        for (size_t i = 0; i < x.size(); ++i) sum[i] += part[i];
      stage_.sync.arrive_and_wait();
      std::copy(sum.begin(), sum.end(), x.begin());
    }
    void gather(std::span<const float> local, std::span<float> all, std::span<const int64_t> counts,
                bool everyone) override {
      stage_.parts[size_t(rank())] = {const_cast<float*>(local.data()), local.size()};
      stage_.sync.arrive_and_wait();
      if (everyone || rank() == 0) {
        size_t at = 0;
        for (int32_t r = 0; r < g_.n_; ++r) {
          EXPECT_EQ(int64_t(stage_.parts[size_t(r)].size()), counts[size_t(r)]);
          std::copy(stage_.parts[size_t(r)].begin(), stage_.parts[size_t(r)].end(),
                    all.begin() + at);
          at += stage_.parts[size_t(r)].size();
        }
      }
      stage_.sync.arrive_and_wait();
    }
    void send_to(int32_t to, std::span<const float> x) override {
      Inbox& box = g_.inbox_[size_t(to)];
      std::lock_guard lock(box.mutex);
      box.messages.push_back({world_rank_, std::vector<float>(x.begin(), x.end())});
      box.arrived.notify_all();
    }
    void receive_from(int32_t from, std::span<float> x) override {
      Inbox& box = g_.inbox_[size_t(world_rank_)];
      std::unique_lock lock(box.mutex);
      for (;;) {
        const auto it = std::find_if(box.messages.begin(), box.messages.end(),
                                     [&](const auto& m) { return m.first == from; });
        if (it != box.messages.end()) {
          EXPECT_EQ(it->second.size(), x.size()) << "message from rank " << from;
          std::copy_n(it->second.begin(), std::min(x.size(), it->second.size()), x.begin());
          box.messages.erase(it);
          return;
        }
        box.arrived.wait(lock);
      }
    }
    void finish_sends(size_t) override {}  // send_to copies

   private:
    ThreadGroup& g_;
    int32_t world_rank_;
    Stage& stage_;
    std::vector<int32_t> words_;
    BatchMessage received_;  // decodes words_
    size_t next_batch_ = 0;  // index in g_.batches_ of the next batch to receive
  };

 private:
  void post_batch(const std::vector<int32_t>& words, bool closed) {
    std::lock_guard lock(batches_mutex_);
    batches_.emplace_back(closed, words);
    batch_posted_.notify_all();
  }

  int32_t n_, n_stages_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<Inbox> inbox_;
  std::mutex batches_mutex_;
  std::condition_variable batch_posted_;
  std::deque<std::pair<bool, std::vector<int32_t>>> batches_;  // (close, message), every one kept
};

}  // namespace vela::test

#pragma once
// Test helpers shared by the model tests: the reference outputs in ../shared/reference, and a
// runner that feeds one sequence through the paged forward pass chunk by chunk.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "support/shared_data.h"

namespace vela::test {

struct ReferenceStep {
  int32_t token;
  std::vector<std::pair<int32_t, float>> top;  // five highest logits
};
struct ReferenceCase {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  std::vector<ReferenceStep> steps;
};

inline std::vector<ReferenceCase> read_reference(const std::string& model) {
  std::ifstream in(shared_path("reference/" + model + ".jsonl"));
  std::vector<ReferenceCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    ReferenceCase c;
    c.prompt = j["prompt"];
    c.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    for (const auto& s : j["steps"]) {
      ReferenceStep step{s["token"].get<int32_t>(), {}};
      for (const auto& t : s["top"]) step.top.emplace_back(t[0].get<int32_t>(), t[1].get<float>());
      c.steps.push_back(std::move(step));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// Runs one sequence token-chunk by token-chunk through the paged forward pass.
class SequenceRunner {
 public:
  SequenceRunner(std::shared_ptr<const Model> model, KvType kv_type, int32_t max_context = 256,
                 int32_t n_threads = 0)
      : SequenceRunner(model, kv_type, ForwardOptions{64, 64, max_context, n_threads}) {}
  // The pass's options as given (options.max_context sizes the cache).
  SequenceRunner(std::shared_ptr<const Model> model, KvType kv_type, const ForwardOptions& options)
      : forward_(model, options),
        cache_(model_cache_config(model->config(), 16, options.max_context / 16, kv_type,
                                  /*n_state_slots=*/1)),
        n_vocab_(model->config().n_vocab) {
    const int32_t max_context = options.max_context;
    // Deliberately scattered blocks (reverse order) so paging is exercised.
    for (int32_t b = max_context / 16 - 1; b >= 0; --b) table_.push_back(b);
  }

  DecoderForward& forward() { return forward_; }

  // Appends tokens at positions n_past..; returns logits of every appended token [n, n_vocab].
  std::vector<float> append(std::span<const int32_t> tokens) {
    const int32_t n = static_cast<int32_t>(tokens.size());
    std::vector<int32_t> pos(static_cast<size_t>(n)), seq(static_cast<size_t>(n), 0),
        want(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
      pos[size_t(i)] = n_past_ + i;
      want[size_t(i)] = i;
    }
    std::vector<float> logits(size_t(n) * size_t(n_vocab_));
    ForwardBatch b{tokens, pos, seq, table_, static_cast<int32_t>(table_.size()), want};
    const int32_t state_slot = 0;
    b.state_slots = std::span<const int32_t>(&state_slot, 1);
    const Status st = forward_.forward(b, cache_, logits);
    EXPECT_TRUE(st.ok()) << st.message();
    n_past_ += n;
    return logits;
  }

 private:
  DecoderForward forward_;
  KvCache cache_;
  std::vector<int32_t> table_;
  int32_t n_vocab_;
  int32_t n_past_ = 0;
};

}  // namespace vela::test

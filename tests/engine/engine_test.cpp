// The serving engine end to end on the shared models: continuous batching gives exactly the
// tokens of one-at-a-time generation — with chunked prefill, prefix-cache hits and forced
// preemption — every block returns to the pool, and priorities, cancellation and rejection work.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/sequence_runner.h"
#include "support/shared_data.h"

namespace vela {
namespace {

struct Loaded {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded load(const std::string& name) {
  Loaded l;
  auto m = Model::load(test::shared_path("models/" + name).string());
  EXPECT_TRUE(m.ok()) << m.message();
  l.model = *m;
  auto t = Tokenizer::from_gguf(l.model->gguf());
  EXPECT_TRUE(t.ok()) << t.message();
  l.tokenizer = std::make_unique<Tokenizer>(std::move(*t));
  return l;
}

std::vector<std::string> reference_prompts(const std::string& model) {
  std::ifstream in(test::shared_path("reference/" + model + ".jsonl"));
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) prompts.push_back(nlohmann::json::parse(line)["prompt"]);
  return prompts;
}

EngineConfig small_config(int32_t budget = 64, int32_t max_seqs = 8, int32_t n_blocks = 0) {
  EngineConfig c;
  c.max_context = 128;
  c.n_blocks = n_blocks;
  c.kv_type = KvType::kF16;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_num_seqs = max_seqs;
  // Recurrent models: a state checkpoint every 64 positions, so prompts of this context reuse
  // cached prefixes.
  c.state_checkpoint_interval = 64;
  return c;
}

SamplingParams greedy(int32_t n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

// Runs all prompts through one engine (submitted together); returns each one's tokens.
std::vector<std::vector<int32_t>> run_all(Engine& engine,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const SamplingParams& params,
                                          std::vector<uint64_t>* finish_order = nullptr) {
  std::vector<std::vector<int32_t>> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id =
        engine.add_request(prompts[i], params, 0, [&out, i, finish_order](const RequestEvent& e) {
          if (!e.finished) return;
          out[i] = e.output->token_ids;
          if (finish_order) finish_order->push_back(i);
        });
    EXPECT_TRUE(id.ok()) << id.message();
  }
  while (engine.has_unfinished()) {
    const Status st = engine.step();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st) break;
  }
  return out;
}

void expect_no_leak(const Engine& engine) {
  EXPECT_EQ(engine.kv_usage().used, 0);
  EXPECT_EQ(engine.check_kv_invariants(), "");
}

class EngineAgreement : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineAgreement, BatchedEqualsOneAtATimeWithChunksPrefixHitsAndPreemption) {
  VELA_REQUIRE_SHARED();
  const std::string name = GetParam();
  Loaded l = load(name + ".gguf");
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& p : reference_prompts(name))
    prompts.push_back(l.tokenizer->encode(p, true, true));
  // Two prompts sharing a long prefix with the first, so the prefix cache has something to hit.
  std::vector<int32_t> shared = prompts[0];
  for (int i = 0; i < 8; ++i) shared.insert(shared.end(), prompts[1].begin() + 1, prompts[1].end());
  prompts.push_back(shared);
  shared.push_back(prompts[2][1]);
  prompts.push_back(shared);
  const SamplingParams params = greedy(24);

  // One at a time, each in a fresh engine without prefix caching.
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    EngineConfig c = small_config();
    c.enable_prefix_caching = false;
    Engine engine(l.model, *l.tokenizer, c);
    alone.push_back(run_all(engine, {p}, params)[0]);
    expect_no_leak(engine);
  }

  struct Variant {
    const char* what;
    EngineConfig config;
  };
  // A latency target no step can meet: every step beside decodes carries the minimum prefill.
  // A pool of 12 blocks per layer group (windowed layers' groups hold blocks of their own).
  const int32_t n_groups =
      model_cache_config(l.model->config(), 16, 1, KvType::kF16, 0, true).n_groups();
  EngineConfig latency_target = small_config(256, 16);
  latency_target.scheduler.target_step_seconds = 1e-9;
  latency_target.scheduler.min_prefill_tokens = 3;
  const std::vector<Variant> variants = {
      {"batched", small_config(256, 16)},
      {"latency target (3-token prefill chunks beside decodes)", latency_target},
      {"chunked prefill (budget 5)", small_config(5, 16)},
      {"max 2 sequences", small_config(64, 2, 64)},
      {"tiny KV budget (preemption)", small_config(64, 16, 12 * n_groups)},
  };
  for (const Variant& v : variants) {
    Engine engine(l.model, *l.tokenizer, v.config);
    const auto batched = run_all(engine, prompts, params);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(batched[i], alone[i]) << v.what << ", prompt " << i;
    expect_no_leak(engine);
    if (std::string(v.what).find("preemption") != std::string::npos) {
      EXPECT_GT(engine.n_preemptions(), 0u);
    }

    // Run everything again in the same engine: whole prompts now come from the prefix cache
    // (in the first pass requests admitted in the same step could not share anything yet).
    const uint64_t hits_before = engine.kv_usage().prefix_hits;
    const auto again = run_all(engine, prompts, params);
    EXPECT_EQ(again, alone) << v.what << " (second pass)";
    // A windowed group's blocks leave the pool's reuse first (they slid out of the window, and
    // went back to the pool, long before the request ended), and a prefix needs the last ones of
    // its window: in a pool this small they are gone by the second pass.
    const bool windowed_and_tiny = n_groups > 1 && v.config.n_blocks > 0;
    if (!windowed_and_tiny) {
      EXPECT_GT(engine.kv_usage().prefix_hits, hits_before) << v.what;
    }
    if (l.model->config().recurrent()) {
      EXPECT_GT(engine.state_checkpoint_usage().hits, 0u) << v.what;
      EXPECT_EQ(engine.state_slots_used(), 0) << v.what;
    }
    expect_no_leak(engine);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, EngineAgreement,
                         ::testing::Values("aidreams260K", "tiny-llama-gqa", "tiny-qwen2-bpe-F16",
                                           "tiny-qwen35-F32", "tiny-qwen35moe-F32",
                                           // sliding-window layers in groups of their own
                                           "tiny-gemma2-F32", "tiny-gemma3-F32",
                                           // and layers that read another layer's K/V
                                           "tiny-gemma4-F32", "tiny-gemma4moe-F32",
                                           // latent attention: a K-only cache of latents
                                           "tiny-deepseek2-F32",
                                           // codebook nibbles on the packed int8 kernels
                                           // (dense IQ4_NL; gpt-oss's MXFP4 experts)
                                           "tiny-llama-256-IQ4_NL", "tiny-openai-moe-MXFP4_MOE"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Engine, HigherPriorityIsAdmittedFirst) {
  VELA_REQUIRE_SHARED();
  Loaded l = load("aidreams260K.gguf");
  EngineConfig c = small_config(64, 1);
  c.scheduler.priority_aging_per_second = 0;
  Engine engine(l.model, *l.tokenizer, c);
  std::vector<int> order;
  const auto prompt = l.tokenizer->encode("Once upon a time", true, true);
  for (int priority : {0, 5, 1}) {
    ASSERT_TRUE(engine
                    .add_request(prompt, greedy(4), priority,
                                 [&order, priority](const RequestEvent& e) {
                                   if (e.finished) order.push_back(priority);
                                 })
                    .ok());
  }
  while (engine.has_unfinished()) ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(order, (std::vector<int>{5, 1, 0}));
  expect_no_leak(engine);
}

// A structured-output request's first mask is made when the request is validated (on the
// submitting thread, under AsyncEngine), so the engine step that samples its first token finds it
// cached.
TEST(Engine, FirstGrammarMaskIsMadeAtValidation) {
  VELA_REQUIRE_SHARED();
  Loaded l = load("aidreams260K.gguf");
  Engine engine(l.model, *l.tokenizer, small_config());
  const auto prompt = l.tokenizer->encode("Once upon a time", true, true);
  SamplingParams params = greedy(3);
  params.structured_outputs.json =
      R"({"type": "object", "properties": {"n": {"type": "integer"}}})";
  ASSERT_TRUE(engine.validate_request(prompt, params).ok());
  const auto grammar = engine.constraints().compile(params.structured_outputs);
  ASSERT_TRUE(grammar.ok()) << grammar.message();
  EXPECT_EQ((*grammar)->stats().state_misses, 1u) << "validation made the first mask";
  EXPECT_EQ((*grammar)->stats().state_hits, 0u);
  ASSERT_TRUE(engine.add_request(prompt, params, 0, [](const RequestEvent&) {}).ok());
  ASSERT_TRUE(engine.step().ok());  // prefill, then the first token under the cached mask
  EXPECT_EQ((*grammar)->stats().state_misses, 1u);
  EXPECT_GE((*grammar)->stats().state_hits, 1u);
  while (engine.has_unfinished()) ASSERT_TRUE(engine.step().ok());
  expect_no_leak(engine);
}

// Sliding-window layers keep only their window: while one sequence grows to 16x the window, the
// windowed groups' blocks stay bounded (the global layer's grow with it), and the tokens are those
// of the plain forward pass that keeps every position in one cache.
TEST(Engine, WindowedLayersHoldOnlyTheirWindow) {
  VELA_REQUIRE_SHARED();
  Loaded l = load("tiny-gemma3-F32.gguf");  // window 8 on layers 0-4, layer 5 global
  EngineConfig c = small_config();
  c.block_size = 4;
  c.max_context = 160;
  const std::vector<int32_t> prompt = l.tokenizer->encode("Once upon a time", true, true);
  const int32_t n_new = 128;
  std::vector<int32_t> out;
  int32_t most_used = 0;
  {
    Engine engine(l.model, *l.tokenizer, c);
    ASSERT_TRUE(engine
                    .add_request(prompt, greedy(n_new), 0,
                                 [&out](const RequestEvent& e) {
                                   if (e.finished) out = e.output->token_ids;
                                 })
                    .ok());
    ASSERT_EQ(engine.config().block_size, 4);
    int32_t n_tokens = int32_t(prompt.size());
    while (engine.has_unfinished()) {
      ASSERT_TRUE(engine.step().ok());
      n_tokens += 1;
      const int32_t used = engine.kv_usage().used;
      most_used = std::max(most_used, used);
      // The global layer's blocks, and per windowed layer (5 groups of 1) the blocks of 8
      // positions and the step's token: at most 4 of 4 positions.
      if (engine.has_unfinished()) {
        EXPECT_LE(used, (n_tokens + 3) / 4 + 5 * 4) << n_tokens << " tokens";
      }
    }
    expect_no_leak(engine);
  }
  ASSERT_EQ(out.size(), size_t(n_new));
  // 6 layers of every position would take 6x the global layer's blocks.
  const int32_t every_position = 6 * ((int32_t(prompt.size()) + n_new + 3) / 4);
  EXPECT_LT(most_used, every_position / 3);
  std::printf("gemma3, %zu tokens: at most %d blocks held; every position of every layer: %d\n",
              prompt.size() + size_t(n_new), most_used, every_position);

  // The same greedy tokens from the forward pass over one ungrouped cache.
  test::SequenceRunner runner(l.model, KvType::kF16, 192);
  std::vector<float> logits = runner.append(prompt);
  const int32_t V = l.model->config().n_vocab;
  const float* last = logits.data() + (prompt.size() - 1) * size_t(V);
  for (int32_t i = 0; i < n_new; ++i) {
    const int32_t next = int32_t(std::max_element(last, last + V) - last);
    ASSERT_EQ(next, out[size_t(i)]) << "token " << i;
    logits = runner.append(std::span<const int32_t>(&next, 1));
    last = logits.data();
  }
}

TEST(Engine, CancellationFreesBlocksAtTheNextStep) {
  VELA_REQUIRE_SHARED();
  Loaded l = load("aidreams260K.gguf");
  Engine engine(l.model, *l.tokenizer, small_config());
  const auto prompt = l.tokenizer->encode("Once upon a time", true, true);
  std::map<uint64_t, FinishReason> finished;
  const auto cb = [&finished](const RequestEvent& e) {
    if (e.finished) finished[e.request_id] = e.output->finish_reason;
  };
  const uint64_t a = *engine.add_request(prompt, greedy(50), 0, cb);
  const uint64_t b = *engine.add_request(prompt, greedy(50), 0, cb);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine.step().ok());
  const int32_t used_before = engine.kv_usage().used;
  engine.abort(a);
  ASSERT_TRUE(engine.step().ok());
  ASSERT_TRUE(finished.count(a));
  EXPECT_EQ(finished[a], FinishReason::kAbort);
  EXPECT_LT(engine.kv_usage().used, used_before);
  EXPECT_EQ(engine.n_running(), 1u);
  engine.abort(12345);  // unknown ids are ignored
  while (engine.has_unfinished()) ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(finished[b], FinishReason::kLength);
  expect_no_leak(engine);
}

TEST(Engine, PromptsThatCanNeverFitAreRejected) {
  VELA_REQUIRE_SHARED();
  Loaded l = load("aidreams260K.gguf");
  Engine context_bound(l.model, *l.tokenizer, small_config());
  auto too_long = context_bound.add_request(std::vector<int32_t>(128, 5), greedy(1), 0, {});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("context"), std::string::npos) << too_long.message();

  Engine budget_bound(l.model, *l.tokenizer, small_config(64, 4, 2));  // 32 slots in all
  auto over_budget = budget_bound.add_request(std::vector<int32_t>(40, 5), greedy(1), 0, {});
  ASSERT_FALSE(over_budget.ok());
  EXPECT_NE(over_budget.message().find("KV cache"), std::string::npos) << over_budget.message();
  EXPECT_FALSE(budget_bound.add_request({1, 99999}, greedy(1), 0, {}).ok());
  EXPECT_FALSE(budget_bound.add_request({}, greedy(1), 0, {}).ok());
  SamplingParams bad = greedy(1);
  bad.temperature = -1;
  EXPECT_FALSE(budget_bound.add_request({1, 2}, bad, 0, {}).ok());
  // A request that fits but would outgrow the budget stops at it with "length".
  FinishReason reason = FinishReason::kStop;
  size_t n_tokens = 0;
  ASSERT_TRUE(budget_bound
                  .add_request(std::vector<int32_t>(20, 5), greedy(100), 0,
                               [&](const RequestEvent& e) {
                                 if (!e.finished) return;
                                 reason = e.output->finish_reason;
                                 n_tokens = e.output->token_ids.size();
                               })
                  .ok());
  while (budget_bound.has_unfinished()) ASSERT_TRUE(budget_bound.step().ok());
  EXPECT_EQ(reason, FinishReason::kLength);
  EXPECT_EQ(n_tokens, 12u);  // 20 + 12 = 32 slots
  expect_no_leak(budget_bound);
}

}  // namespace
}  // namespace vela

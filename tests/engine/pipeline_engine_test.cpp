// The engine over a pipeline whose ranks are threads of this process: world rank 0 keeps a pass
// per stage in flight, each of other requests, so that every stage works at once. Its greedy
// output is token for token that of one process (whole layers per stage compute the same values;
// with tensor-parallel stages, that of the same group one pass at a time), with continuous
// batching, chunked prefill, preemption, cancellations and an embedding request among them, and
// every block returns to the pool.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "support/shared_data.h"
#include "support/thread_group.h"

namespace vela {
namespace {

struct PipelineCase {
  const char* model;
  int32_t n_ranks = 1;  // tensor-parallel ranks of a stage
  int32_t n_stages = 2;
  int32_t n_blocks = 0;  // KV budget (0: enough for every request)
};

EngineConfig config(int32_t n_blocks) {
  EngineConfig c;
  c.max_context = 192;
  c.block_size = 8;
  c.n_blocks = n_blocks;
  c.n_threads = 1;
  c.scheduler.max_num_batched_tokens = 48;  // the longer prompts are prefilled in chunks
  c.scheduler.max_num_seqs = 8;
  return c;
}

std::vector<std::vector<int32_t>> prompts(const Tokenizer& tok) {
  const char* texts[] = {"Once upon a time",
                         "The little dog ran to the park and saw a big red ball under a tree",
                         "Lily",
                         "She was happy because",
                         "One day, a boy named Tim went to the store with his mom to buy",
                         "The sun",
                         "Ben and Sue liked to play in the garden every day",
                         "It was a cold night"};
  std::vector<std::vector<int32_t>> out;
  for (const char* t : texts) out.push_back(tok.encode(t, true, false));
  return out;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // each request's output
  std::vector<float> embedding;              // an embedding request's among them
  uint64_t passes_overlapped = 0;
  uint64_t preemptions = 0;
  int32_t blocks_used_after = -1;
  std::string kv_invariants;
};

// Every prompt through one engine of world rank 0 of the group (one process when both sizes
// are 1); request `cancel` (if any) is cancelled after its third token.
Outcome run(const PipelineCase& pc, bool overlap, int cancel = -1) {
  const std::string path = test::shared_path(std::string("models/") + pc.model + ".gguf").string();
  const EngineConfig base = config(pc.n_blocks);
  const int32_t world = pc.n_ranks * pc.n_stages;
  test::ThreadGroup group(pc.n_ranks, pc.n_stages);
  std::vector<std::thread> workers;
  std::shared_ptr<test::ThreadGroup::Rank> rank0;
  if (world > 1) rank0 = std::make_shared<test::ThreadGroup::Rank>(group, 0);
  const auto load = [&](int32_t w) {
    ModelLoadOptions lo;
    lo.shard = {w % pc.n_ranks, pc.n_ranks, w / pc.n_ranks, pc.n_stages};
    auto model = Model::load(path, lo);
    if (!model) {
      ADD_FAILURE() << "rank " << w << ": " << model.message();
      std::abort();  // the other ranks would wait for ever
    }
    return *model;
  };
  auto model0 = load(0);
  EngineConfig c = base;
  c.tensor_parallel = rank0;
  c.overlap_pipeline_passes = overlap;
  auto tok = Tokenizer::from_gguf(model0->gguf());
  EXPECT_TRUE(tok.ok()) << tok.message();
  auto engine = std::make_unique<Engine>(model0, std::move(*tok), c);
  for (int32_t w = 1; w < world; ++w) {
    workers.emplace_back([&, w] {
      auto model = load(w);
      ForwardOptions fo;
      fo.max_batch_tokens = base.scheduler.max_num_batched_tokens;
      fo.max_logits = base.scheduler.max_num_batched_tokens;
      fo.max_context = base.max_context;
      fo.n_threads = 1;
      fo.tensor_parallel = std::make_shared<test::ThreadGroup::Rank>(group, w);
      DecoderForward forward(model, fo);
      const ModelConfig& mc = model->config();
      KvCache cache(KvCacheConfig{mc.n_layer, mc.n_head_kv, mc.head_dim, base.block_size,
                                  engine->config().n_blocks, KvType::kF16});
      const Status st = run_tensor_parallel_worker(forward, cache, *fo.tensor_parallel);
      EXPECT_TRUE(st.ok()) << st.message();
    });
  }

  const std::vector<std::vector<int32_t>> ps = prompts(engine->tokenizer());
  Outcome out;
  out.tokens.resize(ps.size());
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 20;
  greedy.ignore_eos = true;
  std::vector<uint64_t> ids(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    auto id = engine->add_request(ps[i], greedy, 0, [&, i](const RequestEvent& e) {
      if (int(i) == cancel && !e.finished && e.request->n_output() == 3) engine->abort(ids[i]);
      if (e.finished) out.tokens[i] = e.output->token_ids;
    });
    EXPECT_TRUE(id.ok()) << id.message();
    ids[i] = *id;
  }
  // Its pass returns hidden states: it completes in the step that launched it.
  auto embedding =
      engine->add_embedding_request(ps[1], Pooling::kMean, 0, [&](const RequestEvent& e) {
        if (e.finished) out.embedding.assign(e.embedding.begin(), e.embedding.end());
      });
  EXPECT_TRUE(embedding.ok()) << embedding.message();
  while (engine->has_unfinished()) {
    const Status st = engine->step();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st) break;
  }
  out.passes_overlapped = engine->counters().passes_overlapped;
  out.preemptions = engine->n_preemptions();
  out.blocks_used_after = engine->kv_usage().used;
  out.kv_invariants = engine->check_kv_invariants();
  engine.reset();
  if (rank0) rank0->close();
  for (std::thread& t : workers) t.join();
  return out;
}

class PipelineEngine : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineEngine, PassesInFlightGiveTheTokensOfOnePassAtATime) {
  VELA_REQUIRE_SHARED();
  const PipelineCase& pc = GetParam();
  // Whole layers per stage compute exactly one process's values; split stages add partial
  // products in another order, so they are compared with the same group one pass at a time.
  const Outcome reference =
      pc.n_ranks == 1 ? run({pc.model, 1, 1, pc.n_blocks}, false) : run(pc, false);
  const Outcome overlapped = run(pc, true);
  EXPECT_EQ(reference.passes_overlapped, 0u);
  EXPECT_GT(overlapped.passes_overlapped, 0u) << "the pipeline never had two passes in flight";
  if (pc.n_blocks > 0) EXPECT_GT(overlapped.preemptions, 0u) << "the KV budget forced none";
  ASSERT_EQ(overlapped.tokens.size(), reference.tokens.size());
  for (size_t i = 0; i < reference.tokens.size(); ++i) {
    EXPECT_EQ(overlapped.tokens[i].size(), 20u) << "request " << i;
    EXPECT_EQ(overlapped.tokens[i], reference.tokens[i]) << "request " << i;
  }
  EXPECT_FALSE(overlapped.embedding.empty());
  EXPECT_EQ(overlapped.embedding, reference.embedding);
  EXPECT_EQ(overlapped.blocks_used_after, 0);
  EXPECT_EQ(overlapped.kv_invariants, "");
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, PipelineEngine,
    ::testing::Values(PipelineCase{"tiny-llama-256-Q8_0", 1, 2},
                      PipelineCase{"tiny-qwen3moe-Q8_0", 1, 3},         // three passes in flight
                      PipelineCase{"tiny-llama-256-Q4_K_M", 1, 2, 16},  // preemptions
                      PipelineCase{"aidreams260K", 2, 2}),              // 2 x 2
    [](const auto& info) {
      std::string name = std::string(info.param.model) + "_x" + std::to_string(info.param.n_ranks) +
                         "_pp" + std::to_string(info.param.n_stages);
      if (info.param.n_blocks > 0) name += "_preempting";
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// A request cancelled while its pass is in flight finishes once the pass is back; the others
// are unaffected and every block returns.
TEST(PipelineEngine, CancellingARequestInFlight) {
  VELA_REQUIRE_SHARED();
  const PipelineCase pc{"tiny-llama-256-Q8_0", 1, 2};
  const Outcome reference = run({pc.model, 1, 1}, false);
  const Outcome cancelled = run(pc, true, /*cancel=*/1);
  for (size_t i = 0; i < reference.tokens.size(); ++i) {
    if (i == 1) {
      ASSERT_GE(cancelled.tokens[i].size(), 3u);
      EXPECT_LT(cancelled.tokens[i].size(), 20u);
      EXPECT_TRUE(std::equal(cancelled.tokens[i].begin(), cancelled.tokens[i].end(),
                             reference.tokens[i].begin()));
    } else {
      EXPECT_EQ(cancelled.tokens[i], reference.tokens[i]) << "request " << i;
    }
  }
  EXPECT_EQ(cancelled.blocks_used_after, 0);
  EXPECT_EQ(cancelled.kv_invariants, "");
}

}  // namespace
}  // namespace vela

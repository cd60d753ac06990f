// Speculation with an EAGLE-3 draft head (SpecMethod::kEagle3): the head reads the inputs of three
// of the target's layers. No published head fits the shared models, so the tests build random
// heads for them (tests/model/eagle3_head_writer.h), with a reduced draft vocabulary mapped into
// the target's and without one. Outputs equal plain decoding, greedy and seeded, batched, in
// prefill chunks, under preemption and after a prefix-cache hit; a head file given as
// --draft-model alone selects the method; a head for another target is refused naming why.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../model/eagle3_head_writer.h"
#include "engine/engine.h"
#include "engine/engine_factory.h"
#include "speculation_helpers.h"
#include "support/shared_data.h"

namespace vela {
namespace {

using test::expect_pool_whole;
using test::generate_all;
using test::ids;
using test::load_model;
using test::params;
using test::SpecModel;
using test::write_temp;

std::shared_ptr<const Model> head_for(const SpecModel& m, int32_t n_draft_vocab, uint32_t seed) {
  const int32_t last = m.model->config().n_layer - 1;
  const std::vector<uint8_t> bytes =
      test::random_eagle3_head(*m.model, seed, n_draft_vocab, {0, last / 2, last});
  auto file = GgufFile::from_bytes(bytes);
  EXPECT_TRUE(file.ok()) << file.message();
  auto head = Model::eagle3_head(std::make_shared<const GgufFile>(std::move(*file)), m.model);
  EXPECT_TRUE(head.ok()) << head.message();
  return head.ok() ? *head : nullptr;
}

EngineConfig config(const std::shared_ptr<const Model>& head, int32_t budget = 64,
                    int32_t n_blocks = 0) {
  EngineConfig c;
  c.max_context = 160;
  c.n_blocks = n_blocks;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_num_seqs = 16;
  if (head) {
    c.speculative.method = SpecMethod::kEagle3;
    c.speculative.num_speculative_tokens = 3;
    c.speculative.adaptive = false;
    c.draft_head = head;
  }
  return c;
}

class Eagle3Agreement : public ::testing::TestWithParam<int32_t> {};

TEST_P(Eagle3Agreement, GreedyAndSeededOutputsEqualPlainDecoding) {
  VELA_REQUIRE_SHARED();
  const SpecModel m = load_model("tiny-llama-256-F32");
  const auto head = head_for(m, GetParam(), 5);
  ASSERT_NE(head, nullptr);
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The quick brown fox", "Once upon a time there was", "1 2 3 4 5 6",
                           "one two three one two three"})
    prompts.push_back(m.tokenizer->encode(text, true, true));
  const std::vector<SamplingParams> greedy = {params(24)};
  std::vector<SamplingParams> sampled = {params(24, 0.9f)};
  sampled[0].seed = 3;

  Engine plain(m.model, *m.tokenizer, config(nullptr));
  const auto want_greedy = ids(generate_all(plain, prompts, greedy));
  const auto want_sampled = ids(generate_all(plain, prompts, sampled));
  const struct {
    const char* what;
    EngineConfig config;
  } variants[] = {{"batched", config(head, 256)},
                  {"chunked prefill (budget 7)", config(head, 7)},
                  {"tiny KV budget (preemption)", config(head, 64, 5)}};
  for (const auto& v : variants) {
    Engine engine(m.model, *m.tokenizer, v.config);
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want_greedy) << v.what;
    EXPECT_EQ(ids(generate_all(engine, prompts, sampled)), want_sampled) << v.what << ", seeded";
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want_greedy)
        << v.what << ", after a prefix-cache hit";
    const EngineCounters& c = engine.counters();
    EXPECT_GT(c.spec_drafts, 0u) << v.what;
    std::printf("draft vocabulary %d, %s: %llu runs, %llu proposed, %llu accepted\n", GetParam(),
                v.what, (unsigned long long)c.spec_drafts, (unsigned long long)c.spec_draft_tokens,
                (unsigned long long)c.spec_accepted_tokens);
    if (std::string(v.what).find("preemption") != std::string::npos) {
      EXPECT_GT(engine.n_preemptions(), 0u);
    }
    expect_pool_whole(engine);
  }
}

// A reduced draft vocabulary (d2t) and the target's own.
INSTANTIATE_TEST_SUITE_P(DraftVocabulary, Eagle3Agreement, ::testing::Values(64, 0));

TEST(Eagle3Speculation, AHeadFileSelectsTheMethodAndAForeignHeadIsRefused) {
  VELA_REQUIRE_SHARED();
  const SpecModel m = load_model("tiny-llama-256-F32");
  const int32_t last = m.model->config().n_layer - 1;
  EngineOptions o;
  o.model_path = test::shared_path("models/tiny-llama-256-F32.gguf").string();
  o.draft_model_path =
      write_temp(test::random_eagle3_head(*m.model, 9, 64, {0, 1, last}), "vela-eagle3-head.gguf");
  {
    auto e = make_engine(o);
    ASSERT_TRUE(e.ok()) << e.message();
    EXPECT_EQ((*e)->config().speculative.method, SpecMethod::kEagle3);
  }

  // A head made for a model of another width names the mismatch.
  o.model_path = test::shared_path("models/aidreams260K.gguf").string();
  o.speculative_method = "eagle3";
  auto other = make_engine(o);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("EAGLE-3 head"), std::string::npos) << other.message();
  std::printf("%s\n", other.message().c_str());
  std::filesystem::remove(o.draft_model_path);
  // Without a head file.
  o.draft_model_path.clear();
  other = make_engine(o);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("needs a draft model"), std::string::npos) << other.message();
}

}  // namespace
}  // namespace vela

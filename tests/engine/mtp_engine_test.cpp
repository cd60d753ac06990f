// Speculation with the model's own multi-token-prediction block (SpecMethod::kMtp) in the engine:
// outputs equal plain decoding, greedy and seeded, batched, in prefill chunks, under preemption
// and after a prefix-cache hit, on a hybrid model (Gated DeltaNet, whose state rolls back) and a
// mixture of experts; sampled outputs keep the target's distribution at temperature 1, with a
// JSON-schema constraint too; `auto` picks the block where a file has one; files without the
// block, or with a broken one, are refused with a message when MTP is asked for and serve
// plainly otherwise.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "../model/model_rewrite.h"
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

std::shared_ptr<const Model> block_of(const SpecModel& m) {
  auto b = Model::mtp_block(m.model);
  EXPECT_TRUE(b.ok()) << b.message();
  return b.ok() ? *b : nullptr;
}

EngineConfig config(const std::shared_ptr<const Model>& block, int32_t budget = 64,
                    int32_t max_seqs = 16, int32_t n_blocks = 0, bool adaptive = false) {
  EngineConfig c;
  c.max_context = 160;
  c.n_blocks = n_blocks;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_num_seqs = max_seqs;
  if (block) {
    c.speculative.method = SpecMethod::kMtp;
    c.speculative.num_speculative_tokens = 3;
    c.speculative.adaptive = adaptive;
    c.draft_head = block;
  }
  return c;
}

std::vector<std::vector<int32_t>> prompts_of(const SpecModel& m) {
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text :
       {"The quick brown fox", "Once upon a time there was", "def add(a, b):\n    return a + b",
        "one two three four one two three four", "Tell me about the sea", "1 2 3 4 5 6 7 8 9"})
    prompts.push_back(m.tokenizer->encode(text, true, true));
  return prompts;
}

class MtpAgreement : public ::testing::TestWithParam<const char*> {};

TEST_P(MtpAgreement, GreedyAndSeededOutputsEqualPlainDecoding) {
  VELA_REQUIRE_SHARED();
  const SpecModel m = load_model(GetParam());
  const auto block = block_of(m);
  ASSERT_NE(block, nullptr);
  const auto prompts = prompts_of(m);
  const std::vector<SamplingParams> greedy = {params(24)};
  std::vector<SamplingParams> sampled(2, params(24, 0.9f));
  sampled[1].top_p = 0.8f;
  for (size_t i = 0; i < sampled.size(); ++i) sampled[i].seed = 31 + i;

  Engine plain(m.model, *m.tokenizer, config(nullptr));
  const auto want_greedy = ids(generate_all(plain, prompts, greedy));
  const auto want_sampled = ids(generate_all(plain, prompts, sampled));

  struct Variant {
    const char* what;
    EngineConfig config;
  };
  const std::vector<Variant> variants = {
      {"batched", config(block, 256)},
      {"chunked prefill (budget 7)", config(block, 7)},
      {"tiny KV budget (preemption)", config(block, 64, 16, 14)},
      {"adaptive policy", config(block, 256, 16, 0, true)},
  };
  for (const Variant& v : variants) {
    Engine engine(m.model, *m.tokenizer, v.config);
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want_greedy) << v.what << ", greedy";
    // The same prompts again: their blocks (and the block's rows under them) come from the
    // prefix cache.
    EXPECT_EQ(ids(generate_all(engine, prompts, sampled)), want_sampled) << v.what << ", seeded";
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want_greedy)
        << v.what << ", greedy after a prefix-cache hit";
    const EngineCounters& c = engine.counters();
    if (!v.config.speculative.adaptive) {
      EXPECT_GT(c.spec_drafts, 0u) << v.what;
    }
    EXPECT_LE(c.spec_accepted_tokens, c.spec_draft_tokens);
    std::printf("%s, %s: %llu runs, %llu proposed, %llu accepted\n", GetParam(), v.what,
                (unsigned long long)c.spec_drafts, (unsigned long long)c.spec_draft_tokens,
                (unsigned long long)c.spec_accepted_tokens);
    if (std::string(v.what).find("preemption") != std::string::npos) {
      EXPECT_GT(engine.n_preemptions(), 0u);
    }
    expect_pool_whole(engine);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, MtpAgreement,
                         ::testing::Values("tiny-qwen35-F32", "tiny-qwen35-Q8_0",
                                           "tiny-glm4moe-F32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// Per position, 300 seeded requests with and without MTP speculation at temperature 1 (and
// under a JSON schema) give histograms that agree by a chi-square homogeneity test at
// significance 0.001. Negative control: the same test tells temperature 1 from 0.3. (The shared
// files' blocks have random weights: their proposals are rarely accepted, and the grammar cuts
// them all under the schema, so this checks that following and proposing leave sampling alone;
// the accepting paths are the oracle's tests in speculative_engine_test.cpp.)
TEST(MtpSampling, PerPositionHistogramsMatchPlainSampling) {
  VELA_REQUIRE_SHARED();
  const SpecModel m = load_model("tiny-qwen35-F32");
  const auto block = block_of(m);
  ASSERT_NE(block, nullptr);
  const std::vector<int32_t> prompt = m.tokenizer->encode("The quick brown fox", true, true);
  constexpr int kRequests = 300, kPositions = 4;
  std::vector<SamplingParams> settings(2, params(kPositions, 1.0f));
  settings[1].structured_outputs.json =
      R"({"type":"array","items":{"type":"integer"},"minItems":3})";
  const char* names[] = {"temperature 1", "temperature 1 under a JSON schema"};
  const int32_t n_vocab = m.tokenizer->n_vocab();
  const auto histograms = [&](const std::vector<std::vector<int32_t>>& outs, int pos) {
    std::vector<int> h(static_cast<size_t>(n_vocab));
    for (const auto& o : outs)
      if (size_t(pos) < o.size()) ++h[size_t(o[size_t(pos)])];
    return h;
  };
  for (size_t s = 0; s < settings.size(); ++s) {
    const std::vector<std::vector<int32_t>> prompts(kRequests, prompt);
    std::vector<SamplingParams> a_params(kRequests, settings[s]), b_params = a_params;
    for (int i = 0; i < kRequests; ++i) {
      a_params[size_t(i)].seed = 1000 + uint64_t(i);
      b_params[size_t(i)].seed = 700000 + uint64_t(i);  // independent samples
    }
    Engine plain(m.model, *m.tokenizer, config(nullptr, 256, 64));
    Engine spec(m.model, *m.tokenizer, config(block, 256, 64));
    const auto a = ids(generate_all(plain, prompts, a_params));
    const auto b = ids(generate_all(spec, prompts, b_params));
    if (s == 0) {
      EXPECT_GT(spec.counters().spec_draft_tokens, 0u);
    }
    for (int pos = 0; pos < kPositions; ++pos) {
      int df = 0;
      const double stat = test::homogeneity_chi_square(histograms(a, pos), histograms(b, pos), df);
      if (df == 0) continue;  // one token only (the grammar's forced ones)
      EXPECT_LT(stat, test::critical_0_001(df)) << names[s] << ", position " << pos;
      std::printf("%s, position %d: chi-square %.1f, df %d, critical %.1f\n", names[s], pos, stat,
                  df, test::critical_0_001(df));
    }
    if (s == 0) {
      std::vector<SamplingParams> cooler = b_params;
      for (SamplingParams& p : cooler) p.temperature = 0.3f;
      Engine other(m.model, *m.tokenizer, config(block, 256, 64));
      const auto c = ids(generate_all(other, prompts, cooler));
      for (int pos = 0; pos < kPositions; ++pos) {
        int df = 0;
        const double stat =
            test::homogeneity_chi_square(histograms(a, pos), histograms(c, pos), df);
        ASSERT_GT(df, 0);
        EXPECT_GT(stat, test::critical_0_001(df))
            << "temperature 0.3 passes for 1, position " << pos;
      }
    }
    expect_pool_whole(spec);
  }
}

// While the adaptive policy measures a token's price it alternates plain steps with granted
// ones; the block must have its first proposal ready for the granted step after a plain one, or
// the grant verifies nothing, no step of another token count comes, and the policy measures
// forever (it proposed once in 120 tokens so). Every proposal is replaced by a wrong token; the
// block's first proposals, recorded by the sequence length they were made at, are many and equal
// those of an engine that grants every step.
TEST(MtpSpeculation, AdaptivePolicyHasProposalsWhileItMeasures) {
  VELA_REQUIRE_SHARED();
  const SpecModel m = load_model("tiny-qwen35-F32");
  const auto block = block_of(m);
  ASSERT_NE(block, nullptr);
  const std::vector<std::vector<int32_t>> prompt = {
      m.tokenizer->encode("Once upon a time there was", true, true)};
  const int32_t n_tokens = 60;
  Engine plain(m.model, *m.tokenizer, config(nullptr));
  const std::vector<int32_t> want = ids(generate_all(plain, prompt, {params(n_tokens)}))[0];
  const int32_t n_vocab = m.tokenizer->n_vocab();
  const size_t n_prompt = prompt[0].size();
  // First proposals by sequence length.
  const auto run = [&](const EngineConfig& c) {
    std::map<size_t, int32_t> first;
    Engine engine(m.model, *m.tokenizer, c);
    engine.set_proposal_replay(
        [&](uint64_t, std::span<const int32_t> tokens, std::span<int32_t> out) {
          first[tokens.size()] = out[0];
          const size_t done = tokens.size() - n_prompt;
          for (size_t i = 0; i < out.size() && done + i < want.size(); ++i)
            out[i] = (want[done + i] + 1) % n_vocab;
          return int32_t(out.size());
        });
    EXPECT_EQ(ids(generate_all(engine, prompt, {params(n_tokens)}))[0], want);
    EXPECT_EQ(engine.counters().spec_accepted_tokens, 0u);
    expect_pool_whole(engine);
    return first;
  };
  const std::map<size_t, int32_t> every_step = run(config(block, 256));
  const std::map<size_t, int32_t> adaptive = run(config(block, 256, 16, 0, true));
  // Measuring takes 8 steps or more, every other one granted.
  EXPECT_GE(adaptive.size(), 4u);
  for (const auto& [length, token] : adaptive) {
    const auto it = every_step.find(length);
    ASSERT_NE(it, every_step.end()) << "length " << length;
    EXPECT_EQ(token, it->second) << "length " << length;
  }
}

TEST(MtpSpeculation, AutoPicksTheBlockAndBrokenBlocksAreNamed) {
  VELA_REQUIRE_SHARED();
  EngineOptions o;
  o.model_path = test::shared_path("models/tiny-qwen35-F32.gguf").string();
  o.speculative_method = "auto";
  auto e = make_engine(o);
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ((*e)->config().speculative.method, SpecMethod::kMtp);

  o.model_path = test::shared_path("models/tiny-llama-gqa.gguf").string();
  e = make_engine(o);
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ((*e)->config().speculative.method, SpecMethod::kNgram) << "no block: prompt lookup";
  o.speculative_method = "mtp";
  e = make_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("no multi-token-prediction layers"), std::string::npos) << e.message();

  // The block's projection missing: MTP is refused naming it; plain decoding serves.
  auto file = GgufFile::open(test::shared_path("models/tiny-qwen35-F32.gguf").string());
  ASSERT_TRUE(file.ok());
  o.model_path = write_temp(test::rewrite_model(*file, {}, {"blk.3.nextn.eh_proj.weight"}),
                            "vela-mtp-no-eh-proj.gguf");
  e = make_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("blk.3.nextn.eh_proj.weight"), std::string::npos) << e.message();
  o.speculative_method = "none";
  e = make_engine(o);
  EXPECT_TRUE(e.ok()) << e.message();
  std::filesystem::remove(o.model_path);
}

}  // namespace
}  // namespace vela

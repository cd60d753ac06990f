// Speculative decoding in the engine, on the shared models: with n-gram proposals verified in
// the batched pass, greedy output is token-for-token that of plain decoding — many requests
// together, chunked prefill, preemption — and so is seeded sampled output (a deterministic
// proposal is checked by the target's own draw, so a seed draws the same tokens). Every block
// returns to the pool, the prefix cache serves only verified tokens, cancellation mid-run
// frees everything, stop strings and max_tokens hold inside an accepted run, and bad
// speculative options are refused with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/engine.h"
#include "engine/engine_factory.h"
#include "spec/draft_model.h"
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

// Reference prompts, and prompts that quote themselves (so prompt lookup has matches early).
std::vector<std::vector<int32_t>> spec_prompts(const SpecModel& m, const std::string& name) {
  std::vector<std::vector<int32_t>> prompts;
  std::ifstream in(test::shared_path("reference/" + name + ".jsonl"));
  std::string line;
  while (std::getline(in, line) && prompts.size() < 6)
    if (!line.empty())
      prompts.push_back(m.tokenizer->encode(
          nlohmann::json::parse(line)["prompt"].get<std::string>(), true, true));
  prompts.push_back(m.tokenizer->encode(
      "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add(", true,
      true));
  prompts.push_back(
      m.tokenizer->encode("one two three four one two three four one two", true, true));
  return prompts;
}

EngineConfig config(bool speculate, int32_t budget = 64, int32_t max_seqs = 16,
                    int32_t n_blocks = 0) {
  EngineConfig c;
  c.max_context = 160;
  c.n_blocks = n_blocks;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_num_seqs = max_seqs;
  if (speculate) {
    c.speculative.method = SpecMethod::kNgram;
    c.speculative.num_speculative_tokens = 4;
    c.speculative.prompt_lookup_min = 1;
    c.speculative.prompt_lookup_max = 3;
    c.speculative.adaptive = false;  // always verify what is proposed: the path under test
  }
  return c;
}

// The layer groups of the model's cache: each windowed group holds blocks of its own, so a tiny
// KV budget is given per group.
int32_t cache_groups(const SpecModel& m) {
  return model_cache_config(m.model->config(), 16, 1, KvType::kF16, 0, true).n_groups();
}

// Proposes the continuation of plain decoding's outputs `want` (request i + 1 ran prompt i),
// with every third call's second proposal wrong.
TokenProposer oracle_proposer(const std::vector<std::vector<int32_t>>& prompts,
                              const std::vector<std::vector<int32_t>>& want, int32_t n_vocab) {
  return [&prompts, &want, n_vocab, calls = 0](uint64_t id, std::span<const int32_t> tokens,
                                               std::span<int32_t> out) mutable {
    const size_t i = size_t(id - 1);
    const size_t done = tokens.size() - prompts[i].size();
    int32_t n = 0;
    for (; size_t(n) < out.size() && done + size_t(n) < want[i].size(); ++n)
      out[size_t(n)] = want[i][done + size_t(n)];
    if (++calls % 3 == 0 && n > 1) out[1] = (out[1] + 1) % n_vocab;
    return n;
  };
}

struct AgreementCase {
  const char* model;
  // Its greedy outputs fall into loops, so proposals are accepted; on the others (random
  // weights that never repeat themselves) every proposal is rejected and rolled back.
  bool accepts;
};

class SpeculativeAgreement : public ::testing::TestWithParam<AgreementCase> {};

TEST_P(SpeculativeAgreement, GreedyAndSeededOutputsEqualPlainDecoding) {
  VELA_REQUIRE_SHARED();
  const std::string name = GetParam().model;
  SpecModel m = load_model(name);
  const auto prompts = spec_prompts(m, name);
  std::vector<SamplingParams> greedy = {params(40)};
  std::vector<SamplingParams> sampled(3, params(40, 0.9f));
  sampled[1].top_p = 0.8f;
  sampled[2].min_p = 0.1f;
  for (size_t i = 0; i < sampled.size(); ++i) sampled[i].seed = 17 + i;

  Engine plain(m.model, *m.tokenizer, config(false));
  const auto want_greedy = ids(generate_all(plain, prompts, greedy));
  const auto want_sampled = ids(generate_all(plain, prompts, sampled));

  struct Variant {
    const char* what;
    EngineConfig config;
  };
  const std::vector<Variant> variants = {
      {"batched", config(true, 256)},
      {"chunked prefill (budget 7)", config(true, 7)},
      {"tiny KV budget (preemption)", config(true, 64, 16, 14 * cache_groups(m))},
  };
  for (const Variant& v : variants) {
    Engine engine(m.model, *m.tokenizer, v.config);
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want_greedy) << v.what << ", greedy";
    EXPECT_EQ(ids(generate_all(engine, prompts, sampled)), want_sampled) << v.what << ", seeded";
    const EngineCounters& c = engine.counters();
    EXPECT_GT(c.spec_drafts, 0u) << v.what;
    if (GetParam().accepts) {
      EXPECT_GT(c.spec_accepted_tokens, 0u) << v.what << ": no proposal was ever accepted";
    }
    std::printf("%s, %s: %llu runs, %llu proposed, %llu accepted\n", name.c_str(), v.what,
                (unsigned long long)c.spec_drafts, (unsigned long long)c.spec_draft_tokens,
                (unsigned long long)c.spec_accepted_tokens);
    EXPECT_LE(c.spec_accepted_tokens, c.spec_draft_tokens);
    EXPECT_EQ(c.spec_accepted_at[0] >= c.spec_accepted_at[1], true);
    if (std::string(v.what).find("preemption") != std::string::npos) {
      EXPECT_GT(engine.n_preemptions(), 0u);
    }
    expect_pool_whole(engine);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, SpeculativeAgreement,
                         ::testing::Values(AgreementCase{"aidreams260K", true},
                                           AgreementCase{"tiny-llama-gqa", false},
                                           AgreementCase{"tiny-qwen2-bpe-F16", false},
                                           AgreementCase{"tiny-qwen3-Q8_0", true},
                                           AgreementCase{"tiny-mixtral-Q4_0", false},
                                           // Recurrent layers: the state saved after each
                                           // proposal replaces the one a rejection leaves.
                                           AgreementCase{"tiny-qwen35-F32", false},
                                           AgreementCase{"tiny-qwen35moe-Q4_K_M", false},
                                           AgreementCase{"tiny-deepseek2-F32", false},
                                           // Sliding windows in cache groups of their own
                                           // (gemma4: and layers reading another layer's K/V).
                                           AgreementCase{"tiny-gemma4-F32", false},
                                           AgreementCase{"tiny-gemma3-F32", false}),
                         [](const auto& info) {
                           std::string n = info.param.model;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// An oracle that knows plain decoding's outputs proposes them, with every third call's second
// proposal wrong: most proposals are accepted, so the tokens after each accepted run depend on
// K/V written during verification, and the rejections roll back mid-run.
TEST_P(SpeculativeAgreement, MostlyRightProposalsKeepOutputsExact) {
  VELA_REQUIRE_SHARED();
  const std::string name = GetParam().model;
  SpecModel m = load_model(name);
  const auto prompts = spec_prompts(m, name);
  const std::vector<SamplingParams> greedy = {params(40)};
  Engine plain(m.model, *m.tokenizer, config(false));
  const auto want = ids(generate_all(plain, prompts, greedy));

  const int32_t tiny = 12 * cache_groups(m);
  for (const auto& [budget, n_blocks] : {std::pair{256, 0}, std::pair{9, 0}, std::pair{64, tiny}}) {
    Engine engine(m.model, *m.tokenizer, config(true, budget, 16, n_blocks));
    engine.set_proposer(oracle_proposer(prompts, want, m.tokenizer->n_vocab()));
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want) << "budget " << budget;
    const EngineCounters& c = engine.counters();
    EXPECT_GT(double(c.spec_accepted_tokens), 0.6 * double(c.spec_draft_tokens));
    EXPECT_LT(c.spec_accepted_tokens, c.spec_draft_tokens);
    expect_pool_whole(engine);
    if (n_blocks > 0) {
      EXPECT_GT(engine.n_preemptions(), 0u);
    }
  }
}

// Structured-output requests speculate too: each verified row takes the mask of the grammar
// state the tokens before it reach, and proposals the grammar rules out are cut before
// verification, so outputs equal plain constrained decoding, greedy and seeded, with prompt
// lookup's proposals and with an oracle's (mostly right, some wrong or outside the grammar).
TEST(SpeculativeEngine, StructuredOutputsSpeculateAndKeepOutputsExact) {
  VELA_REQUIRE_SHARED();
  SpecModel m = load_model("aidreams260K");
  const auto prompts = spec_prompts(m, "aidreams260K");
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},)"
      R"("age":{"type":"integer"}},"required":["name","age"]})";
  const std::string regex = "(one|two|three)( (one|two|three)){2,14}";
  std::vector<SamplingParams> per = {params(40), params(40, 0.9f), params(40), params(40, 0.9f)};
  per[0].structured_outputs.json = per[1].structured_outputs.json = schema;
  per[2].structured_outputs.regex = per[3].structured_outputs.regex = regex;
  per[1].seed = 5;
  per[3].seed = 9;
  Engine plain(m.model, *m.tokenizer, config(false));
  const auto want = ids(generate_all(plain, prompts, per));
  EXPECT_EQ(plain.counters().spec_drafts, 0u);

  Engine lookup(m.model, *m.tokenizer, config(true));
  EXPECT_EQ(ids(generate_all(lookup, prompts, per)), want) << "prompt lookup";
  EXPECT_GT(lookup.counters().spec_drafts, 0u);
  expect_pool_whole(lookup);

  Engine oracle(m.model, *m.tokenizer, config(true));
  oracle.set_proposer(oracle_proposer(prompts, want, m.tokenizer->n_vocab()));
  EXPECT_EQ(ids(generate_all(oracle, prompts, per)), want) << "oracle";
  const EngineCounters& c = oracle.counters();
  EXPECT_GT(c.spec_drafts, 0u);
  EXPECT_GT(double(c.spec_accepted_tokens), 0.5 * double(c.spec_draft_tokens));
  expect_pool_whole(oracle);
}

TEST(SpeculativeEngine, PrefixCacheHoldsOnlyVerifiedTokens) {
  VELA_REQUIRE_SHARED();
  SpecModel m = load_model("tiny-qwen3-Q8_0");
  const auto prompts = spec_prompts(m, "tiny-qwen3-Q8_0");
  Engine engine(m.model, *m.tokenizer, config(true, 64));
  const auto first = generate_all(engine, prompts, {params(48)});
  ASSERT_LT(engine.counters().spec_accepted_tokens, engine.counters().spec_draft_tokens)
      << "the run should have rejected some proposals";
  // Continue each request from its prompt + output: the cached blocks (registered while
  // proposals were being rejected) must hold exactly those tokens' K/V, so the continuation
  // equals one computed from scratch.
  std::vector<std::vector<int32_t>> continued;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> p = prompts[i];
    p.insert(p.end(), first[i].token_ids.begin(), first[i].token_ids.end());
    continued.push_back(p);
  }
  const uint64_t hits_before = engine.kv_usage().prefix_hits;
  const auto again = ids(generate_all(engine, continued, {params(16)}));
  EXPECT_GT(engine.kv_usage().prefix_hits, hits_before);
  EngineConfig fresh = config(false);
  fresh.enable_prefix_caching = false;
  Engine reference(m.model, *m.tokenizer, fresh);
  EXPECT_EQ(again, ids(generate_all(reference, continued, {params(16)})));
  expect_pool_whole(engine);
}

TEST(SpeculativeEngine, StopsHoldInsideAnAcceptedRun) {
  VELA_REQUIRE_SHARED();
  SpecModel m = load_model("tiny-qwen3-Q8_0");
  const auto prompts = spec_prompts(m, "tiny-qwen3-Q8_0");
  Engine plain(m.model, *m.tokenizer, config(false));
  uint64_t accepted = 0;
  const auto base = generate_all(plain, prompts, {params(40)});
  // For each prompt: max_tokens cut and a stop string taken from the middle of the text.
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<SamplingParams> cut = {params(13)};
    const std::string& text = base[i].text;
    if (text.size() > 12) cut[0].stop = {text.substr(text.size() / 2, 3)};
    Engine want_engine(m.model, *m.tokenizer, config(false));
    Engine spec_engine(m.model, *m.tokenizer, config(true));
    const auto want = generate_all(want_engine, {prompts[i]}, cut)[0];
    std::string streamed;
    std::vector<int32_t> streamed_tokens;
    CompletionOutput got;
    ASSERT_TRUE(spec_engine
                    .add_request(prompts[i], cut[0], 0,
                                 [&](const RequestEvent& e) {
                                   streamed += std::string(e.text);
                                   if (e.token >= 0) streamed_tokens.push_back(e.token);
                                   if (e.finished) got = *e.output;
                                 })
                    .ok());
    while (spec_engine.has_unfinished()) ASSERT_TRUE(spec_engine.step().ok());
    EXPECT_EQ(got.token_ids, want.token_ids) << "prompt " << i;
    EXPECT_EQ(got.text, want.text) << "prompt " << i;
    EXPECT_EQ(got.finish_reason, want.finish_reason) << "prompt " << i;
    EXPECT_EQ(streamed, want.text) << "prompt " << i << ": text after a stop was streamed";
    EXPECT_EQ(streamed_tokens, want.token_ids) << "prompt " << i;
    expect_pool_whole(spec_engine);
    accepted += spec_engine.counters().spec_accepted_tokens;
  }
  EXPECT_GT(accepted, 0u);
}

TEST(SpeculativeEngine, CancellationMidRunFreesEverything) {
  VELA_REQUIRE_SHARED();
  SpecModel m = load_model("aidreams260K");
  const auto prompts = spec_prompts(m, "aidreams260K");
  Engine engine(m.model, *m.tokenizer, config(true));
  std::vector<uint64_t> ids_;
  for (const auto& p : prompts) {
    auto id = engine.add_request(p, params(60), 0, {});
    ASSERT_TRUE(id.ok());
    ids_.push_back(*id);
  }
  for (int i = 0; i < 12 && engine.has_unfinished(); ++i) ASSERT_TRUE(engine.step().ok());
  EXPECT_GT(engine.counters().spec_drafts, 0u);
  for (size_t i = 0; i < ids_.size(); i += 2) engine.abort(ids_[i]);
  ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(engine.check_kv_invariants(), "");
  engine.abort_all();
  ASSERT_TRUE(engine.step().ok());
  EXPECT_FALSE(engine.has_unfinished());
  expect_pool_whole(engine);
}

// (That the policy stops verifying proposals it does not expect to win is checked step by step
// with a draft model: DraftSpeculation.AdaptivePolicyStopsThenOnlyProbes.)
TEST(SpeculativeEngine, AdaptivePolicyKeepsOutputs) {
  VELA_REQUIRE_SHARED();
  SpecModel m = load_model("tiny-llama-gqa");
  const auto prompts = spec_prompts(m, "tiny-llama-gqa");
  Engine plain(m.model, *m.tokenizer, config(false));
  EngineConfig c = config(true);
  c.speculative.adaptive = true;
  Engine adaptive(m.model, *m.tokenizer, c);
  EXPECT_EQ(ids(generate_all(adaptive, prompts, {params(40)})),
            ids(generate_all(plain, prompts, {params(40)})));
  expect_pool_whole(adaptive);
}

TEST(SpeculativeEngine, BadOptionsAreRefused) {
  VELA_REQUIRE_SHARED();
  EngineOptions o;
  o.model_path = test::shared_path("models/aidreams260K.gguf").string();
  o.speculative_method = "ngram";
  o.num_speculative_tokens = 0;
  auto e = make_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("number of speculative tokens must be in [1, 16], got 0"),
            std::string::npos)
      << e.message();
  o.num_speculative_tokens = 99;
  EXPECT_FALSE(make_engine(o).ok());
  o.num_speculative_tokens = 4;
  o.speculative_method = "medusa";
  e = make_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("unknown speculative method 'medusa'"), std::string::npos);
  o.speculative_method = "ngram";
  o.prompt_lookup_min = 5;
  o.prompt_lookup_max = 2;
  EXPECT_FALSE(make_engine(o).ok());
  o.prompt_lookup_min = 1;
  auto ok = make_engine(o);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_TRUE((*ok)->config().speculative.enabled());
}

}  // namespace
}  // namespace vela

namespace vela {
namespace {

using test::critical_0_001;
using test::homogeneity_chi_square;

EngineConfig draft_config(std::shared_ptr<const Model> draft, int32_t budget = 64,
                          int32_t n_blocks = 0) {
  EngineConfig c = config(true, budget, 16, n_blocks);
  c.speculative.method = SpecMethod::kDraft;
  c.draft_model = std::move(draft);
  return c;
}

struct DraftCase {
  const char* target;
  const char* draft;
};

class DraftAgreement : public ::testing::TestWithParam<DraftCase> {};

// A lower-bit copy of the target as its draft: greedy outputs equal plain decoding, batched,
// in chunks and under preemption; the draft's blocks all return when the requests finish.
TEST_P(DraftAgreement, GreedyOutputsEqualPlainDecoding) {
  VELA_REQUIRE_SHARED();
  SpecModel target = load_model(GetParam().target);
  SpecModel draft = load_model(GetParam().draft);
  ASSERT_TRUE(check_same_vocabulary(*target.tokenizer, *draft.tokenizer).ok());
  const auto prompts = spec_prompts(target, GetParam().target);
  const std::vector<SamplingParams> greedy = {params(32)};
  Engine plain(target.model, *target.tokenizer, config(false));
  const auto want = ids(generate_all(plain, prompts, greedy));
  EngineConfig adaptive = draft_config(draft.model, 256);
  adaptive.speculative.adaptive = true;
  for (const auto& [what, c] :
       {std::pair{"adaptive", adaptive}, std::pair{"batched", draft_config(draft.model, 256)},
        std::pair{"chunked prefill (budget 7)", draft_config(draft.model, 7)},
        std::pair{"tiny KV budget (preemption)", draft_config(draft.model, 64, 14)}}) {
    Engine engine(target.model, *target.tokenizer, c);
    EXPECT_EQ(ids(generate_all(engine, prompts, greedy)), want) << what;
    const EngineCounters& k = engine.counters();
    if (std::string(what) != "adaptive") {
      EXPECT_GT(k.spec_accepted_tokens, 0u) << what;
    }
    // Preempted requests give their draft blocks back and catch up again when they resume.
    if (std::string(what).starts_with("tiny KV budget")) EXPECT_GT(engine.n_preemptions(), 0u);
    // The target as its own draft: every proposal is what the target computes.
    if (std::string(GetParam().target) == GetParam().draft) {
      EXPECT_EQ(k.spec_accepted_tokens, k.spec_draft_tokens) << what;
    }
    std::printf("%s drafted by %s, %s: %llu runs, %llu proposed, %llu accepted\n",
                GetParam().target, GetParam().draft, what, (unsigned long long)k.spec_drafts,
                (unsigned long long)k.spec_draft_tokens,
                (unsigned long long)k.spec_accepted_tokens);
    expect_pool_whole(engine);
    EXPECT_EQ(engine.draft_kv_blocks_used(), 0) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, DraftAgreement,
                         ::testing::Values(DraftCase{"tiny-llama-256-F32", "tiny-llama-256-F32"},
                                           DraftCase{"tiny-llama-256-F32", "tiny-llama-256-Q4_0"},
                                           DraftCase{"tiny-qwen3-Q8_0", "tiny-qwen3-Q4_K_M"},
                                           DraftCase{"tiny-mixtral-F32", "tiny-mixtral-Q4_0"},
                                           DraftCase{"tiny-llama-256-F32", "tiny-qwen3-Q8_0"}),
                         [](const auto& info) {
                           std::string n =
                               std::string(info.param.target) + "_by_" + info.param.draft;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// A draft that is never right: the adaptive policy soon stops drafting, then probes again every
// SpeculationPolicy::kReprobeSteps steps (so a request whose text turns predictable can win
// again); the outputs stay those of plain decoding. Stepped one step at a time: once the policy
// has turned off (kReprobeSteps - 1 steps in a row verify nothing), steps verify proposals about
// as often as they probe, one proposal each, and probes do happen. (Checked to fail with a
// policy that never turns off, and with one that never probes.)
TEST(DraftSpeculation, AdaptivePolicyStopsThenOnlyProbes) {
  VELA_REQUIRE_SHARED();
  SpecModel target = load_model("tiny-llama-256-F32");
  SpecModel draft = load_model("tiny-qwen3-Q8_0");
  const std::vector<std::vector<int32_t>> prompt = {
      target.tokenizer->encode("Once upon a time there was", true, true)};
  const int32_t n_tokens = 140;
  Engine plain(target.model, *target.tokenizer, config(false));
  const auto want = ids(generate_all(plain, prompt, {params(n_tokens)}));
  EngineConfig c = draft_config(draft.model, 256);
  c.speculative.adaptive = true;
  Engine engine(target.model, *target.tokenizer, c);
  std::vector<CompletionOutput> out(1);
  ASSERT_TRUE(engine
                  .add_request(prompt[0], params(n_tokens), 0,
                               [&out](const RequestEvent& e) {
                                 if (e.finished) out[0] = *e.output;
                               })
                  .ok());
  // Proposals verified in each step.
  std::vector<uint64_t> proposed;
  while (engine.has_unfinished()) {
    const uint64_t before = engine.counters().spec_draft_tokens;
    ASSERT_TRUE(engine.step().ok());
    proposed.push_back(engine.counters().spec_draft_tokens - before);
  }
  EXPECT_EQ(ids(out), want);
  const EngineCounters& k = engine.counters();
  std::printf("%zu steps, %llu runs, %llu proposed, %llu accepted\n", proposed.size(),
              (unsigned long long)k.spec_drafts, (unsigned long long)k.spec_draft_tokens,
              (unsigned long long)k.spec_accepted_tokens);
  ASSERT_LT(k.spec_accepted_tokens * 4, k.spec_draft_tokens) << "the draft should be mostly wrong";
  // The policy turns off, soon: within the first third of the steps, kReprobeSteps - 1 steps in
  // a row after a drafting one verify nothing (while it explores, every other step is plain;
  // once off, probes come every kReprobeSteps steps at the most).
  const auto first_draft =
      std::find_if(proposed.begin(), proposed.end(), [](uint64_t n) { return n > 0; });
  ASSERT_NE(first_draft, proposed.end()) << "the policy never drafted";
  const std::vector<uint64_t> idle(size_t(SpeculationPolicy::kReprobeSteps - 1), 0);
  const auto off = std::search(first_draft, proposed.end(), idle.begin(), idle.end());
  ASSERT_NE(off, proposed.end()) << "the policy never stopped drafting";
  EXPECT_LT(size_t(off - proposed.begin()), proposed.size() / 3) << "the policy stopped late";
  // From there on, mostly probes: one proposal every kReprobeSteps steps. (A probe lets the
  // draft catch up on the sequence, so the step after it may see a run of proposals priced
  // without that cost; on a busy machine, whose step times jump, the policy may grant one.)
  size_t verifying_steps = 0;
  uint64_t proposals_after = 0;
  for (auto it = off; it != proposed.end(); ++it) {
    verifying_steps += *it > 0;
    proposals_after += *it;
  }
  const size_t steps_off = size_t(proposed.end() - off);
  const size_t probes = steps_off / size_t(SpeculationPolicy::kReprobeSteps);
  EXPECT_GE(verifying_steps + 1, probes) << "the policy stopped probing";
  EXPECT_GT(verifying_steps, 0u) << "the policy never probed";
  EXPECT_LE(proposals_after, 2 * probes + 2) << "the policy drafted again";
  expect_pool_whole(engine);
  EXPECT_EQ(engine.draft_kv_blocks_used(), 0);
}

// Sampled output keeps its distribution with a draft model whose q differs much from p (another
// random model on the same vocabulary, so rejection sampling does real work): per position, the
// histograms of 400 seeded requests with and without speculation agree by a chi-square
// homogeneity test at significance 0.001 — for temperature, top-p, min-p and penalty settings.
// Seeds are fixed, so the test is deterministic.
TEST(DraftSampling, PerPositionHistogramsMatchPlainSampling) {
  VELA_REQUIRE_SHARED();
  SpecModel target = load_model("tiny-llama-256-F32");
  SpecModel draft = load_model("tiny-qwen3-Q8_0");
  const std::vector<int32_t> prompt = target.tokenizer->encode("The quick brown fox", true, true);
  constexpr int kRequests = 400, kPositions = 4;
  std::vector<SamplingParams> settings(4, params(kPositions, 1.0f));
  settings[1].top_p = 0.9f;
  settings[2].min_p = 0.05f;
  settings[2].temperature = 1.3f;
  // The draft's q then follows the penalties over the run's earlier proposals too.
  settings[3].repetition_penalty = 1.5f;
  settings[3].presence_penalty = 1.0f;
  settings[3].frequency_penalty = 0.5f;
  settings[3].min_tokens = kPositions;  // the stop token is never drawn: outputs stay full
  settings[3].stop_token_ids = {target.tokenizer->eos_id()};
  const char* names[] = {"temperature 1", "top_p 0.9", "min_p 0.05 at temperature 1.3",
                         "repetition, presence and frequency penalties, min_tokens"};
  const int32_t n_vocab = target.tokenizer->n_vocab();
  for (size_t s = 0; s < settings.size(); ++s) {
    std::vector<std::vector<int32_t>> prompts(kRequests, prompt);
    std::vector<SamplingParams> per_request(kRequests, settings[s]);
    for (int i = 0; i < kRequests; ++i) per_request[size_t(i)].seed = 1000 + uint64_t(i);
    // Plain and speculative runs use different seeds: independent samples.
    std::vector<SamplingParams> other = per_request;
    for (int i = 0; i < kRequests; ++i) other[size_t(i)].seed = 900000 + uint64_t(i);
    Engine plain(target.model, *target.tokenizer, config(false, 256, 64));
    EngineConfig dc = draft_config(draft.model, 256);
    dc.scheduler.max_num_seqs = 64;
    Engine spec(target.model, *target.tokenizer, dc);
    const auto a = ids(generate_all(plain, prompts, per_request));
    const auto b = ids(generate_all(spec, prompts, other));
    EXPECT_GT(spec.counters().spec_draft_tokens, 0u);
    const double acceptance = double(spec.counters().spec_accepted_tokens) /
                              double(std::max<uint64_t>(spec.counters().spec_draft_tokens, 1));
    for (int pos = 1; pos < kPositions; ++pos) {
      std::vector<int> ha(static_cast<size_t>(n_vocab)), hb(static_cast<size_t>(n_vocab));
      for (int i = 0; i < kRequests; ++i) {
        ++ha[size_t(a[size_t(i)][size_t(pos)])];
        ++hb[size_t(b[size_t(i)][size_t(pos)])];
      }
      int df = 0;
      const double stat = homogeneity_chi_square(ha, hb, df);
      ASSERT_GT(df, 0);
      EXPECT_LT(stat, critical_0_001(df)) << names[s] << ", position " << pos;
      std::printf("%s, position %d: chi-square %.1f, df %d, critical %.1f (acceptance %.2f)\n",
                  names[s], pos, stat, df, critical_0_001(df), acceptance);
    }
    // Negative control: an acceptance rule that keeps the draft's distribution emits what the
    // draft samples alone. At this sample size the same test must tell those samples from the
    // target's at every position (its power against that defect: the printed statistics stand
    // many times above the critical value).
    if (s == 0) {
      Engine draft_alone(draft.model, *target.tokenizer, config(false, 256, 64));
      const auto d = ids(generate_all(draft_alone, prompts, other));
      for (int pos = 1; pos < kPositions; ++pos) {
        std::vector<int> ha(static_cast<size_t>(n_vocab)), hd(static_cast<size_t>(n_vocab));
        for (int i = 0; i < kRequests; ++i) {
          ++ha[size_t(a[size_t(i)][size_t(pos)])];
          ++hd[size_t(d[size_t(i)][size_t(pos)])];
        }
        int df = 0;
        const double stat = homogeneity_chi_square(ha, hd, df);
        ASSERT_GT(df, 0);
        EXPECT_GT(stat, critical_0_001(df)) << "the draft's own samples pass, position " << pos;
        std::printf(
            "negative control (the draft's distribution), position %d: chi-square %.1f, "
            "df %d, critical %.1f\n",
            pos, stat, df, critical_0_001(df));
      }
    }
    expect_pool_whole(spec);
    EXPECT_EQ(spec.draft_kv_blocks_used(), 0);
  }
}

// The target as its own draft, sampled under penalties and min_tokens: the draft's q follows the
// request's state (prompt, outputs and the run's earlier proposals) exactly as the target's p
// does at verification, so q == p and every proposal is accepted.
TEST(DraftSampling, SelfDraftUnderPenaltiesAcceptsEveryProposal) {
  VELA_REQUIRE_SHARED();
  SpecModel target = load_model("tiny-llama-256-F32");
  const std::vector<std::vector<int32_t>> prompts(
      8, target.tokenizer->encode("The quick brown fox", true, true));
  std::vector<SamplingParams> per_request(prompts.size(), params(24, 1.0f));
  for (size_t i = 0; i < per_request.size(); ++i) {
    SamplingParams& p = per_request[i];
    p.seed = 77 + i;
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.8f;
    p.frequency_penalty = 0.4f;
    p.min_tokens = 12;
    p.stop_token_ids = {target.tokenizer->eos_id()};
  }
  Engine spec(target.model, *target.tokenizer, draft_config(target.model, 256));
  const auto out = generate_all(spec, prompts, per_request);
  const EngineCounters& k = spec.counters();
  EXPECT_GT(k.spec_draft_tokens, 20u);
  EXPECT_EQ(k.spec_accepted_tokens, k.spec_draft_tokens);
  expect_pool_whole(spec);
}

TEST(DraftSampling, DraftWithAnotherVocabularyIsRefused) {
  VELA_REQUIRE_SHARED();
  EngineOptions o;
  o.model_path = test::shared_path("models/tiny-llama-256-F32.gguf").string();
  for (const char* other : {"tiny-qwen2-bpe-F16.gguf"}) {
    o.draft_model_path = test::shared_path(std::string("models/") + other).string();
    auto e = make_engine(o);
    ASSERT_FALSE(e.ok()) << other;
    EXPECT_NE(e.message().find("vocabulary"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(other), std::string::npos) << e.message();
  }
  o.draft_model_path = test::shared_path("models/tiny-llama-256-Q4_0.gguf").string();
  auto ok = make_engine(o);  // the draft model alone selects the method
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ((*ok)->config().speculative.method, SpecMethod::kDraft);
  o.speculative_method = "ngram";
  EXPECT_FALSE(make_engine(o).ok());
  o.speculative_method = "draft";
  o.draft_model_path.clear();
  auto missing = make_engine(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("needs a draft model"), std::string::npos);
  o.draft_model_path = "/nonexistent/draft.gguf";
  auto absent = make_engine(o);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.message().find("draft model"), std::string::npos);
}

}  // namespace
}  // namespace vela

// The head proposer (the model's MTP block, an EAGLE-3 head) against the head run from scratch: fed
// the target's hidden states of a prompt in two chunks through the target's (shuffled) block ids,
// its first and chained proposals equal the argmax of a fresh block pass over the whole sequence
// and a fresh chain after it; after a verified run it goes on from the rows it followed (its chains
// wrote only to scratch blocks); a second sequence reusing the first's leading blocks (a
// prefix-cache hit) proposes as a fresh computation does.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "../model/eagle3_head_writer.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "spec/head_proposer.h"
#include "support/shared_data.h"

namespace vela {
namespace {

constexpr int32_t kBlockSize = 4;  // small: chains and chunks cross block boundaries
constexpr int32_t kBlocks = 24;    // the "target's" block ids
constexpr int32_t kMaxContext = 64;
constexpr int32_t kMaxBlocksPerSeq = kMaxContext / kBlockSize;
constexpr int32_t kK = 4;

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// One pass of `model` over one sequence's tokens at positions [first, first + n), through
// block ids 0, 1, 2, ... of `cache`, with a head's hidden input when given (target features when
// `features`): the logits and hidden rows of every token, and the inputs of the layers the
// forward pass captures.
struct PassOut {
  std::vector<float> logits;        // [n, n_vocab]
  std::vector<float> hidden;        // [n, n_embd]
  std::vector<float> layer_inputs;  // [n, n_captured * n_embd]
};
PassOut run(DecoderForward& f, KvCache& cache, std::span<const int32_t> tokens, int32_t first,
            std::span<const float> input_hidden = {}, bool features = false) {
  const ModelConfig& c = f.model().config();
  const int32_t n = int32_t(tokens.size());
  const size_t count = static_cast<size_t>(n);
  std::vector<int32_t> positions(count), seq(count, 0), rows(count);
  std::iota(positions.begin(), positions.end(), first);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<int32_t> table(kMaxBlocksPerSeq);
  std::iota(table.begin(), table.end(), 0);
  ForwardBatch b;
  b.token_ids = tokens;
  b.positions = positions;
  b.seq_index = seq;
  b.block_tables = table;
  b.max_blocks_per_seq = kMaxBlocksPerSeq;
  b.logits_indices = rows;
  b.hidden_indices = rows;
  b.input_hidden = input_hidden;
  b.input_is_target_features = features;
  PassOut out;
  out.logits.resize(size_t(n) * size_t(c.n_vocab));
  out.hidden.resize(size_t(n) * size_t(c.n_embd));
  out.layer_inputs.resize(size_t(n) * f.options().capture_layer_inputs.size() * size_t(c.n_embd));
  b.layer_inputs = out.layer_inputs;
  const Status st = f.forward(b, cache, out.logits, out.hidden);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

ForwardOptions small_options(std::vector<int32_t> capture = {}) {
  ForwardOptions o;
  o.capture_layer_inputs = std::move(capture);
  o.max_batch_tokens = kMaxContext;
  o.max_logits = kMaxContext;
  o.max_context = kMaxContext;
  o.n_threads = 2;
  return o;
}

// A target and a head for it: glm4moe's own MTP block, or a random EAGLE-3 head for a Llama.
struct Fixture {
  HeadKind kind;
  std::shared_ptr<const Model> target, block;
  std::unique_ptr<DecoderForward> target_forward, block_forward;
  int32_t n_embd = 0, n_vocab = 0;

  explicit Fixture(HeadKind head_kind) : kind(head_kind) {
    const char* name = kind == HeadKind::kMtp ? "tiny-glm4moe-F32" : "tiny-llama-256-F32";
    auto t = Model::load(test::shared_path(std::string("models/") + name + ".gguf").string());
    EXPECT_TRUE(t.ok()) << t.message();
    target = *t;
    std::vector<int32_t> capture;
    if (kind == HeadKind::kMtp) {
      auto b = Model::mtp_block(target);
      EXPECT_TRUE(b.ok()) << b.message();
      block = *b;
    } else {
      capture = {0, 2, target->config().n_layer - 1};
      auto file = GgufFile::from_bytes(
          test::random_eagle3_head(*target, 11, 96, {capture[0], capture[1], capture[2]}));
      EXPECT_TRUE(file.ok()) << file.message();
      auto b = Model::eagle3_head(std::make_shared<const GgufFile>(std::move(*file)), target);
      EXPECT_TRUE(b.ok()) << b.message();
      block = *b;
    }
    target_forward = std::make_unique<DecoderForward>(target, small_options(capture));
    block_forward = std::make_unique<DecoderForward>(block, small_options());
    n_embd = target->config().n_embd;
    n_vocab = target->config().n_vocab;
  }

  // What the head follows at every position of `tokens` (a fresh cache): the target's final
  // hidden states, or its captured layer inputs.
  std::vector<float> target_hidden(std::span<const int32_t> tokens) {
    KvCache cache(model_cache_config(target->config(), kBlockSize, kBlocks, KvType::kF32));
    PassOut out = run(*target_forward, cache, tokens, 0);
    return kind == HeadKind::kMtp ? out.hidden : out.layer_inputs;
  }

  // What the proposer should propose for `tokens` (all verified; the last one sampled): the block
  // from scratch over positions [0, n - 1) with (hidden, next token), then chained on its own
  // output and proposals; among the first `vocab` token ids when given.
  std::vector<int32_t> expected(std::span<const int32_t> tokens, int32_t k, int32_t vocab = 0) {
    const size_t among = size_t(vocab > 0 ? vocab : n_vocab);
    const int32_t n = int32_t(tokens.size());
    const std::vector<float> h = target_hidden(tokens.first(size_t(n - 1)));
    KvCache cache(model_cache_config(block->config(), kBlockSize, kBlocks, KvType::kF32));
    PassOut out = run(*block_forward, cache, tokens.subspan(1), 0, h, kind == HeadKind::kEagle3);
    std::vector<int32_t> proposals = {
        argmax(std::span<const float>(out.logits).subspan(size_t(n - 2) * size_t(n_vocab), among))};
    std::vector<float> g(out.hidden.end() - n_embd, out.hidden.end());
    for (int32_t j = 1; j < k; ++j) {
      const int32_t token = proposals.back();
      PassOut step = run(*block_forward, cache, {&token, 1}, n - 2 + j, g);
      proposals.push_back(argmax(std::span<const float>(step.logits).first(among)));
      g = step.hidden;
    }
    return proposals;
  }
};

HeadProposerOptions proposer_options(HeadKind kind) {
  HeadProposerOptions o;
  o.kind = kind;
  o.max_seqs = 4;
  o.max_tokens = kMaxContext;
  o.max_context = kMaxContext;
  o.n_blocks = kBlocks;
  o.block_size = kBlockSize;
  o.max_proposals = kK;
  o.kv_type = KvType::kF32;
  return o;
}

// Tells the proposer that a pass computed `tokens`' positions [first, first + n) (with the
// target's hidden rows `hidden` of the whole sequence); decoding when the last token is sampled.
Status follow(HeadProposer& p, uint64_t id, std::span<const int32_t> tokens,
              std::span<const int32_t> table, const std::vector<float>& hidden, int32_t width,
              int32_t first, int32_t n, bool decoding, bool deferrable = false) {
  PassRows rows;
  rows.id = id;
  rows.tokens = tokens;
  rows.block_table = table;
  rows.first_position = first;
  rows.n_rows = n;
  rows.hidden = std::span<const float>(hidden).subspan(size_t(first) * size_t(width),
                                                       size_t(n) * size_t(width));
  rows.decoding = decoding;
  rows.deferrable = deferrable;
  return p.follow({&rows, 1});
}

std::vector<int32_t> propose(HeadProposer& p, uint64_t id, std::span<const int32_t> tokens,
                             std::span<const int32_t> table, int32_t k) {
  std::vector<int32_t> out(size_t(k), -1);
  SamplingParams params;
  ProposalRequest r;
  r.id = id;
  r.tokens = tokens;
  r.params = &params;
  r.block_table = table;
  r.max_k = k;
  r.proposals = out;
  const Status st = p.propose({&r, 1});
  EXPECT_TRUE(st.ok()) << st.message();
  out.resize(size_t(r.n_proposed));
  return out;
}

class HeadProposerKinds : public ::testing::TestWithParam<HeadKind> {};

TEST_P(HeadProposerKinds, ProposalsEqualTheHeadRunFromScratch) {
  VELA_REQUIRE_SHARED();
  Fixture fx(GetParam());
  HeadProposer proposer(fx.block, proposer_options(GetParam()), nullptr);
  // Floats of one followed row.
  const int32_t width = int32_t(proposer.followed_layer_inputs().empty()
                                    ? fx.n_embd
                                    : proposer.followed_layer_inputs().size() * fx.n_embd);
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(26);
  for (int32_t& t : tokens) t = int32_t(rng() % uint32_t(fx.n_vocab));
  // The sequence's blocks, in no particular order, as a pool hands them out.
  const std::vector<int32_t> table = {13, 2, 21, 7, 0, 18, 5, 11, 3, 16, 9, 22};

  // The prompt (25 tokens) in chunks of 11 and 14; then token 25 is sampled.
  const std::vector<float> h = fx.target_hidden(std::span<const int32_t>(tokens).first(25));
  ASSERT_TRUE(follow(proposer, 1, tokens, table, h, width, 0, 11, false).ok());
  EXPECT_TRUE(propose(proposer, 1, tokens, table, kK).empty()) << "mid-prompt: no proposal";
  ASSERT_TRUE(follow(proposer, 1, tokens, table, h, width, 11, 14, true).ok());
  const std::vector<int32_t> got = propose(proposer, 1, tokens, table, kK);
  EXPECT_EQ(got, fx.expected(tokens, kK));
  EXPECT_EQ(propose(proposer, 1, tokens, table, 1),
            std::vector<int32_t>(got.begin(), got.begin() + 1));

  // The target verified two proposals (and sampled a bonus token): positions 25..27 computed.
  std::vector<int32_t> longer = tokens;
  longer.insert(longer.end(), {got[0], got[1], int32_t((got[2] + 1) % fx.n_vocab)});
  const std::vector<float> h2 = fx.target_hidden(std::span<const int32_t>(longer).first(28));
  ASSERT_TRUE(follow(proposer, 1, longer, table, h2, width, 25, 3, true).ok());
  EXPECT_EQ(propose(proposer, 1, longer, table, kK), fx.expected(longer, kK));
  // A stale length gets nothing (the sequence moved on without a pass the proposer saw).
  EXPECT_TRUE(propose(proposer, 1, tokens, table, kK).empty());

  // Another sequence reusing the first three blocks (positions 0..11) and the token after them
  // computes its own rows from position 12 on: as from scratch.
  std::vector<int32_t> other(tokens.begin(), tokens.begin() + 13);
  for (int i = 0; i < 8; ++i) other.push_back(int32_t(rng() % uint32_t(fx.n_vocab)));
  std::vector<int32_t> other_table = {13, 2, 21, 6, 10, 14, 23};
  const std::vector<float> h3 = fx.target_hidden(std::span<const int32_t>(other).first(20));
  ASSERT_TRUE(follow(proposer, 2, other, other_table, h3, width, 12, 8, true).ok());
  EXPECT_EQ(propose(proposer, 2, other, other_table, kK), fx.expected(other, kK));
  // The first sequence is untouched by the second's rows and chains.
  EXPECT_EQ(propose(proposer, 1, longer, table, kK), fx.expected(longer, kK));

  proposer.release(1);
  EXPECT_TRUE(propose(proposer, 1, longer, table, kK).empty());
}

// Rows of a sequence the policy keeps from speculating wait (no first proposal meanwhile) and run
// with its next rows that are not deferrable: its proposals then equal the head's from scratch,
// whether the waiting rows fit one pass or go in several (a small max_tokens), and whether
// they were followed early because their buffer filled (3 rows). Released, it leaves no rows.
TEST_P(HeadProposerKinds, DeferredRowsRunBeforeTheNextProposal) {
  VELA_REQUIRE_SHARED();
  Fixture fx(GetParam());
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(30);
  for (int32_t& t : tokens) t = int32_t(rng() % uint32_t(fx.n_vocab));
  const std::vector<int32_t> table = {5, 17, 2, 9, 20, 1, 14, 8};
  const std::vector<float> h = fx.target_hidden(std::span<const int32_t>(tokens).first(29));
  const std::vector<int32_t> expected = fx.expected(tokens, kK);
  for (const int32_t deferred_rows : {64, 3})
    for (const int32_t max_tokens : {kMaxContext, 5}) {
      SCOPED_TRACE(testing::Message()
                   << "deferred_rows " << deferred_rows << ", max_tokens " << max_tokens);
      HeadProposerOptions o = proposer_options(GetParam());
      o.deferred_rows = deferred_rows;
      o.max_tokens = max_tokens;
      HeadProposer proposer(fx.block, o, nullptr);
      ASSERT_EQ(proposer.deferred_capacity(), deferred_rows);
      const int32_t width = int32_t(proposer.followed_layer_inputs().empty()
                                        ? fx.n_embd
                                        : proposer.followed_layer_inputs().size() * fx.n_embd);
      // The prompt (20 tokens) in chunks the passes can take, then decode steps 20..27 kept off.
      for (int32_t first = 0; first < 20; first += max_tokens)
        ASSERT_TRUE(follow(proposer, 1, tokens, table, h, width, first,
                           std::min(max_tokens, 20 - first), false)
                        .ok());
      for (int32_t position = 20; position < 28; ++position) {
        const auto seen = std::span<const int32_t>(tokens).first(size_t(position) + 2);
        ASSERT_TRUE(follow(proposer, 1, seen, table, h, width, position, 1, false, true).ok());
        EXPECT_TRUE(propose(proposer, 1, seen, table, kK).empty()) << position;
      }
      // The step before a grant: its row wants a first proposal.
      ASSERT_TRUE(follow(proposer, 1, tokens, table, h, width, 28, 1, true).ok());
      EXPECT_EQ(propose(proposer, 1, tokens, table, kK), expected);

      // Deferred rows of a released sequence go with it: another sequence in the same slots
      // proposes as from scratch.
      const auto seen = std::span<const int32_t>(tokens).first(23);
      ASSERT_TRUE(follow(proposer, 2, seen, table, h, width, 21, 1, false, true).ok());
      proposer.release(2);
      for (int32_t first = 0; first < 28; first += max_tokens)
        ASSERT_TRUE(follow(proposer, 3, tokens, table, h, width, first,
                           std::min(max_tokens, 28 - first), false, first > 0)
                        .ok());
      ASSERT_TRUE(follow(proposer, 3, tokens, table, h, width, 28, 1, true).ok());
      EXPECT_EQ(propose(proposer, 3, tokens, table, kK), expected);
    }
}

// With a draft vocabulary the MTP head proposes the most likely of the first draft_vocab token ids
// (rounded up to a group of 16): the whole head's argmax over that prefix, chained alike.
TEST(HeadProposerDraftVocab, ProposesTheArgmaxOverTheVocabularyPrefix) {
  VELA_REQUIRE_SHARED();
  Fixture fx(HeadKind::kMtp);
  HeadProposerOptions o = proposer_options(HeadKind::kMtp);
  o.draft_vocab = fx.n_vocab / 3;
  const int32_t prefix = std::min(fx.n_vocab, int32_t(o.draft_vocab + 15) / 16 * 16);
  ASSERT_LT(prefix, fx.n_vocab);
  HeadProposer proposer(fx.block, o, nullptr);
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(21);
  for (int32_t& t : tokens) t = int32_t(rng() % uint32_t(fx.n_vocab));
  const std::vector<int32_t> table = {5, 1, 8, 2, 9, 4};
  const std::vector<float> h = fx.target_hidden(std::span<const int32_t>(tokens).first(20));
  ASSERT_TRUE(follow(proposer, 1, tokens, table, h, fx.n_embd, 0, 20, true).ok());
  const std::vector<int32_t> got = propose(proposer, 1, tokens, table, kK);
  EXPECT_EQ(got, fx.expected(tokens, kK, prefix));
  for (int32_t t : got) EXPECT_LT(t, prefix);
  // The restriction changes what is proposed here (else this test could not tell).
  EXPECT_NE(got, fx.expected(tokens, kK));
}

INSTANTIATE_TEST_SUITE_P(Heads, HeadProposerKinds,
                         ::testing::Values(HeadKind::kMtp, HeadKind::kEagle3),
                         [](const auto& info) {
                           return info.param == HeadKind::kMtp ? "Mtp" : "Eagle3";
                         });

}  // namespace
}  // namespace vela

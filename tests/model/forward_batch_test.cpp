// The batched, paged forward pass: several sequences in one batch, prompts split into chunks and
// scattered KV blocks all give the same logits as one sequence run alone; sliding windows limit
// what a token sees; bad batches and bad models are errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <string_view>

#include "io/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "model_rewrite.h"
#include "quant/dequantize.h"
#include "support/shared_data.h"

namespace vela {
namespace {

using test::rewrite_model;

constexpr int32_t kBlock = 16;

std::shared_ptr<const Model> load_shared(const std::string& name) {
  auto m = Model::load(test::shared_path("models/" + name).string());
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : nullptr;
}

KvCache make_cache(const Model& m, int32_t n_blocks, KvType type = KvType::kF32) {
  const ModelConfig& c = m.config();
  return KvCache(KvCacheConfig{c.n_layer, c.n_head_kv, c.head_dim, kBlock, n_blocks, type});
}

// Sequence s of a batch: its tokens, first position and blocks.
struct SeqInput {
  std::vector<int32_t> tokens;
  int32_t first_pos = 0;
  std::vector<int32_t> blocks;
};

// Runs one batch holding every token of every sequence; returns logits of all tokens in batch
// order.
std::vector<float> run_batch(DecoderForward& fwd, KvCache& cache, const std::vector<SeqInput>& seqs,
                             bool interleave) {
  const int32_t max_blocks = 16;
  std::vector<int32_t> ids, pos, seq, table(seqs.size() * max_blocks, -1);
  for (size_t s = 0; s < seqs.size(); ++s)
    std::copy(seqs[s].blocks.begin(), seqs[s].blocks.end(), table.begin() + long(s * max_blocks));
  // Interleaving mixes the sequences' tokens in the batch (each sequence keeps its own order).
  std::vector<size_t> next(seqs.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const size_t take = interleave ? 1 : seqs[s].tokens.size();
      for (size_t k = 0; k < take && next[s] < seqs[s].tokens.size(); ++k, ++next[s]) {
        ids.push_back(seqs[s].tokens[next[s]]);
        pos.push_back(seqs[s].first_pos + int32_t(next[s]));
        seq.push_back(int32_t(s));
      }
      more |= next[s] < seqs[s].tokens.size();
    }
  }
  std::vector<int32_t> want(ids.size());
  std::iota(want.begin(), want.end(), 0);
  const int32_t n_vocab = fwd.model().config().n_vocab;
  std::vector<float> logits(ids.size() * size_t(n_vocab));
  ForwardBatch b{ids, pos, seq, table, max_blocks, want};
  const Status st = fwd.forward(b, cache, logits);
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

TEST(ForwardBatch, SeveralSequencesInOneBatchMatchEachAlone) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared("tiny-llama-gqa.gguf");
  ASSERT_TRUE(model);
  const int32_t V = model->config().n_vocab;
  DecoderForward fwd(model, ForwardOptions{64, 64, 256});
  const std::vector<int32_t> a = {1, 9038, 2501, 263, 931, 727};
  const std::vector<int32_t> b = {1, 450, 4996, 17354};
  const std::vector<int32_t> c = {1, 15043};

  // Alone, each in blocks 0/1.
  std::vector<std::vector<float>> alone;
  for (const auto* t : {&a, &b, &c}) {
    KvCache cache = make_cache(*model, 8);
    alone.push_back(run_batch(fwd, cache, {{*t, 0, {0}}}, false));
  }
  for (bool interleave : {false, true}) {
    KvCache cache = make_cache(*model, 8);
    const auto all = run_batch(fwd, cache, {{a, 0, {5}}, {b, 0, {2}}, {c, 0, {7}}}, interleave);
    // Find each token's row: rebuild the batch order the way run_batch did.
    std::vector<std::pair<int, int>> order;  // (seq, index)
    std::vector<size_t> next(3, 0);
    const std::vector<const std::vector<int32_t>*> seqs = {&a, &b, &c};
    for (bool more = true; more;) {
      more = false;
      for (int s = 0; s < 3; ++s) {
        const size_t take = interleave ? 1 : seqs[size_t(s)]->size();
        for (size_t k = 0; k < take && next[size_t(s)] < seqs[size_t(s)]->size();
             ++k, ++next[size_t(s)])
          order.emplace_back(s, int(next[size_t(s)]));
        more |= next[size_t(s)] < seqs[size_t(s)]->size();
      }
    }
    for (size_t row = 0; row < order.size(); ++row) {
      const auto [s, i] = order[row];
      for (int32_t v = 0; v < V; ++v)
        ASSERT_EQ(all[row * size_t(V) + size_t(v)],
                  alone[size_t(s)][size_t(i) * size_t(V) + size_t(v)])
            << "seq " << s << " token " << i << " vocab " << v << " interleave " << interleave;
    }
  }
}

TEST(ForwardBatch, ChunkedPrefillAcrossScatteredBlocksMatchesOnePass) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared("aidreams260K.gguf");
  ASSERT_TRUE(model);
  const int32_t V = model->config().n_vocab;
  DecoderForward fwd(model, ForwardOptions{64, 64, 128});
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(3 + (i * 37) % 500);

  KvCache whole_cache = make_cache(*model, 8);
  const auto whole = run_batch(fwd, whole_cache, {{prompt, 0, {0, 1, 2}}}, false);

  for (int32_t chunk : {1, 7, 16, 17}) {
    KvCache cache = make_cache(*model, 8);
    const std::vector<int32_t> blocks = {6, 3, 4};  // not in order, not contiguous
    for (int32_t start = 0; start < int32_t(prompt.size()); start += chunk) {
      const int32_t n = std::min<int32_t>(chunk, int32_t(prompt.size()) - start);
      std::vector<int32_t> part(prompt.begin() + start, prompt.begin() + start + n);
      const auto got = run_batch(fwd, cache, {{part, start, blocks}}, false);
      for (int32_t i = 0; i < n; ++i)
        for (int32_t v = 0; v < V; ++v)
          ASSERT_EQ(got[size_t(i) * V + size_t(v)], whole[size_t(start + i) * V + size_t(v)])
              << "chunk " << chunk << " position " << start + i;
    }
  }
}

TEST(ForwardBatch, SlidingWindowLimitsWhatATokenSees) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/aidreams260K.gguf").string());
  ASSERT_TRUE(src.ok());
  const int32_t window = 3;
  auto gguf =
      GgufFile::from_bytes(rewrite_model(*src, {{"llama.attention.sliding_window", window}}));
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto model = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*gguf)));
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ((*model)->config().sliding_window, window);
  const int32_t V = (*model)->config().n_vocab;
  const int32_t L = (*model)->config().n_layer;
  DecoderForward fwd(*model, ForwardOptions{64, 64, 128});
  // Two sequences that differ only in their first token. Information travels at most window-1
  // positions per layer, so from position 1 + L*(window-1) on the logits are identical.
  std::vector<int32_t> x(24), y;
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t(10 + i * 11 % 400);
  y = x;
  y[0] = 7;
  KvCache c1 = make_cache(**model, 4), c2 = make_cache(**model, 4);
  const auto lx = run_batch(fwd, c1, {{x, 0, {0, 1}}}, false);
  const auto ly = run_batch(fwd, c2, {{y, 0, {0, 1}}}, false);
  const int32_t horizon = 1 + L * (window - 1);
  bool early_differs = false;
  for (int32_t i = 0; i < int32_t(x.size()); ++i) {
    bool same = true;
    for (int32_t v = 0; v < V; ++v)
      same &= lx[size_t(i) * V + size_t(v)] == ly[size_t(i) * V + size_t(v)];
    if (i >= horizon) {
      EXPECT_TRUE(same) << "position " << i;
    }
    if (i < window) early_differs |= !same;
  }
  EXPECT_TRUE(early_differs);
}

TEST(ForwardBatch, BadBatchesAreErrors) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared("aidreams260K.gguf");
  ASSERT_TRUE(model);
  DecoderForward fwd(model, ForwardOptions{8, 8, 64});
  KvCache cache = make_cache(*model, 4);
  std::vector<float> logits(size_t(model->config().n_vocab) * 8);
  const std::vector<int32_t> table = {0, 1, -1, -1};
  const auto run = [&](std::vector<int32_t> ids, std::vector<int32_t> pos,
                       std::vector<int32_t> want) {
    std::vector<int32_t> seq(ids.size(), 0);
    return fwd.forward(ForwardBatch{ids, pos, seq, table, 4, want}, cache, logits);
  };
  EXPECT_TRUE(run({1, 2}, {0, 1}, {1}).ok());
  EXPECT_FALSE(run({1, 99999}, {0, 1}, {1}).ok());  // token id out of range
  EXPECT_FALSE(run({1, 2}, {0, 40}, {1}).ok());     // position without a block
  EXPECT_FALSE(run({1, 2}, {0, 64}, {1}).ok());     // past max_context
  EXPECT_FALSE(run({1, 2}, {0, 1}, {2}).ok());      // logits index out of range
  EXPECT_FALSE(
      run(std::vector<int32_t>(9, 1), std::vector<int32_t>(9, 0), {0}).ok());  // too many tokens
  EXPECT_FALSE(run({}, {}, {}).ok());                                          // empty
}

TEST(ModelLoad, ClearErrorsForBadModels) {
  VELA_REQUIRE_SHARED();
  auto src = GgufFile::open(test::shared_path("models/aidreams260K.gguf").string());
  ASSERT_TRUE(src.ok());
  const auto load = [](std::vector<uint8_t> bytes) -> std::string {
    auto g = GgufFile::from_bytes(bytes);
    if (!g) return g.message();
    auto m = Model::from_gguf(std::make_shared<const GgufFile>(std::move(*g)));
    return m ? "" : m.message();
  };
  GgufWriter arch;
  for (const auto& [key, value] : src->metadata())
    if (key != "general.architecture") arch.add_value(key, value);
  arch.add_string("general.architecture", "mamba");
  const std::string unknown = load(arch.to_bytes());
  EXPECT_NE(unknown.find("unsupported model architecture 'mamba'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("llama, qwen2"), std::string::npos) << unknown;

  EXPECT_NE(load(rewrite_model(*src, {}, {"blk.2.ffn_up.weight"}))
                .find("missing tensor 'blk.2.ffn_up.weight'"),
            std::string::npos);
  EXPECT_NE(load(rewrite_model(*src, {{"llama.embedding_length", 65}}))
                .find("not a multiple of attention.head_count"),
            std::string::npos);
  EXPECT_NE(load(rewrite_model(*src, {{"llama.embedding_length", 72}})).find("shape"),
            std::string::npos);
  EXPECT_NE(load(rewrite_model(*src, {{"llama.attention.head_count_kv", 3}})).find("multiple"),
            std::string::npos);
  EXPECT_NE(load(rewrite_model(*src, {{"llama.block_count", 0}})).find("block_count"),
            std::string::npos);
  EXPECT_NE(load(rewrite_model(*src, {{"llama.block_count", 5}})).find("missing tensor 'blk.4"),
            std::string::npos);
  EXPECT_NE(load(rewrite_model(*src, {{"llama.attention.head_count", 1000000}})).find("head_count"),
            std::string::npos);
}

TEST(ModelLoad, TiedEmbeddingsUseTokenEmbd) {
  VELA_REQUIRE_SHARED();
  auto model = load_shared("tiny-llama-gqa.gguf");
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->weights().tied_embeddings);
  EXPECT_EQ(model->weights().output.data, model->weights().token_embd.data);
  auto untied = load_shared("aidreams260K.gguf");
  EXPECT_FALSE(untied->weights().tied_embeddings);
}

// A tied head is repacked like any output head where the kernels prefer it, and the embedding
// lookup reads every row back from the packed groups as the file stores it.
TEST(ModelLoad, TiedHeadIsRepackedAndLooksUpTheFileRows) {
  VELA_REQUIRE_SHARED();
  int n_tied = 0;
  for (const char* name :
       {"tiny-qwen3-Q8_0.gguf", "tiny-gemma3-Q4_0.gguf", "tiny-qwen35-Q8_0.gguf",
        "tiny-llama-256-Q6_K.gguf", "tiny-llama-256-IQ4_XS.gguf", "tiny-llama-gqa.gguf"}) {
    SCOPED_TRACE(name);
    auto model = load_shared(name);
    ASSERT_TRUE(model);
    const ModelWeights& w = model->weights();
    if (!w.tied_embeddings) continue;
    ++n_tied;
    EXPECT_EQ(w.output.data, w.token_embd.data);
    const WeightMatrix& e = w.token_embd;
    const char* repack = std::getenv("VELA_REPACK");  // "0": nothing is repacked
    const bool packs = prefers_interleaved16(e.type, e.n_rows, e.n_cols) &&
                       !(repack != nullptr && std::string_view(repack) == "0");
    EXPECT_EQ(e.layout, packs ? WeightLayout::kInterleaved16 : WeightLayout::kRowMajor);
    const GgufTensorInfo* file = model->gguf().find_tensor("token_embd.weight");
    ASSERT_NE(file, nullptr);
    std::vector<uint8_t> scratch(size_t(e.row_bytes));
    std::vector<float> got(size_t(e.n_cols)), want(size_t(e.n_cols));
    for (int64_t r = 0; r < e.n_rows; ++r) {
      embedding_row(e, r, scratch.data(), got.data());
      dequantize_row(file->ggml_type(), file->data + r * e.row_bytes, want.data(), e.n_cols);
      ASSERT_EQ(got, want) << "row " << r;
    }
  }
  EXPECT_GE(n_tied, 2);
}

}  // namespace
}  // namespace vela

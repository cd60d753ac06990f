#pragma once
// Proposals from a draft head that reads the target's hidden states: the model's own
// multi-token-prediction block (MTP, "NextN": Qwen3.5, GLM-4.5, DeepSeek-V3; Model::mtp_block), a
// decoder layer trained with the model to predict the token after the next from the model's final
// hidden state and the next token's embedding; or an EAGLE-3 head (Model::eagle3_head), a layer
// trained on a fusion of three of the target's layer inputs (low, middle, high).
//
// The head follows every target pass: each row the target computed and kept whose next token is
// known runs through the head with (that row's hidden state or features, that next token), and
// its K/V goes where the target's block table puts that position, in a one-layer companion cache
// indexed by the target's block ids. So the head's rows follow the target's sequences,
// prefix-cache hits, preemptions and rollbacks without bookkeeping of their own. The last kept
// row of a decoding sequence gives the first proposal and the head's output hidden state. Each
// further proposal is one more pass of the head on its own output and the previous proposal,
// batched over the sequences, writing its K/V into scratch blocks past the target's ids, so that
// a sequence's own blocks only ever hold rows of verified tokens.
// Rows of a sequence the speculation policy keeps off (PassRows::deferrable) wait in a buffer and
// run through the head only with the sequence's next rows that are not deferrable (a grant, a
// probe) or when the buffer is full: the head's weights are then read once for many steps, and
// not at all for a request that finishes while off. Its rows at the positions it never followed
// stay stale in the companion cache, read only by a prefix-cache hit on those blocks (proposals
// of lower quality; the output is verified).
// Proposals are the head's most likely tokens, verified as point masses: the target's
// distribution is kept exactly at any temperature.
// A prefix-cache hit reuses the head's rows of the cached blocks. The row at a cached prefix's
// last position was computed with the token that followed it where it was cached; a request that
// continues differently gets proposals from that row as it is (their quality, never the output,
// depends on it).
// Thread-safety: not synchronised; the engine thread owns it.
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"
#include "spec/proposer.h"
#include "util/zeroed_pages.h"

namespace vela {

enum class HeadKind {
  kMtp,     // follows the target's final hidden states (after its output norm)
  kEagle3,  // follows the target's inputs of three layers, fused by the head's fc
};

struct HeadProposerOptions {
  HeadKind kind = HeadKind::kMtp;
  int32_t max_seqs = 64;       // sequences one pass takes
  int32_t max_tokens = 512;    // tokens one target pass takes (a following pass takes as many)
  int32_t max_context = 2048;  // positions < max_context
  int32_t n_blocks = 0;        // the target cache's blocks, whose ids the following passes use
  int32_t block_size = 16;
  int32_t max_proposals = 4;  // K
  KvType kv_type = KvType::kF16;
  // An MTP head proposes among the first draft_vocab token ids only (0 = all of them): its
  // output head, the larger part of a chained pass for a large vocabulary, shrinks to those
  // rows (FR-Spec's frequency-ranked draft vocabulary, with BPE's rank order for frequency).
  int64_t draft_vocab = 0;
  // A chained pass is priced at this share of the target's step until one was timed.
  double pass_share = 0.1;
  // Deferrable rows a sequence keeps at most (fewer where max_seqs of them would pass
  // kDeferredBytes); 0 follows every row at once.
  int32_t deferred_rows = 64;
};

class HeadProposer final : public Proposer {
 public:
  // head: Model::mtp_block or Model::eagle3_head of the target. pool: the target's (the passes
  // take turns).
  HeadProposer(std::shared_ptr<const Model> head, const HeadProposerOptions& options,
               std::shared_ptr<ThreadPool> pool);

  bool runs_passes() const override { return true; }
  int32_t free_proposals() const override { return 1; }
  double pass_seconds(double target_step_seconds) const override;
  Status propose(std::span<ProposalRequest> requests) override;
  bool follows_passes() const override { return true; }
  std::span<const int32_t> followed_layer_inputs() const override { return captured_; }
  Status follow(std::span<const PassRows> rows) override;
  // The head's rows live in the target's blocks: only the pending first proposal and the
  // deferred rows go.
  void rollback(uint64_t id, int32_t n_valid) override;
  void drop_kv(uint64_t id) override { forget(id); }
  void release(uint64_t id) override { forget(id); }

  // Address space for deferred rows (pages are taken only as rows are written).
  static constexpr size_t kDeferredBytes = size_t(256) << 20;
  // Rows a sequence may defer (tests).
  int32_t deferred_capacity() const { return deferred_capacity_; }

  // The head's cache (tests compare its rows).
  const KvCache& cache() const { return cache_; }

 private:
  struct Sequence {
    int32_t n_tokens = 0;       // the sequence's length when `first` was proposed
    int32_t first = -1;         // the proposal for position n_tokens
    std::vector<float> hidden;  // [n_embd] the head's output at position n_tokens - 2
  };
  // Followed rows of a sequence waiting in deferred slot `slot`: positions
  // [first_position, first_position + n_rows).
  struct Deferred {
    int32_t slot = 0;
    int32_t first_position = 0;
    int32_t n_rows = 0;
  };
  // Rows to run through the head this call, in order: a PassRows' own rows, deferred rows, or
  // both (copied behind the deferred ones).
  struct Piece {
    const PassRows* rows;
    int32_t first_position;
    int32_t n_rows;
    const float* hidden;  // [n_rows, follow_width_]
    bool decoding;
  };
  // A sequence proposing further in a chained pass.
  struct Chained {
    ProposalRequest* request;
    const Sequence* seq;
    int32_t row;      // its row in the last pass's outputs
    int32_t scratch;  // its first scratch block
  };

  // Runs one pass over the batch buffers' [0, n_tokens) with outputs for rows_[0, n_rows);
  // features: hidden_in_ rows are followed target rows (follow_width_ wide), else the head's own
  // outputs (n_embd).
  Status run_pass(int32_t n_tokens, int32_t n_rows, bool features);
  // Row i of the block tables for a chained pass of `c`: the target's blocks before the one
  // holding position n - 1, then its scratch blocks, the first holding a copy of the rows
  // before n - 1 in that block.
  void chain_table(const Chained& c, int32_t i, bool copy_rows);
  static int32_t argmax(std::span<const float> logits);
  // Keeps deferrable rows when they continue the sequence's deferred ones and fit.
  bool defer(const PassRows& p);
  // The pieces of `p`, after the rows it had deferred.
  void add_pieces(const PassRows& p);
  // Runs pieces_ through the head in passes of at most max_tokens tokens and max_seqs sequences
  // (a sequence's pieces in order, one per pass), recording first proposals.
  Status run_pieces();
  float* deferred_rows(int32_t slot) {
    return deferred_hidden_.data() +
           size_t(slot) * size_t(deferred_capacity_) * size_t(follow_width_);
  }
  void forget(uint64_t id);

  HeadProposerOptions options_;
  std::vector<int32_t> captured_;  // the target layers whose inputs an EAGLE-3 head follows
  int64_t follow_width_ = 0;       // floats of one followed row: n_embd, or 3 target n_embd
  DecoderForward forward_;
  KvCache cache_;  // one layer: the target's n_blocks, then max_seqs runs of scratch blocks
  int32_t scratch_per_seq_ = 0;
  int32_t max_blocks_per_seq_ = 0;
  std::unordered_map<uint64_t, Sequence> seqs_;
  double pass_seconds_ = 0;  // a chained pass, running average (0 until timed)

  // Pass buffers, sized once.
  std::vector<int32_t> tokens_;        // [max_tokens]
  std::vector<int32_t> positions_;     // [max_tokens]
  std::vector<int32_t> seq_index_;     // [max_tokens]
  std::vector<int32_t> block_tables_;  // [max_seqs, max_blocks_per_seq]
  std::vector<float> hidden_in_;       // [max_tokens, follow_width_] the head's hidden input
  std::vector<int32_t> rows_;          // [max_seqs] rows with outputs
  std::vector<uint64_t> row_ids_;      // [max_seqs] their sequences (following passes)
  std::vector<int32_t> row_lengths_;   // [max_seqs] and those sequences' lengths
  std::vector<float> logits_;          // [max_seqs, forward_.logits_width()]
  std::vector<float> hidden_out_;      // [max_seqs, n_embd]
  std::vector<Chained> chained_;       // [max_seqs]
  // Deferred rows.
  int32_t deferred_capacity_ = 0;
  ZeroedPages<float> deferred_hidden_;  // [max_seqs, deferred_capacity_, follow_width_]
  std::unordered_map<uint64_t, Deferred> deferred_;
  std::vector<int32_t> free_deferred_;   // [max_seqs] free slots
  std::vector<int32_t> taken_deferred_;  // [max_seqs] slots this call's pieces read
  std::vector<Piece> pieces_;            // [2 * max_seqs]
};

}  // namespace vela

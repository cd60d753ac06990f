#pragma once
// A draft model for speculative decoding: a smaller model with the target's vocabulary (a
// lower-bit copy of the target is one) proposes the next tokens of every speculating sequence.
// It keeps its own paged KV cache; a sequence's draft K/V follows its verified tokens (caught
// up in chunks, rolled back after verification) and each step runs the draft's decode passes
// batched over all sequences at once: one pass for catch-up plus the first proposal, then one
// per further proposal.
// Greedy sequences get the draft's argmax (deterministic proposals). Sampled sequences get
// tokens drawn from the draft's distribution after the request's own transforms (penalties over
// the prompt, the outputs and the run's earlier proposals, min_tokens, temperature, top-k,
// top-p, min-p), and that distribution q with them, for rejection sampling.
// Thread-safety: not synchronised; the engine thread owns it.
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_manager.h"
#include "model/decoder_forward.h"
#include "sampling/sampler.h"
#include "spec/proposer.h"
#include "tokenizer/tokenizer.h"

namespace vela {

// Token texts and special ids must match: the draft proposes ids the target reads.
Status check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

struct DraftModelOptions {
  int32_t max_seqs = 64;       // sequences proposed for in one step at most
  int32_t max_tokens = 512;    // tokens one draft pass takes (catch-up chunks included)
  int32_t max_context = 2048;  // positions < max_context
  int32_t n_blocks = 0;        // draft KV budget (0 = max_seqs full contexts)
  int32_t block_size = 16;
  int32_t max_proposals = 4;  // K
  int32_t n_threads = 0;
  KvType kv_type = KvType::kF16;
  // The target's weight bytes: a pass is priced at the target's step scaled by the models' sizes
  // until one was timed (decode reads every weight once).
  uint64_t target_bytes = 0;
};

class DraftModel final : public Proposer {
 public:
  // `pool`: the target's pass pool (the passes take turns), or null for one of its own.
  DraftModel(std::shared_ptr<const Model> model, const DraftModelOptions& options,
             std::shared_ptr<ThreadPool> pool = nullptr);

  const Model& model() const { return forward_.model(); }

  bool runs_passes() const override { return true; }
  // The timed decode pass, else the target's step scaled by the models' sizes.
  double pass_seconds(double target_step_seconds) const override;
  // The catch-up on tokens the draft has not read, priced per token as measured (a quarter of a
  // decode pass until then).
  double upfront_seconds(uint64_t id, int32_t n_tokens, double pass_seconds) const override;
  // Fills proposals (and q for sampled requests) of each request, running the draft's passes.
  // A request whose catch-up does not fit this step's pass gets none (its catch-up progresses).
  Status propose(std::span<ProposalRequest> requests) override;
  // The sequence's first n_valid tokens are verified: draft K/V past them is dropped.
  void rollback(uint64_t id, int32_t n_valid) override;
  // The sequence finished: its draft blocks go back.
  void release(uint64_t id) override;
  // The sequence was preempted: its draft blocks go back (it catches up when it resumes), its
  // sampler's state and draws go on.
  void drop_kv(uint64_t id) override;
  // Whether this request's proposals come with a distribution (sampled) or are point masses.
  static bool samples(const SamplingParams& params);
  // Seconds of one decode pass (a proposal for every sequence), running average; 0 until
  // measured. Catch-up passes are not counted: they are a once-per-sequence cost.
  double decode_pass_seconds() const { return decode_pass_seconds_; }
  // Tokens of this sequence the draft has not read yet (its catch-up), and the seconds one
  // catch-up token costs (measured in catch-up passes; 0 until then).
  int32_t behind(uint64_t id, int32_t n_tokens) const;
  double catch_up_token_seconds() const { return catch_up_token_seconds_; }
  // Draft blocks in use (tests).
  int32_t blocks_in_use() const override { return pool_.usage().used; }

 private:
  struct Sequence {
    KvSequence kv;
    int32_t n_computed = 0;            // leading tokens whose draft K/V is in the cache
    std::unique_ptr<Sampler> sampler;  // sampled requests: transforms and draws for q
    int32_t sampler_tokens = 0;        // leading tokens the sampler has taken in
    int32_t sampler_proposals = 0;     // this step's proposals it took in (taken back after)
  };
  struct Active {
    ProposalRequest* request;
    Sequence* seq;
    int32_t batch_index;  // of its row in the pass
  };

  Status propose_runs(std::span<ProposalRequest> requests);
  // Runs one pass over batch_tokens_ [0, n_tokens) with logits for `active`'s rows.
  Status run_pass(int32_t n_tokens, std::span<Active> active);
  // The proposal from a row of logits; writes q for sampled requests.
  int32_t pick(Active& a, std::span<const float> logits, int32_t j);

  DraftModelOptions options_;
  DecoderForward forward_;
  KvCache cache_;
  BlockPool pool_;
  KvCacheManager kv_;
  std::unordered_map<uint64_t, Sequence> seqs_;
  int32_t max_blocks_per_seq_ = 0;
  double decode_pass_seconds_ = 0;
  double catch_up_token_seconds_ = 0;

  // Pass buffers, sized once.
  std::vector<int32_t> tokens_;        // [max_tokens]
  std::vector<int32_t> positions_;     // [max_tokens]
  std::vector<int32_t> seq_index_;     // [max_tokens]
  std::vector<int32_t> block_tables_;  // [max_seqs, max_blocks_per_seq]
  std::vector<int32_t> rows_;          // [max_seqs]
  std::vector<float> logits_;          // [max_seqs, n_vocab]
  std::vector<float> q_;               // [max_seqs, max_proposals, n_vocab] sampled proposals' q
  std::vector<Active> active_;         // [max_seqs]
};

}  // namespace vela

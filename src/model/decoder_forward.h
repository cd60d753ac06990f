#pragma once
// The decoder forward pass over a batch of tokens from several sequences, reading and writing
// K/V through block tables in a paged KV cache, and the recurrent state of sequences through
// their state slots. One pass serves every architecture: each layer is norm -> mixer -> norm ->
// FFN, the mixer attention (global or windowed), Gated DeltaNet (gated_deltanet.h) or multi-head
// latent attention (latent_attention.h), the FFN
// dense, a mixture of experts, or experts beside a gated shared expert. It follows the model's
// description (architecture.h: Q/K norms, biases, post-norms, output gates, activation,
// soft-caps) and its config (each layer's mixer, window, RoPE and cache place). A
// pass runs on a thread pool: matmuls split by weight rows, attention by (token run, KV head),
// element-wise steps by tokens when the batch is large. Every output value is computed by exactly
// one thread in a fixed order, so the logits are bit-identical for any number of threads.
// Thread-safety: one DecoderForward runs one pass at a time (it owns the pass's work buffers);
// use one per engine thread. The Model it reads is shared and immutable; a shared pool serialises
// the loops of several users.
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/forward_batch.h"
#include "model/gated_deltanet.h"
#include "model/latent_attention.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/pass_parallel.h"
#include "model/per_layer_embedding.h"
#include "model/projector.h"
#include "model/rope.h"
#include "model/tensor_parallel.h"
#include "util/result.h"
#include "util/thread_pool.h"
#include "util/trace.h"

namespace vela {

struct ForwardOptions {
  int32_t max_batch_tokens = 512;  // most tokens one pass takes
  int32_t max_logits = 512;        // most rows of logits one pass returns
  int32_t max_context = 4096;      // longest sequence (positions < max_context)
  int32_t n_threads = 0;           // threads of a pass, the caller included; 0 = physical cores
  // Steps with less work than this (multiply-adds, roughly) run on the calling thread, since
  // handing work to the pool costs about a microsecond; -1 = the defaults (per step kind),
  // 0 = split every step (tests).
  int64_t min_parallel_work = -1;
  // A tensor- or pipeline-parallel rank's group (the model holds that rank's slice of its
  // stage's layers); null = one process.
  std::shared_ptr<TensorParallel> tensor_parallel;
  // A pipeline splits a batch into micro-batches of at least this many tokens (at most one per
  // stage); every rank of the group must use the same value.
  int32_t micro_batch_tokens = 64;
  // Layers whose input (the residual stream entering them) a pass copies out for the rows of
  // batch.hidden_indices when the batch has layer_inputs (an EAGLE-3 head's target: its
  // extract_layers); passes without layer_inputs copy nothing. Not with pipeline parallelism.
  std::vector<int32_t> capture_layer_inputs;
  // Logits of the first n_output_rows token ids only (a draft head proposing among a prefix of
  // the vocabulary, whose ids rise as tokens grow rarer); 0 = the whole output head. Rounded up
  // to a whole group of 16 rows; not for an EAGLE-3 head's draft vocabulary or a split head.
  int64_t n_output_rows = 0;
  // Latent attention: the break-even run length of the expanded form
  // (LatentAttentionMixer::takes_expanded_form): a sequence's run of at least this many tokens
  // in a pass, deep in its context (twice as many from position 0), takes it; 0 = the absorbed
  // form for every token. (deepseek3-mini shape, AVX-512, 2 threads: 64 tokens at depth 2048
  // ran 1-4% slower expanded, 128 from position 0 about as fast.)
  int32_t latent_expanded_min_tokens = 96;
};

class DecoderForward {
 public:
  // Runs on `pool` when given (its size decides the thread count), else on a pool of its own
  // with options.n_threads threads.
  DecoderForward(std::shared_ptr<const Model> model, const ForwardOptions& options,
                 std::shared_ptr<ThreadPool> pool = nullptr);

  const Model& model() const { return *model_; }
  const ForwardOptions& options() const { return options_; }
  // Floats of one row of logits: n_vocab, or the rows options.n_output_rows asked for.
  int64_t logits_width() const { return logits_width_; }
  int32_t n_threads() const { return pool_->n_threads(); }
  // The pool passes run on, for another model's passes to share (e.g. a draft model's).
  const std::shared_ptr<ThreadPool>& pool() const { return pool_; }

  // Runs the batch, stores its K/V in `cache`, and writes the logits of the tokens named by
  // batch.logits_indices to `logits`: [n_logits, n_vocab], and the final hidden states (after
  // the output norm) of those named by batch.hidden_indices to `hidden`: [n_hidden, n_embd].
  // An MTP block (Model::mtp_block) takes each token with its row of batch.input_hidden, its
  // layer's input eh_proj [enorm(embedding) | hnorm(hidden)]; its hidden rows are the layer's
  // output BEFORE the head norm (shared_head_norm), the next chained step's input_hidden.
  // An EAGLE-3 head (Model::eagle3_head) takes each token with its row of batch.input_hidden:
  // target features fused by its fc (input_is_target_features) or its own previous output; its
  // hidden rows are its layer's output before output_norm (the next chained step's input), its
  // logits [n_logits, target n_vocab] the draft vocabulary's scattered to their target ids
  // through d2t, -infinity at ids no draft token maps to.
  // With options.capture_layer_inputs and batch.layer_inputs, the residual stream entering each
  // listed layer goes to batch.layer_inputs for the rows of batch.hidden_indices.
  // Checks the batch (sizes, token ids, positions, block ids, input_hidden) and returns an error
  // instead of touching memory it should not. Tensor- or pipeline-parallel: world rank 0 sends the
  // batch to the other ranks, which call this with the batch they received and empty logits (only
  // world rank 0 gets logits and hidden states). A pipeline runs a large batch as up to n_stages
  // micro-batches of consecutive tokens, so that a stage works on one while the next stage works
  // on the one before.
  Status forward(const ForwardBatch& batch, KvCache& cache, std::span<float> logits,
                 std::span<float> hidden = {});

  // forward() in two halves, so that world rank 0 of a pipeline starts the next pass (its own
  // stage's layers) while the stages after it still run earlier passes. begin_forward checks
  // the batch, sends it, runs this rank's stage and sends the hidden states on; finish_forward
  // waits for the oldest begun pass's outputs, written where its begin_forward said (those
  // buffers must stay until then). At most max_passes_in_flight() passes are begun and not
  // finished; each stage runs passes in the order begun. Anywhere else (one process, tensor
  // parallelism alone, the other ranks) begin_forward runs the whole pass and finish_forward
  // has nothing to wait for.
  Status begin_forward(const ForwardBatch& batch, KvCache& cache, std::span<float> logits,
                       std::span<float> hidden = {});
  void finish_forward();
  int32_t max_passes_in_flight() const { return max_in_flight_; }
  int32_t passes_in_flight() const { return int32_t(pending_.size()); }

  // The mixture-of-experts block and its counters (null for a dense model).
  const MoeFeedForward* moe() const { return moe_.get(); }

  // From this call on, every pass shows the observer the input of each weight-matrix product,
  // the output head's included (activation_observer.h); null (the default) turns it off. The
  // observer must outlive the passes that use it.
  void set_activation_observer(ActivationObserver* observer);

 private:
  // Consecutive batch tokens of one sequence at consecutive positions: one attention call.
  struct TokenRun {
    int32_t first;  // batch index of the first token
    int32_t n_tokens;
  };

  Status validate(const ForwardBatch& batch, const KvCache& cache, size_t logits_size,
                  size_t hidden_size) const;
  // This rank's stage of the pass over `batch` (the whole batch, or one micro-batch of it): the
  // embeddings or the previous stage's hidden states in, the stage's layers, then the logits and
  // hidden states (written where `outputs` says) or the hidden states out to the next stage.
  // send_offset: the micro-batch's first token, its rows of stage_send_.
  void run_stage(const ForwardBatch& batch, KvCache& cache, std::span<float> logits,
                 std::span<float> hidden, int64_t send_offset);
  // Runs `batch` as micro-batches over the pipeline's stages; the last stage sends the outputs
  // to world rank 0, whose finish_forward receives them.
  void run_pipeline(const ForwardBatch& batch, KvCache& cache, std::span<float> logits,
                    std::span<float> hidden);
  // y = W x for each of up to three projections of the same input x: [n_tokens, n_cols];
  // activations converted once per activation type, all products split over the pool in one
  // loop.
  void project(const float* x, int64_t n_tokens, std::initializer_list<Projector::Output> outs);
  // fn(begin, end) over [0, n) in ranges spread over the pool, or fn(0, n) inline when
  // n * item_cost (roughly, in multiply-adds) is too little to share.
  template <class Fn>
  void for_ranges(int64_t n, int64_t item_cost, const Fn& fn);
  // latent_expanded_ of the whole pass's tokens (before any micro-batching).
  void mark_expanded_runs(const ForwardBatch& b);
  void find_token_runs(const ForwardBatch& b);
  // Attention of the token runs `runs` of the batch (runs_: all of them) over cache layer
  // kv_layer of layer group layer_group (its blocks: entry layer_group of every n_kv_groups of a
  // block table). q: [T, n_head * head_dim]; out: [T, n_head * v_dim] (p's sizes).
  void attention(const ForwardBatch& b, const KvCache& cache, int32_t layer_group, int32_t kv_layer,
                 const AttentionParams& p, const float* q, float* out,
                 const std::vector<TokenRun>& runs);
  // The attention mixer of layer il: xn_ in, its output projection in proj_ (the projections,
  // q/k norms, RoPE, the batch's K/V into the cache, attention, the output gate where the family
  // has one).
  void attention_mixer(const ForwardBatch& b, KvCache& cache, int32_t il, int64_t n_tokens,
                       trace::Phases& ops);
  // The latent-attention mixer of a layer: xn_ in, its output projection in proj_.
  void latent_attention_mixer(const ForwardBatch& b, KvCache& cache, const LayerWeights& l,
                              const LayerConfig& lc, int64_t n_tokens, trace::Phases& ops);
  // An MTP block's input: x_ (the tokens' embeddings) and input_hidden into eh_proj's product,
  // in x_.
  void mtp_input(const ForwardBatch& b, int64_t n_tokens);
  // An EAGLE-3 head's input: g = fc(input_hidden) (target features) or input_hidden itself; its
  // attention input [attn_norm(x_) | hidden_norm(g)] into head_in_, and the residual stream g
  // (hidden_norm(g) with norm_before_residual) into x_.
  void eagle3_input(const ForwardBatch& b, int64_t n_tokens);
  // The rows of batch.hidden_indices of x_, the residual stream entering layer il, into their
  // places of batch.layer_inputs for each entry il of options_.capture_layer_inputs.
  void capture_layer_input(const ForwardBatch& b, int32_t il);
  void feed_forward(const LayerWeights& l, int32_t layer, int64_t n_tokens);
  // The dense FFN of xn_ (the layer's n_ff wide) into proj_.
  void dense_ffn(const LayerWeights& l, int32_t layer, int64_t n_tokens);
  // proj_ += the shared expert of xn_ (scaled by its gate where it has one); a tensor-parallel
  // rank holding a slice of its inner dimension adds that slice's partial product.
  void shared_expert(const LayerWeights& l, int64_t n_tokens);
  // The output head over final_'s n_logits rows into logits (gathering the ranks' vocabulary
  // slices when tensor-parallel; an EAGLE-3 head's draft rows scattered through d2t).
  void output_head(int64_t n_logits, std::span<float> logits);
  // y = W x of a sub-layer's output matrix (attention output, FFN down, ssm_out) into proj_, for
  // x the rank's slice [n_tokens, split[rank + 1] - split[rank]] of the full input's columns: the
  // partial products summed over the ranks, or for a matrix every rank keeps whole, the full
  // input gathered first into `full` [n_tokens, split.back()] (placement as gather_columns').
  void output_projection(const WeightMatrix& w, const float* x, int64_t n_tokens,
                         std::span<const int64_t> split, std::vector<float>& full,
                         std::span<const std::vector<IndexRun>> placement = {});
  // The ranks' column slices of a [n_rows, split.back()] matrix, rank r's [n_rows, split[r + 1] -
  // split[r]] in `local`, assembled in `out` on rank 0 (everyone: on every rank). A rank's
  // columns are columns split[r] .. of the whole, or with `placement` the runs placement[r]
  // (their widths adding up to the rank's columns) in order.
  void gather_columns(const float* local, int64_t n_rows, std::span<const int64_t> split,
                      float* out, bool everyone,
                      std::span<const std::vector<IndexRun>> placement = {});

  std::shared_ptr<const Model> model_;
  ForwardOptions options_;
  std::shared_ptr<ThreadPool> pool_;
  int64_t min_work_ = 0;  // element-wise and attention steps below this run inline
  std::unique_ptr<Projector> projector_;
  WeightMatrix head_;                    // the output head a pass runs: whole, or its first rows
  int64_t logits_width_ = 0;             // n_vocab, or head_.n_rows for a vocabulary prefix
  RopeFrequencies rope_global_;          // every layer's RoPE, or the global layers'
  RopeFrequencies rope_local_;           // the windowed layers' when the model has a separate one
  bool any_local_rope_ = false;          // some layer uses rope_local_
  std::unique_ptr<MoeFeedForward> moe_;  // MoE models only
  std::unique_ptr<GatedDeltaNetMixer> delta_net_;  // models with Gated DeltaNet layers only
  std::unique_ptr<LatentAttentionMixer> latent_;   // models with latent-attention layers only
  std::unique_ptr<PerLayerEmbedding> ple_;         // models with per-layer embeddings only

  // Work buffers, sized once for max_batch_tokens (T).
  std::vector<float> x_;            // [T, n_embd] residual stream
  std::vector<uint8_t> embd_rows_;  // [T, token_embd row_bytes] rows of a packed embedding
  std::vector<float> xn_;           // [T, n_embd] normalised input of a sub-layer
  // Attention buffers for the widest layer (layers' head geometries may differ: gemma4).
  std::vector<float> q_;          // [T, n_head * head_dim]
  std::vector<float> k_;          // [T, n_head_kv * head_dim]
  std::vector<float> v_;          // [T, n_head_kv * head_dim]
  std::vector<float> attn_;       // [T, n_head * head_dim] (latent attention: n_head * v_head_dim)
  std::vector<float> q_gate_;     // [T, n_head, 2, head_dim] query and gate rows (output gate)
  std::vector<float> attn_gate_;  // [T, n_head * head_dim] the output gate (before sigmoid)
  std::vector<float> gate_;  // [T, the wider of n_ff (dense layers), n_ff_shared_expert (MoE ones)]
  std::vector<float> up_;    // [T, n_ff] (the same)
  std::vector<float> shared_out_;  // [T, n_embd] the shared expert's (or, beside a dense FFN, the
                                   // routed experts') output
  std::vector<float> router_in_;   // [T, n_embd] the router's input beside a dense FFN
  std::vector<float> ones_;        // [widest head_dim] the weight of a weightless V norm
  std::vector<float> proj_;        // [T, n_embd] output of attn_output / ffn_down
  std::vector<float> rope_cs_;     // [T, n_rot / 2, 2] global, then [T, n_rot_local / 2, 2] local
  std::vector<int64_t> slots_;     // [n_groups, T] KV slot of each token in each layer group
  // Where each layer's K/V lives: [0] one group, [1] grouped by sliding window; groups_ is the
  // one the pass's cache has.
  KvLayerGroups layer_groups_[2];
  const KvLayerGroups* groups_ = &layer_groups_[0];
  // The cache geometry the model needs, [0] one group, [1] grouped (validate() checks the pass's
  // cache against it; blocks, slots and type are the cache's own).
  KvCacheConfig cache_geometry_[2];
  std::vector<float> final_;  // [max_logits, n_embd] normalised rows that get logits
  // [T, 2 * n_embd] an MTP block's eh_proj input, an EAGLE-3 head's attention input (else empty)
  std::vector<float> head_in_;
  // [max_logits, n_draft_vocab] an EAGLE-3 head's logits over its own vocabulary, before d2t
  // scatters them (empty without d2t, and for other models)
  std::vector<float> draft_logits_;
  std::vector<TokenRun> runs_;       // [<= T] this pass's attention runs
  std::vector<SequenceSpan> spans_;  // [<= T] this pass's sequences (recurrent models)
  // Latent-attention models only:
  std::vector<LatentSpan> latent_spans_;  // [<= T] this stage pass's sequence runs
  std::vector<TokenRun> absorbed_runs_;   // [<= T] runs_ of the spans in the absorbed form
  // [T] whether the token's run in the whole pass (before micro-batches) takes the expanded form
  std::vector<uint8_t> latent_expanded_;
  int64_t stage_offset_ = 0;    // the running stage pass's first token in the whole pass
  int64_t attention_work_ = 0;  // multiply-adds of one layer's attention in this pass
  std::vector<AttentionScratch> attn_scratch_;  // [n_threads] one per pool thread
  // Tensor-parallel only.
  TensorParallel* tp_ = nullptr;      // options_.tensor_parallel
  bool split_layers_ = false;         // a stage of several ranks: slices, all-reduced
  std::vector<float> local_logits_;   // [max_logits, this rank's vocabulary rows]
  std::vector<float> gathered_;       // [n_ranks][rows, that rank's columns] of a gather
  std::vector<float> attn_full_;      // [T, full n_head * head_dim] (attention output kept whole)
  std::vector<float> ffn_full_;       // [T, full n_ff] (FFN down kept whole)
  std::vector<float> delta_full_;     // [T, full value_dim] (ssm_out kept whole)
  std::vector<int64_t> delta_split_;  // [n_ranks + 1] first DeltaNet value column of each rank
  // [n_ranks] each rank's DeltaNet value columns in the whole: runs of heads (its local order)
  std::vector<std::vector<IndexRun>> delta_placement_;
  std::vector<int64_t> head_split_;     // [n_ranks + 1] first attention column of each rank
  std::vector<int64_t> ff_split_;       // [n_ranks + 1] first FFN column of each rank
  std::vector<int64_t> vocab_split_;    // [n_ranks + 1] first vocabulary row of each rank
  std::vector<int64_t> gather_counts_;  // [n_ranks] floats each rank sends in a gather
  // Pipeline-parallel only.
  bool first_stage_ = true, last_stage_ = true;
  bool writes_outputs_ = true;  // this rank computes the logits and hidden rows it returns
  // [max_in_flight_, T, n_embd] hidden states sent on to the next stage, a slot per pass in
  // flight (each stays as sent until its pass finishes).
  std::vector<float> stage_send_;
  int32_t max_in_flight_ = 1;  // passes begun and not finished: n_stages on world rank 0
  int64_t send_slot_ = 0;      // the slot of stage_send_ the running pass sends from
  // World rank 0 of a pipeline: a pass begun and not finished, oldest first.
  struct PendingPass {
    std::span<float> logits;  // [n_logits, n_vocab] where its logits go
    std::span<float> hidden;  // [n_hidden, n_embd] where its hidden rows go
    size_t n_sends = 0;       // sends to the next stage it posted
  };
  std::deque<PendingPass> pending_;
  size_t n_sends_ = 0;               // sends the running pass has posted
  std::vector<float> stage_logits_;  // [max_logits, n_vocab] the last stage's rank 0
  std::vector<float> stage_hidden_;  // [T, n_embd] the last stage's rank 0
  std::vector<int32_t> micro_rows_;  // [max_logits + T] a micro-batch's logits, hidden rows
};

template <class Fn>
void DecoderForward::for_ranges(int64_t n, int64_t item_cost, const Fn& fn) {
  parallel_ranges(*pool_, n, item_cost, min_work_, fn);
}

}  // namespace vela

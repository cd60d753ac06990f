#include "model/decoder_forward.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "kernels/cpu_features.h"
#include "model/attention.h"
#include "model/layer_ops.h"
#include "model/pass_parallel.h"
#include "quant/dequantize.h"
#include "util/trace.h"

namespace vela {

namespace {

// Below this much work (in multiply-adds, roughly) an element-wise or attention step runs on the
// calling thread: handing it to the pool costs about a microsecond.
constexpr int64_t kMinParallelWork = 16 * 1024;

std::shared_ptr<ThreadPool> make_pool(int32_t n_threads) {
  return std::make_shared<ThreadPool>(n_threads > 0 ? n_threads : cpu_features().physical_cores);
}

// VELA_MLA_EXPANDED=0 keeps latent attention in its absorbed form (A/B of the two forms).
bool expanded_form_disabled_by_env() {
  const char* env = std::getenv("VELA_MLA_EXPANDED");
  return env != nullptr && std::string_view(env) == "0";
}

}  // namespace

DecoderForward::DecoderForward(std::shared_ptr<const Model> model, const ForwardOptions& options,
                               std::shared_ptr<ThreadPool> pool)
    : model_(std::move(model)),
      options_(options),
      pool_(pool ? std::move(pool) : make_pool(options.n_threads)) {
  const ModelConfig& c = model_->config();
  options_.n_threads = pool_->n_threads();
  min_work_ = options_.min_parallel_work < 0 ? kMinParallelWork : options_.min_parallel_work;
  const size_t T = size_t(options_.max_batch_tokens);
  size_t q_dim = size_t(c.n_head) * size_t(c.head_dim);
  size_t kv_dim = size_t(c.n_head_kv) * size_t(c.head_dim);
  int32_t max_head_dim = c.head_dim, min_head_kv = c.n_head_kv;
  for (const LayerConfig& lc : c.layers) {
    q_dim = std::max(q_dim, size_t(c.n_head) * size_t(lc.head_dim));
    kv_dim = std::max(kv_dim, size_t(lc.n_head_kv) * size_t(lc.head_dim));
    max_head_dim = std::max(max_head_dim, lc.head_dim);
    min_head_kv = std::min(min_head_kv, lc.n_head_kv);
  }
  if (c.arch->value_norm) ones_.assign(size_t(max_head_dim), 1.0f);
  x_.resize(T * size_t(c.n_embd));
  if (const WeightMatrix& e = model_->weights().token_embd; e.layout != WeightLayout::kRowMajor)
    embd_rows_.resize(T * size_t(e.row_bytes));
  xn_.resize(T * size_t(c.n_embd));
  q_.resize(T * q_dim);
  k_.resize(T * kv_dim);
  v_.resize(T * kv_dim);
  // Latent attention's heads end in v_head_dim values, which a file may make wider than a
  // cache row (head_dim there).
  const size_t v_out = c.latent_attention() ? size_t(c.n_head) * size_t(c.mla.v_head_dim) : 0;
  attn_.resize(T * std::max(q_dim, v_out));
  if (c.arch->attention_output_gate) {
    q_gate_.resize(T * 2 * q_dim);
    attn_gate_.resize(T * q_dim);
  }
  if (c.moe()) moe_ = std::make_unique<MoeFeedForward>(*model_, options_.max_batch_tokens);
  // The dense FFN's, or the shared expert's, gate and up products.
  size_t ff = 0;
  for (const LayerConfig& lc : c.layers)
    ff = std::max(ff, size_t(lc.moe && !c.arch->moe_beside_dense ? c.n_ff_shared_expert : lc.n_ff));
  gate_.resize(T * ff);
  up_.resize(T * ff);
  if (c.n_ff_shared_expert > 0 || (c.moe() && c.arch->moe_beside_dense))
    shared_out_.resize(T * size_t(c.n_embd));
  if (c.moe() && c.arch->moe_beside_dense) router_in_.resize(T * size_t(c.n_embd));
  if (c.recurrent()) {
    delta_net_ =
        std::make_unique<GatedDeltaNetMixer>(c, options_.max_batch_tokens, pool_->n_threads());
    spans_.reserve(T);
  }
  if (c.latent_attention()) {
    if (expanded_form_disabled_by_env()) options_.latent_expanded_min_tokens = 0;
    latent_ = std::make_unique<LatentAttentionMixer>(
        c, options_.max_batch_tokens, pool_->n_threads(), options_.latent_expanded_min_tokens);
    for (const LayerWeights& l : model_->weights().layers)
      if (l.mla.k_b.data != nullptr) latent_->reserve(l.mla);
    latent_spans_.reserve(T);
    absorbed_runs_.reserve(T);
    latent_expanded_.resize(T);
  }
  proj_.resize(T * size_t(c.n_embd));
  rope_cs_.resize(T * size_t(c.n_rot + c.n_rot_local));
  layer_groups_[0] = kv_layer_groups(c, false);
  layer_groups_[1] = kv_layer_groups(c, true);
  cache_geometry_[0] = model_cache_config(c, 16, 0, KvType::kF16, 0, false);
  cache_geometry_[1] = model_cache_config(c, 16, 0, KvType::kF16, 0, true);
  slots_.resize(std::max<size_t>(1, layer_groups_[1].windows.size()) * T);
  final_.resize(size_t(options_.max_logits) * size_t(c.n_embd));
  if (c.mtp_block || c.eagle3) head_in_.resize(T * 2 * size_t(c.n_embd));
  if (c.eagle3 && !model_->weights().eagle3.d2t.empty())
    draft_logits_.resize(size_t(options_.max_logits) * size_t(c.eagle3->n_draft_vocab));
  runs_.reserve(T);
  // The most query heads per KV head and the widest head of any layer.
  const AttentionParams attn{c.n_head, min_head_kv, max_head_dim, c.sliding_window, 1.0f};
  attn_scratch_.reserve(size_t(pool_->n_threads()));
  for (int32_t i = 0; i < pool_->n_threads(); ++i)
    attn_scratch_.emplace_back(options_.max_context, attn);

  // RoPE frequencies. LongRoPE picks its long factors when the context may pass the original
  // one (as the reference engines do, by the configured context).
  const ModelWeights& mw = model_->weights();
  std::span<const float> factors = mw.rope_freq_factors;
  if (!mw.rope_factors_long.empty())
    factors = options_.max_context > c.rope.original_context ? mw.rope_factors_long
                                                             : mw.rope_factors_short;
  rope_global_ = rope_frequencies(c.rope, c.n_rot, factors);
  for (const LayerConfig& lc : c.layers) any_local_rope_ |= lc.local_rope;
  if (any_local_rope_) rope_local_ = rope_frequencies(c.rope_local, c.n_rot_local, {});

  // Room for the largest converted activation any matmul of the pass needs.
  projector_ = std::make_unique<Projector>(*pool_, min_work_, options_.min_parallel_work);
  for (const LayerWeights& l : model_->weights().layers)
    for (const WeightMatrix* m : l.matrices())
      if (m->data != nullptr) projector_->reserve(*m, options_.max_batch_tokens);
  // Latent attention's expanded form: a key block's rows through k_b_t and v_b.
  for (const LayerWeights& l : model_->weights().layers)
    if (l.mla.k_b_t.data != nullptr)
      for (const WeightMatrix* m : {&l.mla.k_b_t, &l.mla.v_b})
        projector_->reserve(*m, LatentAttentionMixer::kKeyBlock);
  head_ = model_->weights().output;
  logits_width_ = c.n_vocab;
  if (options_.n_output_rows > 0 && options_.n_output_rows < head_.n_rows) {
    assert(!c.eagle3 && options_.tensor_parallel == nullptr);
    // Whole groups of 16 (an interleaved head has a whole number of them).
    head_ = weight_rows(head_, 0, std::min(head_.n_rows, (options_.n_output_rows + 15) / 16 * 16));
    logits_width_ = head_.n_rows;
  }
  projector_->reserve(head_, options_.max_logits);
  if (c.mtp_block) projector_->reserve(model_->weights().mtp.eh_proj, options_.max_batch_tokens);
  if (c.eagle3) projector_->reserve(model_->weights().eagle3.fc, options_.max_batch_tokens);
  if (c.n_embd_per_layer > 0)
    ple_ = std::make_unique<PerLayerEmbedding>(*model_, options_.max_batch_tokens, *projector_);

  tp_ = options_.tensor_parallel.get();
  // An MTP block or EAGLE-3 head runs in one process (validate() refuses its passes otherwise).
  assert(!((c.mtp_block || c.eagle3) && tp_ != nullptr));
  if (tp_ != nullptr) {
    const int32_t n_ranks = tp_->size();
    first_stage_ = tp_->stage() == 0;
    last_stage_ = tp_->stage() == tp_->n_stages() - 1;
    writes_outputs_ = last_stage_ && tp_->rank() == 0;
    const ShardRanges& r = model_->weights().shard;
    // A rank's columns of the attention output: its heads' values (latent attention's head_dim
    // is its cache row's width, not a head's output).
    const int64_t head_cols =
        int64_t(r.n_head) * (c.latent_attention() ? c.mla.v_head_dim : c.head_dim);
    const int64_t delta_cols = int64_t(r.n_delta_v_heads) * c.delta_net.head_v_dim;
    for (int32_t i = 0; i <= n_ranks; ++i) {
      head_split_.push_back(i * head_cols);
      ff_split_.push_back(i * r.n_ff);
      vocab_split_.push_back(shard_vocab_begin(c.n_vocab, {i, n_ranks}));
      delta_split_.push_back(i * delta_cols);
    }
    split_layers_ = n_ranks > 1;
    // A stage of several ranks computes its vocabulary slice of the logits and gathers them.
    const bool split_head = last_stage_ && split_layers_;
    if (split_head) local_logits_.resize(size_t(options_.max_logits) * size_t(r.n_vocab));
    gather_counts_.resize(size_t(n_ranks));
    size_t gathered =
        split_head && writes_outputs_ ? size_t(options_.max_logits) * size_t(c.n_vocab) : 0;
    if (r.replicated_attn_output) {
      attn_full_.resize(T * size_t(head_split_.back()));
      gathered = std::max(gathered, attn_full_.size());
    }
    if (r.replicated_ffn_down) {
      ffn_full_.resize(T * size_t(ff_split_.back()));
      gathered = std::max(gathered, ffn_full_.size());
    }
    if (c.recurrent() && r.replicated_delta_out && n_ranks > 1) {
      delta_full_.resize(T * size_t(delta_split_.back()));
      gathered = std::max(gathered, delta_full_.size());
      // Each rank's value heads sit in runs of the whole (tensor_shard.h), not in one block.
      const DeltaNetConfig& whole = model_->whole_config().delta_net;
      for (int32_t i = 0; i < n_ranks; ++i) {
        ShardRanges other = r;
        other.delta_k_head_begin = i * r.n_delta_k_heads;
        std::vector<IndexRun> runs = delta_value_head_runs(whole, other);
        for (IndexRun& run : runs)
          run = {run.begin * whole.head_v_dim, run.count * whole.head_v_dim};
        delta_placement_.push_back(std::move(runs));
      }
    }
    gathered_.resize(gathered);
    if (tp_->n_stages() > 1) {
      if (tp_->world_rank() == 0) max_in_flight_ = tp_->n_stages();
      if (!last_stage_) stage_send_.resize(size_t(max_in_flight_) * T * size_t(c.n_embd));
      if (writes_outputs_) {
        stage_logits_.resize(size_t(options_.max_logits) * size_t(c.n_vocab));
        stage_hidden_.resize(T * size_t(c.n_embd));
      }
      micro_rows_.resize(size_t(options_.max_logits) + T);
    }
  }
}

void DecoderForward::gather_columns(const float* local, int64_t n_rows,
                                    std::span<const int64_t> split, float* out, bool everyone,
                                    std::span<const std::vector<IndexRun>> placement) {
  const int32_t n_ranks = tp_->size();
  const int32_t rank = tp_->rank();
  const int64_t local_cols = split[size_t(rank) + 1] - split[size_t(rank)];
  const std::span<const float> part{local, size_t(n_rows * local_cols)};
  if (!everyone && rank != 0) {
    tp_->gather(part, {}, {}, false);
    return;
  }
  for (int32_t r = 0; r < n_ranks; ++r)
    gather_counts_[size_t(r)] = n_rows * (split[size_t(r) + 1] - split[size_t(r)]);
  tp_->gather(part, {gathered_.data(), size_t(n_rows * split.back())}, gather_counts_, everyone);
  // Rank-major [rank][row, rank's columns] to [row, all columns].
  const float* from = gathered_.data();
  const int64_t width = split.back();
  for (int32_t r = 0; r < n_ranks; ++r) {
    const int64_t begin = split[size_t(r)], cols = split[size_t(r) + 1] - begin;
    for (int64_t i = 0; i < n_rows; ++i) {
      if (placement.empty()) {
        std::copy_n(from + i * cols, cols, out + i * width + begin);
        continue;
      }
      const float* src = from + i * cols;
      for (const IndexRun& run : placement[size_t(r)]) {
        std::copy_n(src, run.count, out + i * width + run.begin);
        src += run.count;
      }
    }
    from += n_rows * cols;
  }
}

void DecoderForward::output_projection(const WeightMatrix& w, const float* x, int64_t n_tokens,
                                       std::span<const int64_t> split, std::vector<float>& full,
                                       std::span<const std::vector<IndexRun>> placement) {
  if (split_layers_ && !full.empty()) {
    gather_columns(x, n_tokens, split, full.data(), true, placement);
    x = full.data();
  }
  project(x, n_tokens, {{&w, proj_.data()}});
  if (split_layers_ && full.empty())
    tp_->all_reduce_sum({proj_.data(), size_t(n_tokens * model_->config().n_embd)});
}

void DecoderForward::output_head(int64_t n_logits, std::span<float> logits) {
  const ModelConfig& c = model_->config();
  const WeightMatrix& head = head_;
  const std::vector<int32_t>& d2t = model_->weights().eagle3.d2t;
  float* out = split_layers_ ? local_logits_.data()
               : d2t.empty() ? logits.data()
                             : draft_logits_.data();
  project(final_.data(), n_logits, {{&head, out}});
  if (c.final_softcap > 0.0f)
    for_ranges(n_logits * head.n_rows, 16,
               [&](int64_t i0, int64_t i1) { soft_cap(out + i0, i1 - i0, c.final_softcap); });
  if (split_layers_) gather_columns(out, n_logits, vocab_split_, logits.data(), false);
  if (!d2t.empty()) {  // draft token j's logit at its target id; no draft token, no chance
    const int64_t V = c.n_vocab, D = int64_t(d2t.size());
    for_ranges(n_logits, V + D, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float* row = logits.data() + i * V;
        const float* draft = out + i * D;
        std::fill_n(row, V, -std::numeric_limits<float>::infinity());
        for (int64_t j = 0; j < D; ++j) row[d2t[size_t(j)]] = draft[j];
      }
    });
  }
}

void DecoderForward::project(const float* x, int64_t n_tokens,
                             std::initializer_list<Projector::Output> outs) {
  projector_->project(x, n_tokens, outs);
}

void DecoderForward::set_activation_observer(ActivationObserver* observer) {
  projector_->set_observer(observer);
  if (moe_) moe_->set_observer(observer);
}

void DecoderForward::mark_expanded_runs(const ForwardBatch& b) {
  // An importance-matrix run's observer is to see the absorbed form's products.
  const bool may_expand = projector_->observer() == nullptr;
  for (int32_t t = 0, end; t < b.n_tokens(); t = end) {
    const int32_t s = b.seq_index[size_t(t)], pos = b.positions[size_t(t)];
    for (end = t + 1; end < b.n_tokens() && b.seq_index[size_t(end)] == s &&
                      b.positions[size_t(end)] == pos + (end - t);
         ++end) {
    }
    const bool expanded = may_expand && latent_->takes_expanded_form(end - t, pos);
    std::fill(latent_expanded_.begin() + t, latent_expanded_.begin() + end, uint8_t(expanded));
  }
}

void DecoderForward::find_token_runs(const ForwardBatch& b) {
  const ModelConfig& c = model_->config();
  runs_.clear();
  spans_.clear();
  latent_spans_.clear();
  absorbed_runs_.clear();
  attention_work_ = 0;
  for (int32_t t = 0; t < b.n_tokens(); ++t) {
    TokenRun* last = runs_.empty() ? nullptr : &runs_.back();
    if (last && last->n_tokens < kAttentionMaxTokens &&
        b.seq_index[size_t(t)] == b.seq_index[size_t(last->first)] &&
        b.positions[size_t(t)] == b.positions[size_t(last->first)] + last->n_tokens) {
      ++last->n_tokens;
    } else {
      runs_.push_back({t, 1});
    }
    const int32_t pos = b.positions[size_t(t)];
    if (latent_) {  // a run of a sequence at consecutive positions, and its form
      LatentSpan* span = latent_spans_.empty() ? nullptr : &latent_spans_.back();
      const int32_t s = b.seq_index[size_t(t)];
      if (span && b.seq_index[size_t(span->first)] == s &&
          pos == span->first_position + span->n_tokens) {
        ++span->n_tokens;
      } else {
        latent_spans_.push_back({t, 1, pos,
                                 b.block_tables.data() + size_t(s) * size_t(b.max_blocks_per_seq),
                                 b.n_kv_groups, latent_expanded_[size_t(stage_offset_ + t)] != 0});
      }
    }
    if (delta_net_) {  // a sequence's tokens are next to each other (validate())
      const int32_t s = b.seq_index[size_t(t)];
      if (t > 0 && b.seq_index[size_t(t - 1)] == s)
        ++spans_.back().n_tokens;
      else
        spans_.push_back({t, 1, pos, b.state_slots[size_t(s)]});
    }
    // An estimate for the threading decision: windowed layers see fewer positions.
    const int32_t visible = c.sliding_window > 0 ? std::min(pos + 1, c.sliding_window) : pos + 1;
    attention_work_ += int64_t(visible) * c.n_head * c.head_dim * 2;
  }
  for (const TokenRun& run : runs_)
    if (latent_ && latent_expanded_[size_t(stage_offset_ + run.first)] == 0)
      absorbed_runs_.push_back(run);
  // Each span's checkpoints: a run of b.state_checkpoints (in span order, validate()). A pipeline
  // stage without recurrent layers has none to save.
  size_t span = 0;
  for (int32_t k = 0; delta_net_ && k < int32_t(b.state_checkpoints.size()); ++k) {
    const int32_t s = b.state_checkpoints[size_t(k)].seq;
    while (b.seq_index[size_t(spans_[span].first)] != s) ++span;
    if (spans_[span].n_checkpoints++ == 0) spans_[span].first_checkpoint = k;
  }
}

void DecoderForward::attention(const ForwardBatch& b, const KvCache& cache, int32_t layer_group,
                               int32_t layer, const AttentionParams& p, const float* q, float* out,
                               const std::vector<TokenRun>& runs) {
  const int64_t q_dim = int64_t(p.n_head) * p.head_dim;
  const int64_t out_dim = int64_t(p.n_head) * p.v_dim();
  const int32_t group = p.group();
  const int32_t n_threads = pool_->n_threads();
  const bool parallel = n_threads > 1 && attention_work_ >= min_work_;
  // Tasks are (run, KV head) pairs; when there are fewer than threads (a decode step of one
  // sequence), each KV head's query heads are split into `parts` so every thread gets some.
  const int64_t n_pairs = int64_t(runs.size()) * p.n_head_kv;
  const int32_t parts = parallel && n_pairs < n_threads
                            ? int32_t(std::min<int64_t>(group, (n_threads + n_pairs - 1) / n_pairs))
                            : 1;
  const int32_t per_part = (group + parts - 1) / parts;
  const auto task = [&](int64_t i, int32_t thread) {
    const TokenRun run = runs[size_t(i / (int64_t(p.n_head_kv) * parts))];
    const int32_t kv_head = int32_t(i / parts % p.n_head_kv);
    const int32_t first = int32_t(i % parts) * per_part;
    const int32_t n_heads = std::min(per_part, group - first);
    if (n_heads <= 0) return;
    const int32_t s = b.seq_index[size_t(run.first)];
    attention_kv_group(
        cache, layer, p, kv_head * group + first, n_heads, q + run.first * q_dim, q_dim,
        run.n_tokens, b.positions[size_t(run.first)],
        b.block_tables.data() + size_t(s) * size_t(b.max_blocks_per_seq) + size_t(layer_group),
        out + run.first * out_dim, out_dim, attn_scratch_[size_t(thread)], b.n_kv_groups);
  };
  const int64_t n_tasks = n_pairs * parts;
  if (parallel) {
    pool_->parallel_for(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
  }
}

Status DecoderForward::forward(const ForwardBatch& b, KvCache& cache, std::span<float> logits,
                               std::span<float> hidden) {
  if (auto st = begin_forward(b, cache, logits, hidden); !st) return st;
  finish_forward();
  return {};
}

Status DecoderForward::begin_forward(const ForwardBatch& b, KvCache& cache, std::span<float> logits,
                                     std::span<float> hidden) {
  assert(passes_in_flight() < max_passes_in_flight());
  // Trace (when on): the pass, partitioned into prepare, each layer (itself partitioned into
  // its operations) and the output head.
  trace::Span pass("forward", "forward");
  pass.arg("tokens", b.n_tokens());
  pass.arg("logits", int64_t(b.logits_indices.size()));
  if (auto st = validate(b, cache, logits.size(), hidden.size()); !st) return st;
  if (tp_ != nullptr && tp_->world_rank() == 0) tp_->send_batch(b);
  if (latent_) mark_expanded_runs(b);
  const KvCacheConfig& kc = cache.config();
  for (const StateCopy& copy : b.state_copies)
    for (int32_t layer = 0; layer < kc.n_state_layers; ++layer)
      std::copy_n(cache.state(layer, copy.from), kc.state_floats, cache.state(layer, copy.to));
  if (tp_ != nullptr && tp_->n_stages() > 1) {
    run_pipeline(b, cache, logits, hidden);
  } else {
    run_stage(b, cache, logits, hidden, 0);
    if (tp_ != nullptr) tp_->finish_batches(0);
  }
  return {};
}

void DecoderForward::finish_forward() {
  if (pending_.empty()) return;
  trace::Span wait("forward_outputs", "forward");
  const PendingPass p = pending_.front();
  pending_.pop_front();
  const int32_t last = (tp_->n_stages() - 1) * tp_->size();
  if (!p.logits.empty()) tp_->receive_from(last, p.logits);
  if (!p.hidden.empty()) tp_->receive_from(last, p.hidden);
  // Its outputs are back, so every rank has taken its batch and hidden states; the messages of
  // the passes begun after it may still be on their way.
  size_t newer_sends = 0;
  for (const PendingPass& q : pending_) newer_sends += q.n_sends;
  tp_->finish_sends(newer_sends);
  tp_->finish_batches(pending_.size());
}

void DecoderForward::run_pipeline(const ForwardBatch& b, KvCache& cache, std::span<float> logits,
                                  std::span<float> hidden) {
  const ModelConfig& c = model_->config();
  const int64_t T = b.n_tokens(), V = c.n_vocab, E = c.n_embd;
  // Micro-batches take the logits and hidden rows of their tokens in order, so each one's rows
  // are a contiguous run of the pass's: rows named out of token order keep one micro-batch.
  // A recurrent state's pieces end where its tokens in a pass do (gated_deltanet.h), and its
  // checkpoints fall within them: such a model's passes stay whole (on every stage alike).
  int64_t n_micro = 1;
  if (!model_->whole_config().recurrent() &&
      std::is_sorted(b.logits_indices.begin(), b.logits_indices.end()) &&
      std::is_sorted(b.hidden_indices.begin(), b.hidden_indices.end()))
    n_micro = std::clamp<int64_t>(T / std::max(1, options_.micro_batch_tokens), 1, tp_->n_stages());
  size_t logit_row = 0, hidden_row = 0;
  n_sends_ = 0;
  for (int64_t m = 0; m < n_micro; ++m) {
    const int64_t t0 = T * m / n_micro, t1 = T * (m + 1) / n_micro;
    ForwardBatch mb = b;
    mb.token_ids = b.token_ids.subspan(size_t(t0), size_t(t1 - t0));
    mb.positions = b.positions.subspan(size_t(t0), size_t(t1 - t0));
    mb.seq_index = b.seq_index.subspan(size_t(t0), size_t(t1 - t0));
    int32_t* rows = micro_rows_.data();
    const size_t l0 = logit_row, h0 = hidden_row;
    for (; logit_row < b.logits_indices.size() && b.logits_indices[logit_row] < t1; ++logit_row)
      *rows++ = b.logits_indices[logit_row] - int32_t(t0);
    for (; hidden_row < b.hidden_indices.size() && b.hidden_indices[hidden_row] < t1; ++hidden_row)
      *rows++ = b.hidden_indices[hidden_row] - int32_t(t0);
    mb.logits_indices = {micro_rows_.data(), logit_row - l0};
    mb.hidden_indices = {micro_rows_.data() + (logit_row - l0), hidden_row - h0};
    std::span<float> mb_logits, mb_hidden;
    if (writes_outputs_) {
      mb_logits = {stage_logits_.data() + l0 * size_t(V), (logit_row - l0) * size_t(V)};
      mb_hidden = {stage_hidden_.data() + h0 * size_t(E), (hidden_row - h0) * size_t(E)};
    }
    run_stage(mb, cache, mb_logits, mb_hidden, t0);
  }
  // The last stage's rank 0 returns the pass's outputs to world rank 0 (its finish_forward
  // receives them).
  const size_t n_logit_floats = b.logits_indices.size() * size_t(V);
  const size_t n_hidden_floats = b.hidden_indices.size() * size_t(E);
  if (writes_outputs_) {
    if (n_logit_floats > 0) tp_->send_to(0, {stage_logits_.data(), n_logit_floats});
    if (n_hidden_floats > 0) tp_->send_to(0, {stage_hidden_.data(), n_hidden_floats});
  }
  if (tp_->world_rank() == 0) {
    pending_.push_back({logits.first(n_logit_floats), hidden.first(n_hidden_floats), n_sends_});
    send_slot_ = (send_slot_ + 1) % max_in_flight_;
  } else {
    tp_->finish_sends(0);
  }
}

void DecoderForward::run_stage(const ForwardBatch& b, KvCache& cache, std::span<float> logits,
                               std::span<float> hidden, int64_t send_offset) {
  // Trace (when on): the stage's pass, partitioned into prepare, each layer (itself partitioned
  // into its operations) and the output head.
  trace::Phases parts("forward");
  parts.next("prepare");
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t T = b.n_tokens();
  const int64_t E = c.n_embd;
  const int32_t bs = cache.config().block_size;

  groups_ = &layer_groups_[cache.config().group_windows.empty() ? 0 : 1];
  const int32_t n_groups = b.n_kv_groups;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t s = b.seq_index[size_t(t)];
    const int32_t pos = b.positions[size_t(t)];
    const int32_t* row = b.block_tables.data() + size_t(s) * size_t(b.max_blocks_per_seq) +
                         size_t(pos / bs) * size_t(n_groups);
    for (int32_t g = 0; g < n_groups; ++g)
      slots_[size_t(g * T + t)] = int64_t(row[g]) * bs + pos % bs;
  }
  stage_offset_ = send_offset;
  find_token_runs(b);
  if (first_stage_) {
    for_ranges(T, E, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* x = x_.data() + t * E;
        uint8_t* scratch =
            embd_rows_.empty() ? nullptr : embd_rows_.data() + t * w.token_embd.row_bytes;
        embedding_row(w.token_embd, b.token_ids[size_t(t)], scratch, x);
        if (c.embed_scale != 1.0f)
          for (int64_t i = 0; i < E; ++i) x[i] *= c.embed_scale;
      }
    });
  } else {  // the same rank of the previous stage has run the earlier layers
    tp_->receive_from(tp_->world_rank() - tp_->size(), {x_.data(), size_t(T * E)});
  }
  if (c.mtp_block) mtp_input(b, T);
  if (c.eagle3) eagle3_input(b, T);
  const int32_t half_rot = c.n_rot / 2;
  float* const rope_local_cs = rope_cs_.data() + T * c.n_rot;
  for_ranges(T, 64 * half_rot, [&](int64_t t0, int64_t t1) {
    rope_tables(b.positions.data() + t0, t1 - t0, rope_global_.freqs.data(), c.n_rot,
                rope_global_.mscale, rope_cs_.data() + t0 * half_rot * 2);
    if (any_local_rope_)
      rope_tables(b.positions.data() + t0, t1 - t0, rope_local_.freqs.data(), c.n_rot_local,
                  rope_local_.mscale, rope_local_cs + t0 * c.n_rot_local);
  });
  if (ple_) ple_->prepare(b.token_ids, x_.data(), T, *projector_, *pool_, min_work_);

  // Steps over token rows [t0, t1) of the batch's buffers.
  const auto norm = [&](const std::vector<float>& weight) {
    for_ranges(T, E, [&](int64_t t0, int64_t t1) {
      rms_norm(x_.data() + t0 * E, weight.data(), t1 - t0, E, c.rms_eps, xn_.data() + t0 * E);
    });
  };
  // x += post_norm(proj) (no norm when post_norm is empty).
  const auto add_residual = [&](const std::vector<float>& post_norm) {
    for_ranges(T, E, [&](int64_t t0, int64_t t1) {
      if (!post_norm.empty())
        rms_norm(proj_.data() + t0 * E, post_norm.data(), t1 - t0, E, c.rms_eps,
                 proj_.data() + t0 * E);
      add_inplace(x_.data() + t0 * E, proj_.data() + t0 * E, (t1 - t0) * E);
    });
  };

  parts.done();
  for (int32_t il = 0; il < c.n_layer; ++il) {
    trace::Span layer_span("layer", "layer");
    layer_span.arg("layer", il);
    trace::Phases ops("op");
    const LayerWeights& l = w.layers[size_t(il)];
    const LayerConfig& lc = c.layers[size_t(il)];
    if (!b.layer_inputs.empty()) capture_layer_input(b, il);
    ops.next("attn_norm");
    if (!c.eagle3) norm(l.attn_norm);  // an EAGLE-3 head's attention input is head_in_
    if (lc.mixer == MixerKind::kLatentAttention) {
      latent_attention_mixer(b, cache, l, lc, T, ops);
    } else if (lc.mixer == MixerKind::kGatedDeltaNet) {
      ops.next("delta_net");
      const float* y =
          delta_net_->run(spans_, b.state_checkpoints, cache, l.delta_net, lc.state_index,
                          xn_.data(), T, *projector_, *pool_, min_work_);
      ops.next("delta_out");
      output_projection(l.delta_net.out, y, T, delta_split_, delta_full_, delta_placement_);
    } else {
      attention_mixer(b, cache, il, T, ops);
    }
    add_residual(l.post_attn_norm);

    ops.next("ffn_norm");
    norm(l.ffn_norm);
    ops.next("ffn_matmul");
    feed_forward(l, il, T);
    add_residual(l.post_ffn_norm);
    if (ple_) {
      ops.next("per_layer_embedding");
      ple_->apply(l, il, x_.data(), T, *projector_, *pool_, min_work_);
    }
    if (!l.output_scale.empty())
      for_ranges(T * E, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) x_[size_t(i)] *= l.output_scale[0];
      });
  }
  parts.next("output");
  if (!last_stage_) {  // on to the next stage; the buffer stays as sent until the pass ends
    float* out = stage_send_.data() + (send_slot_ * options_.max_batch_tokens + send_offset) * E;
    std::copy_n(x_.data(), T * E, out);
    tp_->send_to(tp_->world_rank() + tp_->size(), {out, size_t(T * E)});
    ++n_sends_;
    return;
  }

  // Final hidden states (embeddings) for the rows that want them; an MTP block's or EAGLE-3
  // head's before the head norm (the next chained step's input_hidden).
  const int64_t n_hidden = writes_outputs_ ? int64_t(b.hidden_indices.size()) : 0;
  for_ranges(n_hidden, E, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* x = x_.data() + int64_t(b.hidden_indices[size_t(i)]) * E;
      if (c.mtp_block || c.eagle3)
        std::copy_n(x, E, hidden.data() + i * E);
      else
        rms_norm(x, w.output_norm.data(), 1, E, c.rms_eps, hidden.data() + i * E);
    }
  });

  // Output head only for the rows that want logits.
  const int64_t n_logits = int64_t(b.logits_indices.size());
  for_ranges(n_logits, E, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      rms_norm(x_.data() + int64_t(b.logits_indices[size_t(i)]) * E, w.output_norm.data(), 1, E,
               c.rms_eps, final_.data() + i * E);
  });
  if (n_logits > 0) output_head(n_logits, logits);
}

void DecoderForward::mtp_input(const ForwardBatch& b, int64_t T) {
  const ModelConfig& c = model_->config();
  const MtpInputWeights& m = model_->weights().mtp;
  const int64_t E = c.n_embd;
  // Each token's row [rms_norm(embedding) * enorm | rms_norm(hidden) * hnorm].
  for_ranges(T, 4 * E, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = head_in_.data() + t * 2 * E;
      rms_norm(x_.data() + t * E, m.enorm.data(), 1, E, c.rms_eps, row);
      rms_norm(b.input_hidden.data() + t * E, m.hnorm.data(), 1, E, c.rms_eps, row + E);
    }
  });
  project(head_in_.data(), T, {{&m.eh_proj, x_.data()}});
}

void DecoderForward::eagle3_input(const ForwardBatch& b, int64_t T) {
  const ModelConfig& c = model_->config();
  const Eagle3Weights& e = model_->weights().eagle3;
  const std::vector<float>& attn_norm = model_->weights().layers[0].attn_norm;
  const int64_t E = c.n_embd;
  // g: the target's features fused by fc (into proj_, free until the attention output), or the
  // head's previous outputs as they are.
  const float* g = b.input_hidden.data();
  if (b.input_is_target_features) {
    project(b.input_hidden.data(), T, {{&e.fc, proj_.data()}});
    g = proj_.data();
  }
  const bool norm_residual = c.eagle3->norm_before_residual;
  for_ranges(T, 6 * E, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = head_in_.data() + t * 2 * E;
      rms_norm(x_.data() + t * E, attn_norm.data(), 1, E, c.rms_eps, row);
      rms_norm(g + t * E, e.hidden_norm.data(), 1, E, c.rms_eps, row + E);
      std::copy_n(norm_residual ? row + E : g + t * E, E, x_.data() + t * E);
    }
  });
}

void DecoderForward::capture_layer_input(const ForwardBatch& b, int32_t il) {
  if (!writes_outputs_) return;  // rank 0 has the whole stream (tensor-parallel all-reduce)
  const std::vector<int32_t>& layers = options_.capture_layer_inputs;
  const int64_t E = model_->config().n_embd, K = int64_t(layers.size());
  for (int64_t k = 0; k < K; ++k) {
    if (layers[size_t(k)] != il) continue;
    for (size_t i = 0; i < b.hidden_indices.size(); ++i)
      std::copy_n(x_.data() + int64_t(b.hidden_indices[i]) * E, E,
                  b.layer_inputs.data() + (int64_t(i) * K + k) * E);
  }
}

void DecoderForward::attention_mixer(const ForwardBatch& b, KvCache& cache, int32_t il, int64_t T,
                                     trace::Phases& ops) {
  const ModelConfig& c = model_->config();
  const LayerWeights& l = model_->weights().layers[size_t(il)];
  const LayerConfig& lc = c.layers[size_t(il)];
  // A layer sharing another's cache attends over that layer's K/V and writes none of its own.
  const bool writes_kv = lc.kv_index >= 0;
  const int32_t source = writes_kv ? il : lc.kv_source;
  const int32_t group = groups_->group[size_t(source)];
  const int64_t* slots = slots_.data() + int64_t(group) * T;
  // The layer's own head geometry (per layer in gemma4).
  const int32_t hd = lc.head_dim, n_head_kv = lc.n_head_kv, n_rot = lc.n_rot;
  const int64_t q_dim = int64_t(c.n_head) * hd;
  const int64_t kv_dim = int64_t(n_head_kv) * hd;
  const int32_t half_rot = n_rot / 2;
  const float* cs_all = rope_cs_.data() + (lc.local_rope ? T * c.n_rot : 0);
  const QkNorm qk_norm = l.q_norm.empty() ? QkNorm::kNone : c.arch->qk_norm;
  const float attn_scale = c.attn_scale;
  const bool gated = c.arch->attention_output_gate;
  const int32_t kv_layer = c.layers[size_t(source)].kv_index;
  // Without attn_v (gemma4's full layers), V is K before its norm and RoPE.
  const bool v_is_k = writes_kv && l.wv.data == nullptr;
  float* const q_out = gated ? q_gate_.data() : q_.data();
  // An EAGLE-3 head attends over [embedding | hidden] (eagle3_input), 2 * n_embd wide.
  const float* const in = c.eagle3 ? head_in_.data() : xn_.data();
  ops.next("qkv_matmul");
  if (!writes_kv)
    project(in, T, {{&l.wq, q_out}});
  else if (v_is_k)
    project(in, T, {{&l.wq, q_out}, {&l.wk, k_.data()}});
  else
    project(in, T, {{&l.wq, q_out}, {&l.wk, k_.data()}, {&l.wv, v_.data()}});
  ops.next("rope_kv_write");
  for_ranges(T, q_dim + kv_dim, [&](int64_t t0, int64_t t1) {
    const int64_t n = t1 - t0;
    float* q = q_.data() + t0 * q_dim;
    float* k = k_.data() + t0 * kv_dim;
    float* v = v_.data() + t0 * kv_dim;
    if (v_is_k) std::copy_n(k, n * kv_dim, v);
    if (gated) {  // each head's query rows, then its gate rows
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t h = 0; h < c.n_head; ++h) {
          const float* from = q_gate_.data() + (t * c.n_head + h) * 2 * hd;
          std::copy_n(from, hd, q_.data() + t * q_dim + h * hd);
          std::copy_n(from + hd, hd, attn_gate_.data() + t * q_dim + h * hd);
        }
    }
    if (!l.bq.empty()) add_bias(q, l.bq.data(), n, q_dim);
    if (!l.bk.empty()) add_bias(k, l.bk.data(), n, kv_dim);
    if (!l.bv.empty()) add_bias(v_.data() + t0 * kv_dim, l.bv.data(), n, kv_dim);
    if (qk_norm == QkNorm::kPerHead) {
      rms_norm(q, l.q_norm.data(), n * c.n_head, hd, c.rms_eps, q);
      if (writes_kv) rms_norm(k, l.k_norm.data(), n * n_head_kv, hd, c.rms_eps, k);
    } else if (qk_norm == QkNorm::kWhole) {
      rms_norm(q, l.q_norm.data(), n, q_dim, c.rms_eps, q);
      if (writes_kv) rms_norm(k, l.k_norm.data(), n, kv_dim, c.rms_eps, k);
    }
    if (writes_kv && c.arch->value_norm) rms_norm(v, ones_.data(), n * n_head_kv, hd, c.rms_eps, v);
    const float* cs = cs_all + t0 * half_rot * 2;
    rope_apply(q, n, c.n_head, hd, n_rot, c.rope_style, cs);
    if (writes_kv) rope_apply(k, n, n_head_kv, hd, n_rot, c.rope_style, cs);
    if (c.arch->prescale_query)
      for (int64_t i = 0; i < n * q_dim; ++i) q[i] *= attn_scale;
    // All of the batch's K/V go in before any attention, so a token can attend to earlier
    // tokens of its own chunk; each token writes only its own slot.
    if (writes_kv)
      for (int64_t t = t0; t < t1; ++t)
        cache.write(kv_layer, slots[t], k_.data() + t * kv_dim, v_.data() + t * kv_dim);
  });
  AttentionParams attn{
      c.n_head,      n_head_kv, hd, lc.sliding_window, c.arch->prescale_query ? 1.0f : attn_scale,
      c.attn_softcap};
  if (!l.attn_sinks.empty()) attn.sinks = l.attn_sinks.data();
  ops.next("attention");
  attention(b, cache, group, kv_layer, attn, q_.data(), attn_.data(), runs_);
  if (gated) {
    for_ranges(T * q_dim, 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) attn_[size_t(i)] *= sigmoid(attn_gate_[size_t(i)]);
    });
  }
  ops.next("attn_out_matmul");
  output_projection(l.wo, attn_.data(), T, head_split_, attn_full_);
  // After the tensor-parallel ranks' sum, so the bias is added once.
  if (!l.bo.empty())
    for_ranges(T, c.n_embd, [&](int64_t t0, int64_t t1) {
      add_bias(proj_.data() + t0 * c.n_embd, l.bo.data(), t1 - t0, c.n_embd);
    });
}

void DecoderForward::latent_attention_mixer(const ForwardBatch& b, KvCache& cache,
                                            const LayerWeights& l, const LayerConfig& lc, int64_t T,
                                            trace::Phases& ops) {
  ops.next("latent_attention");
  const auto attend = [&](const AttentionParams& p, const float* q, float* latent) {
    attention(b, cache, 0, lc.kv_index, p, q, latent, absorbed_runs_);
  };
  latent_->run(l.mla, xn_.data(), T, rope_cs_.data(), slots_.data(), latent_spans_, cache,
               lc.kv_index, *projector_, *pool_, min_work_, options_.min_parallel_work, attend,
               attn_.data());
  ops.next("attn_out_matmul");
  output_projection(l.wo, attn_.data(), T, head_split_, attn_full_);
}

}  // namespace vela

#include "spec/head_proposer.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>

namespace vela {

namespace {

ForwardOptions head_forward_options(const HeadProposerOptions& o) {
  ForwardOptions fo;
  fo.max_batch_tokens = o.max_tokens;
  fo.max_logits = o.max_seqs;
  fo.max_context = o.max_context;
  if (o.kind == HeadKind::kMtp) fo.n_output_rows = o.draft_vocab;
  return fo;
}

// Chained positions n - 1 .. n + K - 3 (K - 1 of them) start anywhere in a block: the blocks
// they can span.
int32_t scratch_blocks_per_seq(const HeadProposerOptions& o) {
  return (o.block_size - 1 + std::max(0, o.max_proposals - 2)) / o.block_size + 1;
}

KvCacheConfig head_cache_config(const Model& head, const HeadProposerOptions& o) {
  return model_cache_config(head.config(), o.block_size,
                            o.n_blocks + o.max_seqs * scratch_blocks_per_seq(o), o.kv_type);
}

}  // namespace

HeadProposer::HeadProposer(std::shared_ptr<const Model> head, const HeadProposerOptions& options,
                           std::shared_ptr<ThreadPool> pool)
    : options_(options),
      forward_(head, head_forward_options(options), std::move(pool)),
      cache_(head_cache_config(*head, options)) {
  const ModelConfig& c = head->config();
  follow_width_ = c.n_embd;
  if (options.kind == HeadKind::kEagle3) {
    assert(c.eagle3.has_value());
    captured_.assign(c.eagle3->extract_layers.begin(), c.eagle3->extract_layers.end());
    follow_width_ = int64_t(captured_.size()) * c.eagle3->target_n_embd;
  }
  scratch_per_seq_ = scratch_blocks_per_seq(options);
  max_blocks_per_seq_ = (options.max_context + options.block_size - 1) / options.block_size;
  tokens_.resize(size_t(options.max_tokens));
  positions_.resize(size_t(options.max_tokens));
  seq_index_.resize(size_t(options.max_tokens));
  block_tables_.resize(size_t(options.max_seqs) * size_t(max_blocks_per_seq_));
  hidden_in_.resize(size_t(options.max_tokens) *
                    size_t(std::max<int64_t>(follow_width_, c.n_embd)));
  rows_.resize(size_t(options.max_seqs));
  row_ids_.resize(size_t(options.max_seqs));
  row_lengths_.resize(size_t(options.max_seqs));
  logits_.resize(size_t(options.max_seqs) * size_t(forward_.logits_width()));
  hidden_out_.resize(size_t(options.max_seqs) * size_t(c.n_embd));
  chained_.reserve(size_t(options.max_seqs));
  const size_t row_bytes = size_t(follow_width_) * sizeof(float);
  deferred_capacity_ =
      int32_t(std::min<size_t>(size_t(std::max(0, options.deferred_rows)),
                               kDeferredBytes / (size_t(options.max_seqs) * row_bytes)));
  if (deferred_capacity_ > 0) {
    deferred_hidden_ = ZeroedPages<float>(size_t(options.max_seqs) * size_t(deferred_capacity_) *
                                          size_t(follow_width_));
    for (int32_t slot = options.max_seqs - 1; slot >= 0; --slot) free_deferred_.push_back(slot);
    taken_deferred_.reserve(size_t(options.max_seqs));
  }
  pieces_.reserve(2 * size_t(options.max_seqs));
}

double HeadProposer::pass_seconds(double target_step_seconds) const {
  return pass_seconds_ > 0 ? pass_seconds_ : options_.pass_share * target_step_seconds;
}

int32_t HeadProposer::argmax(std::span<const float> logits) {
  int32_t best = 0;  // NaN never wins
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[size_t(best)]) best = int32_t(i);
  return best;
}

Status HeadProposer::run_pass(int32_t n_tokens, int32_t n_rows, bool features) {
  const size_t E = size_t(forward_.model().config().n_embd);
  const size_t width = features ? size_t(follow_width_) : E;
  ForwardBatch b;
  b.token_ids = std::span<const int32_t>(tokens_.data(), size_t(n_tokens));
  b.positions = std::span<const int32_t>(positions_.data(), size_t(n_tokens));
  b.seq_index = std::span<const int32_t>(seq_index_.data(), size_t(n_tokens));
  const int32_t n_seqs = seq_index_[size_t(n_tokens - 1)] + 1;
  b.block_tables =
      std::span<const int32_t>(block_tables_.data(), size_t(n_seqs) * size_t(max_blocks_per_seq_));
  b.max_blocks_per_seq = max_blocks_per_seq_;
  b.logits_indices = std::span<const int32_t>(rows_.data(), size_t(n_rows));
  b.hidden_indices = b.logits_indices;
  b.input_hidden = std::span<const float>(hidden_in_.data(), size_t(n_tokens) * width);
  b.input_is_target_features = features && options_.kind == HeadKind::kEagle3;
  return forward_.forward(
      b, cache_, std::span<float>(logits_).first(size_t(n_rows) * size_t(forward_.logits_width())),
      std::span<float>(hidden_out_).first(size_t(n_rows) * E));
}

bool HeadProposer::defer(const PassRows& p) {
  auto it = deferred_.find(p.id);
  if (it == deferred_.end()) {
    if (free_deferred_.empty() || p.n_rows > deferred_capacity_) return false;
    it = deferred_.emplace(p.id, Deferred{free_deferred_.back(), p.first_position, 0}).first;
    free_deferred_.pop_back();
  }
  Deferred& d = it->second;
  if (d.first_position + d.n_rows != p.first_position || d.n_rows + p.n_rows > deferred_capacity_)
    return false;
  const size_t W = size_t(follow_width_);
  std::copy_n(p.hidden.data(), size_t(p.n_rows) * W, deferred_rows(d.slot) + size_t(d.n_rows) * W);
  d.n_rows += p.n_rows;
  return true;
}

void HeadProposer::add_pieces(const PassRows& p) {
  const auto it = deferred_.find(p.id);
  if (it == deferred_.end()) {
    pieces_.push_back({&p, p.first_position, p.n_rows, p.hidden.data(), p.decoding});
    return;
  }
  const Deferred d = it->second;
  deferred_.erase(it);
  taken_deferred_.push_back(d.slot);  // read by this call's passes, free after them
  const size_t W = size_t(follow_width_);
  float* kept = deferred_rows(d.slot);
  if (d.first_position + d.n_rows != p.first_position) {
    // Not a continuation (the sequence went back before them): they no longer stand.
    pieces_.push_back({&p, p.first_position, p.n_rows, p.hidden.data(), p.decoding});
    return;
  }
  if (d.n_rows + p.n_rows <= deferred_capacity_) {
    std::copy_n(p.hidden.data(), size_t(p.n_rows) * W, kept + size_t(d.n_rows) * W);
    pieces_.push_back({&p, d.first_position, d.n_rows + p.n_rows, kept, p.decoding});
    return;
  }
  pieces_.push_back({&p, d.first_position, d.n_rows, kept, false});
  pieces_.push_back({&p, p.first_position, p.n_rows, p.hidden.data(), p.decoding});
}

Status HeadProposer::follow(std::span<const PassRows> rows) {
  pieces_.clear();
  taken_deferred_.clear();
  for (const PassRows& p : rows) {
    // The target's pass held these rows, so they fit; anything else is a caller's mistake.
    assert(p.first_position + p.n_rows < int32_t(p.tokens.size()));
    if (p.deferrable && deferred_capacity_ > 0 && defer(p)) {
      seqs_.erase(p.id);  // kept from speculating: no first proposal wanted
      continue;
    }
    add_pieces(p);
  }
  const Status st = run_pieces();
  free_deferred_.insert(free_deferred_.end(), taken_deferred_.begin(), taken_deferred_.end());
  taken_deferred_.clear();
  return st;
}

Status HeadProposer::run_pieces() {
  const size_t E = size_t(forward_.model().config().n_embd);
  const size_t W = size_t(follow_width_);
  const size_t width = size_t(forward_.logits_width());
  int32_t n_tokens = 0, n_seqs = 0, n_rows = 0;
  const auto run = [&]() -> Status {
    if (n_tokens == 0) return {};
    const Status st = run_pass(n_tokens, n_rows, true);
    for (int32_t i = 0; i < n_rows; ++i) {
      if (!st) {
        seqs_.erase(row_ids_[size_t(i)]);
        continue;
      }
      Sequence& s = seqs_[row_ids_[size_t(i)]];
      s.n_tokens = row_lengths_[size_t(i)];
      s.first = argmax(std::span<const float>(logits_.data() + size_t(i) * width, width));
      s.hidden.assign(hidden_out_.begin() + long(size_t(i) * E),
                      hidden_out_.begin() + long(size_t(i + 1) * E));
    }
    n_tokens = n_seqs = n_rows = 0;
    std::fill(block_tables_.begin(), block_tables_.end(), -1);
    return st;
  };
  std::fill(block_tables_.begin(), block_tables_.end(), -1);
  uint64_t last_id = 0;
  for (const Piece& piece : pieces_) {
    const PassRows& p = *piece.rows;
    // A piece longer than a pass goes in parts, one per pass, in successive passes.
    for (int32_t done = 0; done < piece.n_rows;) {
      const bool same_seq = n_seqs > 0 && last_id == p.id;
      if (same_seq || n_seqs == options_.max_seqs || n_tokens == options_.max_tokens)
        if (auto st = run(); !st) return st;
      const int32_t n = std::min(piece.n_rows - done, options_.max_tokens - n_tokens);
      const int32_t first = piece.first_position + done;
      for (int32_t k = 0; k < n; ++k) {
        tokens_[size_t(n_tokens)] = p.tokens[size_t(first + k + 1)];
        positions_[size_t(n_tokens)] = first + k;
        seq_index_[size_t(n_tokens)] = n_seqs;
        std::copy_n(piece.hidden + size_t(done + k) * W, W,
                    hidden_in_.data() + size_t(n_tokens) * W);
        ++n_tokens;
      }
      std::copy_n(p.block_table.data(), std::min<size_t>(p.block_table.size(), max_blocks_per_seq_),
                  block_tables_.begin() + long(n_seqs) * max_blocks_per_seq_);
      done += n;
      if (done == piece.n_rows && piece.decoding) {
        rows_[size_t(n_rows)] = n_tokens - 1;
        row_ids_[size_t(n_rows)] = p.id;
        row_lengths_[size_t(n_rows)] = int32_t(p.tokens.size());
        ++n_rows;
      } else if (done == piece.n_rows) {
        seqs_.erase(p.id);  // mid-prompt, or kept from speculating: no first proposal wanted
      }
      ++n_seqs;
      last_id = p.id;
    }
  }
  return run();
}

void HeadProposer::forget(uint64_t id) {
  seqs_.erase(id);
  if (const auto it = deferred_.find(id); it != deferred_.end()) {
    free_deferred_.push_back(it->second.slot);
    deferred_.erase(it);
  }
}

void HeadProposer::rollback(uint64_t id, int32_t n_valid) {
  // A row at position p stands while the token after it does.
  if (const auto it = deferred_.find(id); it != deferred_.end()) {
    Deferred& d = it->second;
    d.n_rows = std::clamp(n_valid - 1 - d.first_position, 0, d.n_rows);
    if (d.n_rows == 0) {
      free_deferred_.push_back(d.slot);
      deferred_.erase(it);
    }
  }
}

void HeadProposer::chain_table(const Chained& c, int32_t i, bool copy_rows) {
  const int32_t bs = options_.block_size;
  const int32_t first = int32_t(c.request->tokens.size()) - 1;  // the first chained position
  const int32_t b0 = first / bs;
  int32_t* row = block_tables_.data() + size_t(i) * size_t(max_blocks_per_seq_);
  const std::span<const int32_t> own = c.request->block_table;
  for (int32_t b = 0; b < b0; ++b) row[b] = own[size_t(b)];
  for (int32_t b = b0; b < max_blocks_per_seq_ && b - b0 < scratch_per_seq_; ++b)
    row[b] = c.scratch + (b - b0);
  // The rows before `first` in its block are the target's verified ones: copied once.
  if (copy_rows && first % bs != 0) {
    const int32_t src = own[size_t(b0)];
    const size_t bytes = cache_.config().row_bytes(0);
    for (int32_t s = 0; s < first % bs; ++s) {
      const int64_t from = int64_t(src) * bs + s, to = int64_t(c.scratch) * bs + s;
      std::memcpy(cache_.k_row(0, to), cache_.k_row(0, from), bytes);
      if (!cache_.config().k_only) std::memcpy(cache_.v_row(0, to), cache_.v_row(0, from), bytes);
    }
  }
}

Status HeadProposer::propose(std::span<ProposalRequest> requests) {
  const size_t E = size_t(forward_.model().config().n_embd);
  const size_t width = size_t(forward_.logits_width());
  chained_.clear();
  for (ProposalRequest& r : requests) {
    r.n_proposed = 0;
    r.q = {};
    const auto it = seqs_.find(r.id);
    if (r.max_k <= 0 || it == seqs_.end() || it->second.first < 0 ||
        it->second.n_tokens != int32_t(r.tokens.size()))
      continue;
    r.proposals[0] = it->second.first;
    r.n_proposed = 1;
    const int32_t first = int32_t(r.tokens.size()) - 1;
    // A chain needs the block before its first position whenever it starts mid-block.
    const bool has_block = first % options_.block_size == 0 ||
                           int32_t(r.block_table.size()) > first / options_.block_size;
    if (r.max_k > 1 && has_block && int32_t(chained_.size()) < options_.max_seqs &&
        first + r.max_k - 1 <= options_.max_context)
      chained_.push_back(
          {&r, &it->second, -1, options_.n_blocks + int32_t(chained_.size()) * scratch_per_seq_});
  }
  for (int32_t j = 1; !chained_.empty(); ++j) {
    size_t n_live = 0;
    for (const Chained& c : chained_)
      if (c.request->max_k > j) chained_[n_live++] = c;
    chained_.resize(n_live);
    if (chained_.empty()) break;
    // One token per sequence at its next position: proposal j - 1 beside the block's last output.
    std::fill(block_tables_.begin(), block_tables_.end(), -1);
    for (size_t i = 0; i < chained_.size(); ++i) {
      Chained& c = chained_[i];
      tokens_[i] = c.request->proposals[size_t(j - 1)];
      positions_[i] = int32_t(c.request->tokens.size()) - 2 + j;
      seq_index_[i] = int32_t(i);
      rows_[i] = int32_t(i);
      const float* h = j == 1 ? c.seq->hidden.data() : hidden_out_.data() + size_t(c.row) * E;
      std::copy_n(h, E, hidden_in_.data() + i * E);
      c.row = int32_t(i);
      chain_table(c, int32_t(i), j == 1);
    }
    const auto start = std::chrono::steady_clock::now();
    if (auto st = run_pass(int32_t(chained_.size()), int32_t(chained_.size()), false); !st)
      return st;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pass_seconds_ = pass_seconds_ > 0 ? 0.8 * pass_seconds_ + 0.2 * seconds : seconds;
    for (size_t i = 0; i < chained_.size(); ++i) {
      ProposalRequest& r = *chained_[i].request;
      r.proposals[size_t(j)] = argmax(std::span<const float>(logits_.data() + i * width, width));
      r.n_proposed = j + 1;
    }
  }
  return {};
}

}  // namespace vela

#pragma once
// One forward pass's input: tokens from several sequences, each at its own position, with the
// KV blocks each sequence owns. Prefill chunks and decode tokens mix freely: a sequence that has
// N tokens cached contributes tokens at positions N, N+1, ... (consecutive, in order). A model
// with recurrent layers also needs each sequence's state slot, whose state covers exactly its N
// computed tokens (a sequence at position 0 starts from a zero state), and each sequence's tokens
// next to each other in the batch.
// A plain view type over buffers the caller owns (sized once by the caller).
#include <cstdint>
#include <span>

namespace vela {

// A recurrent state to save in a pass: sequence `seq`'s state after its first `position` tokens,
// into state slot `slot` (a prefix checkpoint, or the state after a speculative proposal).
struct StateCheckpointWrite {
  int32_t seq = 0;
  int32_t position = 0;
  int32_t slot = 0;
};

// A recurrent state to copy before a pass: every state layer of slot `from` into slot `to` (a
// prefix checkpoint restored, the state after the last accepted speculative token kept).
struct StateCopy {
  int32_t from = 0;
  int32_t to = 0;
};

struct ForwardBatch {
  std::span<const int32_t> token_ids;  // [n_tokens]
  std::span<const int32_t> positions;  // [n_tokens] position of each token in its sequence
  std::span<const int32_t>
      seq_index;  // [n_tokens] which sequence (row of block_tables) a token belongs to
  // [n_seqs, max_blocks_per_seq] KV block ids, -1 padded. With n_kv_groups layer groups (a cache
  // grouped by sliding window, kv_cache.h), position-major: group g's block for position p is
  // entry p / block_size * n_kv_groups + g (-1 where it slid out of the group's window).
  std::span<const int32_t> block_tables;
  int32_t max_blocks_per_seq = 0;
  std::span<const int32_t>
      logits_indices;  // [n_logits] indices of the tokens whose logits are wanted
  std::span<const int32_t> hidden_indices;  // [n_hidden] tokens whose final hidden state is wanted
  std::span<const int32_t> state_slots;     // [n_seqs] recurrent-state slot of each sequence
  // [n_checkpoints] states to save on the way, each within its sequence's tokens of the batch
  std::span<const StateCheckpointWrite> state_checkpoints;
  // [n_copies] done in order before the pass, on every rank (each copies its own layers' and
  // heads' part of the states)
  std::span<const StateCopy> state_copies;
  int32_t n_kv_groups = 1;  // the cache's layer groups (block_tables)
  // [n_tokens, n_embd] an MTP block's hidden-state input (empty otherwise): row t goes with
  // token t (Model::mtp_block). An EAGLE-3 head's (Model::eagle3_head): [n_tokens, 3 *
  // target_n_embd] target features when input_is_target_features, else [n_tokens, n_embd] its
  // own previous outputs (hidden rows of an earlier pass).
  std::span<const float> input_hidden;
  // An EAGLE-3 head's input_hidden rows are the target's layer inputs (ForwardOptions::
  // capture_layer_inputs = its extract_layers), fused by its fc; false for every other model.
  bool input_is_target_features = false;
  // [n_hidden, capture_layer_inputs.size() * n_embd] where a pass with
  // ForwardOptions::capture_layer_inputs writes, for each row named by hidden_indices, the
  // residual stream entering each listed layer (before its input norm), in list order; empty:
  // nothing captured. Filled on world rank 0 only.
  std::span<float> layer_inputs;

  int32_t n_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t n_seqs() const {
    return max_blocks_per_seq ? static_cast<int32_t>(block_tables.size()) / max_blocks_per_seq : 0;
  }
};

}  // namespace vela

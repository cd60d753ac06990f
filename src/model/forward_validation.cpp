// DecoderForward::validate: every check a batch passes before a forward pass touches memory
// (sizes, token ids, positions, block ids, state slots, a draft head's inputs, captured rows).
#include <string>

#include "model/decoder_forward.h"

namespace vela {

Status DecoderForward::validate(const ForwardBatch& b, const KvCache& cache, size_t logits_size,
                                size_t hidden_size) const {
  const ModelConfig& c = model_->config();
  const int32_t T = b.n_tokens();
  if (T == 0) return make_error("empty batch");
  if (T > options_.max_batch_tokens)
    return make_error("batch of " + std::to_string(T) + " tokens exceeds max_batch_tokens " +
                      std::to_string(options_.max_batch_tokens));
  if (b.input_is_target_features && !c.eagle3)
    return make_error("input_is_target_features is for an EAGLE-3 head; this model takes none");
  if (c.mtp_block) {
    if (tp_ != nullptr)
      return make_error(
          "a multi-token-prediction block runs in one process: tensor and pipeline parallelism "
          "are not supported");
    const size_t want = size_t(T) * size_t(c.n_embd);
    if (b.input_hidden.size() != want)
      return make_error(
          "a multi-token-prediction block needs input_hidden of n_tokens x n_embd = " +
          std::to_string(want) + " floats, got " + std::to_string(b.input_hidden.size()));
  } else if (c.eagle3) {
    if (tp_ != nullptr)
      return make_error(
          "an EAGLE-3 head runs in one process: tensor and pipeline parallelism are not "
          "supported");
    const bool features = b.input_is_target_features;
    const size_t want =
        size_t(T) * (features ? 3 * size_t(c.eagle3->target_n_embd) : size_t(c.n_embd));
    if (b.input_hidden.size() != want)
      return make_error(std::string("an EAGLE-3 head needs input_hidden of n_tokens x ") +
                        (features ? "3 target n_embd (target features)" : "n_embd (its outputs)") +
                        " = " + std::to_string(want) + " floats, got " +
                        std::to_string(b.input_hidden.size()));
  } else if (!b.input_hidden.empty()) {
    return make_error("input_hidden is for a multi-token-prediction block; this model takes none");
  }
  if (b.positions.size() != size_t(T) || b.seq_index.size() != size_t(T))
    return make_error("batch positions/seq_index sizes differ from the token count");
  if (b.max_blocks_per_seq <= 0 || b.block_tables.size() % size_t(b.max_blocks_per_seq) != 0)
    return make_error("batch block table shape is invalid");
  const KvCacheConfig& kc = cache.config();
  const KvCacheConfig& want = cache_geometry_[kc.group_windows.empty() ? 0 : 1];
  if (kc.n_layer != want.n_layer || kc.n_head_kv != want.n_head_kv ||
      kc.head_dim != want.head_dim || kc.layer_shapes != want.layer_shapes ||
      kc.k_only != want.k_only || kc.group_windows != want.group_windows ||
      kc.layer_group != want.layer_group)
    return make_error("KV cache geometry does not match the model");
  if (b.n_kv_groups != kc.n_groups())
    return make_error("batch block tables are for " + std::to_string(b.n_kv_groups) +
                      " layer groups, the cache has " + std::to_string(kc.n_groups()));
  // Latent attention reads V as the leading kv_lora_rank values of each row: whole q8_0 blocks.
  if (c.latent_attention() && kc.type == KvType::kQ8_0 && c.mla.kv_lora_rank % kKvQ8Block != 0)
    return make_error("a q8_0 KV cache needs kv_lora_rank " + std::to_string(c.mla.kv_lora_rank) +
                      " to be a multiple of 32");
  if (c.recurrent()) {
    if (kc.n_state_layers != c.n_state_layers || kc.state_floats != c.delta_net.state_floats())
      return make_error("the cache's recurrent-state geometry does not match the model");
    if (b.state_slots.size() != size_t(b.n_seqs()))
      return make_error("batch has no recurrent-state slot for every sequence");
    for (size_t i = 0; i < b.state_slots.size(); ++i) {
      const int32_t slot = b.state_slots[i];
      if (slot < 0 || slot >= kc.n_state_slots)
        return make_error("state slot " + std::to_string(slot) + " out of range");
      for (size_t j = 0; j < i; ++j)
        if (b.state_slots[j] == slot)
          return make_error("two sequences share state slot " + std::to_string(slot));
    }
    // Each sequence's tokens are one run of the batch: its state advances in token order.
    for (int32_t t = 1; t < T; ++t) {
      const int32_t s = b.seq_index[size_t(t)];
      if (s == b.seq_index[size_t(t - 1)]) {
        if (b.positions[size_t(t)] != b.positions[size_t(t - 1)] + 1)
          return make_error("a sequence's tokens are not at consecutive positions");
        continue;
      }
      for (int32_t u = 0; u < t - 1; ++u)
        if (b.seq_index[size_t(u)] == s)
          return make_error("a sequence's tokens are not next to each other in the batch");
    }
    // Checkpoints: within their sequence's tokens, in the batch's order of sequences and then
    // by position, into slots no sequence of the batch runs in.
    int32_t last_first = -1, last_position = 0;
    for (const StateCheckpointWrite& cp : b.state_checkpoints) {
      if (cp.seq < 0 || cp.seq >= b.n_seqs())
        return make_error("checkpoint's sequence out of range");
      int32_t first = -1, n = 0;
      for (int32_t t = 0; t < T; ++t)
        if (b.seq_index[size_t(t)] == cp.seq) {
          if (first < 0) first = t;
          ++n;
        }
      if (first < 0) return make_error("checkpoint of a sequence without tokens in the batch");
      const int32_t p0 = b.positions[size_t(first)];
      if (cp.position <= p0 || cp.position > p0 + n)
        return make_error("checkpoint position " + std::to_string(cp.position) +
                          " is outside its sequence's tokens in the batch");
      if (first < last_first || (first == last_first && cp.position < last_position))
        return make_error("checkpoints are not in batch order");
      last_first = first;
      last_position = cp.position;
      if (cp.slot < 0 || cp.slot >= kc.n_state_slots)
        return make_error("checkpoint slot " + std::to_string(cp.slot) + " out of range");
      for (int32_t slot : b.state_slots)
        if (slot == cp.slot) return make_error("a checkpoint slot is a running sequence's slot");
    }
    for (size_t i = 0; i < b.state_checkpoints.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (b.state_checkpoints[i].slot == b.state_checkpoints[j].slot)
          return make_error("two checkpoints share a slot");
    for (const StateCopy& copy : b.state_copies)
      if (copy.from < 0 || copy.from >= kc.n_state_slots || copy.to < 0 ||
          copy.to >= kc.n_state_slots || copy.from == copy.to)
        return make_error("state copy from slot " + std::to_string(copy.from) + " to slot " +
                          std::to_string(copy.to) + " is out of range or onto itself");
  } else if (!model_->whole_config().recurrent() &&
             (!b.state_checkpoints.empty() || !b.state_copies.empty())) {
    // (A pipeline stage without recurrent layers of a model with some has no part of them.)
    return make_error("state checkpoints or copies for a model without recurrent layers");
  }
  for (int32_t b_id : b.block_tables)
    if (b_id < -1 || b_id >= kc.n_blocks)
      return make_error("block id " + std::to_string(b_id) + " out of range");
  const int32_t n_seqs = b.n_seqs();
  for (int32_t t = 0; t < T; ++t) {
    const int32_t id = b.token_ids[size_t(t)];
    if (id < 0 || id >= c.n_vocab)
      return make_error("token id " + std::to_string(id) + " out of range [0, " +
                        std::to_string(c.n_vocab) + ")");
    const int32_t pos = b.positions[size_t(t)];
    if (pos < 0 || pos >= options_.max_context)
      return make_error("position " + std::to_string(pos) + " out of range [0, " +
                        std::to_string(options_.max_context) + ")");
    const int32_t s = b.seq_index[size_t(t)];
    if (s < 0 || s >= n_seqs) return make_error("token's sequence index out of range");
    // The token's own position has a block in every group (the earlier positions it sees hold
    // this sequence's cached K/V).
    const int64_t entry = int64_t(pos / kc.block_size) * b.n_kv_groups;
    if (entry + b.n_kv_groups > b.max_blocks_per_seq)
      return make_error("no KV block for position " + std::to_string(pos));
    for (int32_t g = 0; g < b.n_kv_groups; ++g)
      if (b.block_tables[size_t(s) * size_t(b.max_blocks_per_seq) + size_t(entry + g)] < 0)
        return make_error("no KV block for position " + std::to_string(pos));
  }
  if (b.logits_indices.size() > size_t(options_.max_logits))
    return make_error("too many logits rows requested");
  for (int32_t i : b.logits_indices)
    if (i < 0 || i >= T) return make_error("logits index out of range");
  const bool outputs_here = tp_ == nullptr || tp_->world_rank() == 0;
  if (outputs_here && logits_size < b.logits_indices.size() * size_t(logits_width_))
    return make_error("logits buffer too small");
  if (b.hidden_indices.size() > size_t(T))
    return make_error("too many hidden-state rows requested");
  for (int32_t i : b.hidden_indices)
    if (i < 0 || i >= T) return make_error("hidden-state index out of range");
  if (outputs_here && hidden_size < b.hidden_indices.size() * size_t(c.n_embd))
    return make_error("hidden-state buffer too small");
  if (!b.layer_inputs.empty()) {
    const std::vector<int32_t>& layers = options_.capture_layer_inputs;
    if (layers.empty())
      return make_error(
          "batch has layer_inputs, but ForwardOptions::capture_layer_inputs is empty");
    if (tp_ != nullptr && tp_->n_stages() > 1)
      return make_error(
          "capturing layer inputs is not supported with pipeline parallelism (a stage lacks the "
          "other stages' layers)");
    for (const int32_t il : layers)
      if (il < 0 || il >= c.n_layer)
        return make_error("capture_layer_inputs entry " + std::to_string(il) +
                          " is not a layer of the model (0 to " + std::to_string(c.n_layer - 1) +
                          ")");
    const size_t want = b.hidden_indices.size() * layers.size() * size_t(c.n_embd);
    if (outputs_here && b.layer_inputs.size() < want)
      return make_error("layer_inputs buffer too small: n_hidden x " +
                        std::to_string(layers.size()) +
                        " layers x n_embd = " + std::to_string(want) + " floats, got " +
                        std::to_string(b.layer_inputs.size()));
  }
  return {};
}

}  // namespace vela

#include "model/tensor_parallel.h"

#include "model/decoder_forward.h"

namespace vela {

namespace {
// n_tokens, block table size, max_blocks_per_seq, n_logits, n_hidden, n_state_slots,
// n_checkpoints, n_copies
constexpr size_t kHeaderWords = 8;
}  // namespace

void BatchMessage::encode(const ForwardBatch& b) {
  words_.clear();
  words_.reserve(kHeaderWords + 3 * b.token_ids.size() + b.block_tables.size() +
                 b.logits_indices.size() + b.hidden_indices.size() + b.state_slots.size() +
                 3 * b.state_checkpoints.size() + 2 * b.state_copies.size());
  words_.push_back(b.n_tokens());
  words_.push_back(int32_t(b.block_tables.size()));
  words_.push_back(b.max_blocks_per_seq);
  words_.push_back(int32_t(b.logits_indices.size()));
  words_.push_back(int32_t(b.hidden_indices.size()));
  words_.push_back(int32_t(b.state_slots.size()));
  words_.push_back(int32_t(b.state_checkpoints.size()));
  words_.push_back(int32_t(b.state_copies.size()));
  for (std::span<const int32_t> part : {b.token_ids, b.positions, b.seq_index, b.block_tables,
                                        b.logits_indices, b.hidden_indices, b.state_slots})
    words_.insert(words_.end(), part.begin(), part.end());
  for (const StateCheckpointWrite& cp : b.state_checkpoints)
    words_.insert(words_.end(), {cp.seq, cp.position, cp.slot});
  for (const StateCopy& copy : b.state_copies) words_.insert(words_.end(), {copy.from, copy.to});
}

Result<ForwardBatch> BatchMessage::decode(std::span<const int32_t> w) {
  if (w.size() < kHeaderWords) return make_error("batch message shorter than its header");
  const int64_t n_tokens = w[0], n_table = w[1], n_logits = w[3], n_hidden = w[4];
  const int64_t n_slots = w[5], n_checkpoints = w[6], n_copies = w[7];
  if (n_tokens < 0 || n_table < 0 || n_logits < 0 || n_hidden < 0 || n_slots < 0 ||
      n_checkpoints < 0 || n_copies < 0 ||
      w.size() != kHeaderWords + size_t(3 * n_tokens + n_table + n_logits + n_hidden + n_slots +
                                        3 * n_checkpoints + 2 * n_copies))
    return make_error("batch message size does not match its header");
  ForwardBatch b;
  size_t at = kHeaderWords;
  const auto take = [&](int64_t n) {
    std::span<const int32_t> part = w.subspan(at, size_t(n));
    at += size_t(n);
    return part;
  };
  b.token_ids = take(n_tokens);
  b.positions = take(n_tokens);
  b.seq_index = take(n_tokens);
  b.block_tables = take(n_table);
  b.max_blocks_per_seq = w[2];
  b.logits_indices = take(n_logits);
  b.hidden_indices = take(n_hidden);
  b.state_slots = take(n_slots);
  checkpoints_.clear();
  for (int64_t i = 0; i < n_checkpoints; ++i) {
    const std::span<const int32_t> cp = take(3);
    checkpoints_.push_back({cp[0], cp[1], cp[2]});
  }
  copies_.clear();
  for (int64_t i = 0; i < n_copies; ++i) {
    const std::span<const int32_t> copy = take(2);
    copies_.push_back({copy[0], copy[1]});
  }
  b.state_checkpoints = checkpoints_;
  b.state_copies = copies_;
  return b;
}

Status run_tensor_parallel_worker(DecoderForward& forward, KvCache& cache, TensorParallel& group) {
  while (std::optional<ForwardBatch> batch = group.receive_batch()) {
    if (auto st = forward.forward(*batch, cache, {}); !st)
      return make_error("tensor-parallel rank " + std::to_string(group.world_rank()) + ": " +
                        st.message());
  }
  return {};
}

}  // namespace vela

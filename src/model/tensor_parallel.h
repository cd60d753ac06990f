#pragma once
// The collective operations a tensor- and pipeline-parallel forward pass needs, as an interface
// the distributed runtime (src/dist/) implements over MPI. The group is n_stages() pipeline
// stages (contiguous layers), each a tensor-parallel group of size() ranks. World rank 0 (stage
// 0's rank 0) runs the engine: before each pass it sends the batch, and every other rank runs
// the same pass on its slice of the weights (tensor_shard.h). Within a stage the slices meet
// twice per layer, in an all-reduce of the attention output and FFN down projections (or, for a
// matrix kept whole, a gather of its input), and once per pass when the last stage's rank 0
// gathers the logits' vocabulary slices. Between stages each rank sends its hidden states to the
// same rank of the next stage; the last stage sends the logits to world rank 0.
// Thread-safety: each rank calls its group from one thread at a time (the one running its
// passes); every rank makes the same calls in the same order.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/forward_batch.h"
#include "util/result.h"

namespace vela {

class KvCache;
class DecoderForward;

// What one rank has sent and how long it spent in the group's calls, since it joined.
struct TensorParallelTraffic {
  uint64_t bytes_sent = 0;  // payload bytes this rank contributed, counted once per receiver
  double seconds = 0;       // wall time inside the calls (waiting for the others included)
};

// Each world rank's figures in `now` less those in `before` (a rank missing from `before`: all
// of its figures).
inline std::vector<TensorParallelTraffic> traffic_since(
    const std::vector<TensorParallelTraffic>& before,
    const std::vector<TensorParallelTraffic>& now) {
  std::vector<TensorParallelTraffic> out = now;
  for (size_t i = 0; i < out.size() && i < before.size(); ++i) {
    out[i].bytes_sent -= before[i].bytes_sent;
    out[i].seconds -= before[i].seconds;
  }
  return out;
}

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int32_t rank() const = 0;  // within this rank's stage
  virtual int32_t size() const = 0;  // ranks of one stage
  virtual int32_t stage() const = 0;
  virtual int32_t n_stages() const = 0;
  int32_t world_rank() const { return stage() * size() + rank(); }

  // World rank 0: the batch of the pass it is about to run (hidden-state rows are rank 0's alone).
  // Returns once the batch is posted, without waiting for the other ranks to take it: a
  // pipeline's other stages take it once they have finished the passes before it.
  virtual void send_batch(const ForwardBatch& batch) = 0;
  // World rank 0: waits until at most `keep` of the batches sent (the newest) may still be on
  // their way.
  virtual void finish_batches(size_t keep) = 0;
  // Other ranks: the next batch rank 0 sent, valid until the next call; nullopt once rank 0
  // has closed the group or moved on to another engine's setup.
  virtual std::optional<ForwardBatch> receive_batch() = 0;
  // World rank 0: no more batches follow (the other ranks' receive_batch returns nullopt).
  virtual void close() = 0;

  // Collectives among the ranks of this rank's stage.
  // x = the sum of every rank's x, added in rank order, so every rank holds the same bits.
  virtual void all_reduce_sum(std::span<float> x) = 0;
  // Every rank's `local` concatenated in rank order in `all`, rank r's part counts[r] floats
  // long: on rank 0 only (the other ranks pass empty `all`), or with everyone on every rank.
  virtual void gather(std::span<const float> local, std::span<float> all,
                      std::span<const int64_t> counts, bool everyone) = 0;

  // Point to point between world ranks, received in the order sent. send_to returns at once:
  // `x` must stay unchanged until finish_sends has waited for that send; finish_sends(keep)
  // waits for every send but the newest `keep`. receive_from waits for the message (its size
  // known to both sides).
  virtual void send_to(int32_t to_world_rank, std::span<const float> x) = 0;
  virtual void receive_from(int32_t from_world_rank, std::span<float> x) = 0;
  virtual void finish_sends(size_t keep = 0) = 0;

  // This rank's totals (the in-process test group reports zeros).
  virtual TensorParallelTraffic traffic() const { return {}; }
  // World rank 0, between passes: every world rank's totals, in world-rank order (rank 0's own
  // since it joined, the others' since the last setup: their part of the engine's passes), in
  // one small message from each rank. Empty where the group has no such figures (the in-process
  // test group).
  virtual std::vector<TensorParallelTraffic> gather_traffic() { return {}; }
};

// A ForwardBatch flattened into one int32 message and back (what send_batch carries): the
// tokens, positions, sequence indices, block tables, logits and hidden-state rows, and the
// recurrent-state slots, checkpoints and copies.
// Thread-safety: none; one object per sending or receiving thread.
class BatchMessage {
 public:
  void encode(const ForwardBatch& batch);
  // The batch view over `words` (the message as received) and this object (its checkpoints and
  // copies, until the next decode); an error when it is malformed.
  Result<ForwardBatch> decode(std::span<const int32_t> words);
  const std::vector<int32_t>& words() const { return words_; }

 private:
  // [header, token_ids, positions, seq_index, tables, logits rows, hidden rows, state slots,
  //  checkpoints (seq, position, slot), copies (from, to)]
  std::vector<int32_t> words_;
  std::vector<StateCheckpointWrite> checkpoints_;  // decoded
  std::vector<StateCopy> copies_;                  // decoded
};

// A non-zero rank's life: runs every pass rank 0 sends, on its own slice and KV cache, until
// rank 0 closes the group. A pass that fails returns its error (the group cannot go on without
// this rank).
Status run_tensor_parallel_worker(DecoderForward& forward, KvCache& cache, TensorParallel& group);

}  // namespace vela

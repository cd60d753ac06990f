#pragma once
// A forward-pass workload shared by the model tests that compare two ways of running the same
// passes (thread counts, tensor-parallel ranks): two sequences in scattered, interleaved blocks;
// pass 1 a prefill mixing A's 37-token prompt with B's 6 tokens, passes 2-4 one decode token
// each. Every token's logits are kept. A model with recurrent layers takes each sequence's tokens
// next to each other, in state slots 0 and 1, saves A's state after 20 tokens in slot 2 on the
// way, and in pass 2 restores it (a state copy) and runs A on from position 20 with new tokens.
// sequences_together: each sequence's tokens next to each other for any model (latent attention's
// expanded form takes a run of consecutive rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/decoder_forward.h"

namespace vela::test {

inline constexpr int32_t kTwoSeqBlock = 16;                     // KV block size the passes need
inline constexpr int32_t kTwoSeqMaxBlocks = 8;                  // blocks per sequence in the table
inline constexpr int32_t kTwoSeqBlocks = 2 * kTwoSeqMaxBlocks;  // blocks the KV cache needs
inline constexpr int32_t kTwoSeqStateSlots = 3;                 // state slots it needs

// The logits of all four passes, [43 + 2 * 3, n_vocab] ([43 + 3 + 2 * 2, n_vocab] recurrent).
inline std::vector<float> run_two_sequence_passes(DecoderForward& fwd, KvCache& cache,
                                                  bool sequences_together = false) {
  const ModelConfig& c = fwd.model().config();
  const std::vector<int32_t> table = {9, 2, 14, 5, -1, -1, -1, -1, 0, 11, 7, -1, -1, -1, -1, -1};
  const bool recurrent = c.recurrent();
  const std::vector<int32_t> slots = {0, 1};
  std::vector<float> all;
  std::vector<int32_t> n_past = {0, 0};
  const auto pass = [&](const std::vector<int32_t>& ids, const std::vector<int32_t>& seq,
                        std::span<const StateCheckpointWrite> checkpoints,
                        std::span<const StateCopy> copies) {
    std::vector<int32_t> pos, want;
    for (size_t i = 0; i < ids.size(); ++i) {
      pos.push_back(n_past[size_t(seq[i])]++);
      want.push_back(int32_t(i));
    }
    std::vector<float> logits(ids.size() * size_t(c.n_vocab));
    ForwardBatch b{ids, pos, seq, table, kTwoSeqMaxBlocks, want};
    if (recurrent) {
      b.state_slots = slots;
      b.state_checkpoints = checkpoints;
      b.state_copies = copies;
    }
    const Status st = fwd.forward(b, cache, logits);
    EXPECT_TRUE(st.ok()) << st.message();
    all.insert(all.end(), logits.begin(), logits.end());
  };
  std::vector<int32_t> ids, seq;
  for (int32_t i = 0; i < 43; ++i) {
    ids.push_back(int32_t(1 + (i * 131) % (c.n_vocab - 1)));
    seq.push_back(i % 7 == 3 ? 1 : 0);  // B's 6 tokens scattered among A's 37
  }
  if (recurrent || sequences_together) std::stable_sort(seq.begin(), seq.end());  // A's 37, B's 6
  const StateCheckpointWrite a_at_20{0, 20, 2};
  pass(ids, seq, {&a_at_20, 1}, {});
  if (recurrent) {
    const StateCopy restore_a{2, 0};
    n_past[0] = 20;
    pass({int32_t(7), int32_t(11), int32_t(13)}, {0, 0, 1}, {}, {&restore_a, 1});
  }
  for (int32_t step = 0; step < 3 - int32_t(recurrent); ++step)
    pass({int32_t(5 + step * 17), int32_t(9 + step * 23)}, {0, 1}, {}, {});
  return all;
}

}  // namespace vela::test

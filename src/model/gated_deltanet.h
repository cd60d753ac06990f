#pragma once
// The Gated DeltaNet mixer (Qwen3.5's linear-attention layers) over a batch of sequences, each
// with its recurrent state in a state slot of the cache:
//   [q | k | v] = causal_conv(attn_qkv x) then SiLU   (conv_kernel taps; the last conv_kernel - 1
//                                                       inputs are carried in the state)
//   q, k L2-normalised per key head; beta = sigmoid(ssm_beta x);
//   g = softplus(ssm_alpha x + dt_bias) * a            (log-decay, a = -exp(A_log) < 0)
//   o = gated delta rule (gated_delta_rule.h), value head h reading key head key_head_of(h)
//   y = rms_norm(o per head) * ssm_norm * silu(attn_gate x)   (ssm_out y is the caller's: a
//                                                              tensor-parallel rank's y is its
//                                                              value heads' columns)
// A sequence whose first token in the batch is at position 0 starts from a zero state. A
// sequence's tokens go through the rule in pieces that end at every multiple of kDeltaChunk
// positions (and at its checkpoints, which the engine places at such multiples): pieces of at
// least kDeltaChunkMinTokens tokens in the chunked form, shorter ones (decode) by the recurrence.
// The pieces depend only on the sequence's own positions in the pass, so its output does not
// depend on what else the batch holds, nor on whether a checkpoint is saved.
// Thread-safety: one run at a time (it owns the work buffers); owned by one DecoderForward.
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/gated_delta_rule.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/projector.h"
#include "util/thread_pool.h"

namespace vela {

// A sequence's tokens in a batch: consecutive batch rows at consecutive positions, and the
// checkpoints of its state to save on the way.
struct SequenceSpan {
  int32_t first = 0;     // batch index of its first token
  int32_t n_tokens = 0;  //
  int32_t position = 0;  // position of its first token
  int32_t state_slot = 0;
  // checkpoints[first_checkpoint, + n_checkpoints) of run()'s, by position
  int32_t first_checkpoint = 0;
  int32_t n_checkpoints = 0;
};

// Runs this long or longer go through the chunked form of the delta rule.
inline constexpr int32_t kDeltaChunkMinTokens = 8;

class GatedDeltaNetMixer {
 public:
  // Buffers sized once for max_tokens tokens; n_threads: the pool's (one scratch each).
  GatedDeltaNetMixer(const ModelConfig& config, int32_t max_tokens, int32_t n_threads);

  // Returns y, [n_tokens, value_dim] in the mixer's buffer until the next run: token t's gated,
  // normed output, the input of ssm_out. Each span's state (state layer `state_layer` of its
  // slot) advances by its tokens.
  // xn: [n_tokens, n_embd]; spans cover the batch's tokens. Element-wise loops below min_work
  // multiply-adds stay on the calling thread.
  // checkpoints: the spans' states to save, each span's by position.
  const float* run(std::span<const SequenceSpan> spans,
                   std::span<const StateCheckpointWrite> checkpoints, KvCache& cache,
                   const DeltaNetWeights& w, int32_t state_layer, const float* xn, int64_t n_tokens,
                   Projector& projector, ThreadPool& pool, int64_t min_work);

 private:
  const ModelConfig& config_;
  DeltaNetConfig d_;
  std::vector<float> qkv_;   // [T, conv_channels] the projection, the convolution's input
  std::vector<float> conv_;  // [T, conv_channels] after convolution and SiLU; q, k normalised
  std::vector<float> z_;     // [T, value_dim] the gate; then the gated, normed output
  std::vector<float> beta_;  // [T, n_v_heads]
  std::vector<float> g_;     // [T, n_v_heads] alpha, then the log-decay
  std::vector<float> o_;     // [T, value_dim] the delta rule's output
  std::vector<DeltaChunkScratch> scratch_;  // [n_threads]
};

}  // namespace vela

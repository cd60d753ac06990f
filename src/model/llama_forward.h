#pragma once
// The Llama-family forward pass (llama, qwen2) over a batch of tokens from several sequences,
// reading and writing K/V through block tables in a paged KV cache.
// Thread-safety: one LlamaForward runs one pass at a time (it owns the pass's work buffers);
// use one per engine thread. The Model it reads is shared and immutable.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "util/result.h"

namespace vela {

struct ForwardOptions {
  int32_t max_batch_tokens = 512;  // most tokens one pass takes
  int32_t max_logits = 512;        // most rows of logits one pass returns
  int32_t max_context = 4096;      // longest sequence (positions < max_context)
};

class LlamaForward {
 public:
  LlamaForward(std::shared_ptr<const Model> model, const ForwardOptions& options);

  const Model& model() const { return *model_; }
  const ForwardOptions& options() const { return options_; }

  // Runs the batch, stores its K/V in `cache`, and writes the logits of the tokens named by
  // batch.logits_indices to `logits`: [n_logits, n_vocab]. Checks the batch (sizes, token ids,
  // positions, block ids) and returns an error instead of touching memory it should not.
  Status forward(const ForwardBatch& batch, KvCache& cache, std::span<float> logits);

 private:
  Status validate(const ForwardBatch& batch, const KvCache& cache, size_t logits_size) const;
  void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y);

  std::shared_ptr<const Model> model_;
  ForwardOptions options_;
  MatmulScratch scratch_;
  std::vector<float> rope_freqs_;  // [n_rot / 2]

  // Work buffers, sized once for max_batch_tokens (T).
  std::vector<float> x_;          // [T, n_embd] residual stream
  std::vector<float> xn_;         // [T, n_embd] normalised input of a sub-layer
  std::vector<float> q_;          // [T, n_head * head_dim]
  std::vector<float> k_;          // [T, n_head_kv * head_dim]
  std::vector<float> v_;          // [T, n_head_kv * head_dim]
  std::vector<float> attn_;       // [T, n_head * head_dim]
  std::vector<float> gate_;       // [T, n_ff]
  std::vector<float> up_;         // [T, n_ff]
  std::vector<float> proj_;       // [T, n_embd] output of attn_output / ffn_down
  std::vector<float> rope_cs_;    // [T, n_rot / 2, 2]
  std::vector<int64_t> slots_;    // [T] KV slot of each token
  std::vector<float> final_;      // [max_logits, n_embd] normalised rows that get logits
  AttentionScratch attn_scratch_;
};

}  // namespace vela

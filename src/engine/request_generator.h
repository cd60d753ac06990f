#pragma once
// Runs one request from prompt tokens to finish: prefill in chunks, then decode token by token,
// sampling, detokenizing as a stream and checking stop conditions. The serving engine (a later
// issue) replaces this one-request loop with continuous batching over the same forward pass.
// Thread-safety: not synchronised; the caller serialises use of the forward pass and KV cache.
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/kv_cache.h"
#include "model/llama_forward.h"
#include "tokenizer/tokenizer.h"
#include "vela/llm.h"

namespace vela {

class RequestGenerator {
 public:
  RequestGenerator(LlamaForward& forward, KvCache& cache, BlockAllocator& blocks, const Tokenizer& tokenizer);

  // Generates for one request; each emitted delta goes to on_delta (may be empty).
  Result<CompletionOutput> run(size_t request_index, std::span<const int32_t> prompt,
                               const SamplingParams& params, const StreamCallback& on_delta,
                               RequestMetrics& metrics);

 private:
  Status ensure_blocks(int32_t n_tokens);
  Status forward(std::span<const int32_t> tokens, int32_t first_position);

  LlamaForward& forward_;
  KvCache& cache_;
  BlockAllocator& blocks_;
  const Tokenizer& tokenizer_;
  int32_t n_vocab_;
  std::vector<int32_t> block_table_;  // [max_blocks_per_seq], -1 padded
  std::vector<int32_t> owned_blocks_;
  std::vector<int32_t> positions_;    // [max_batch_tokens]
  std::vector<int32_t> seq_index_;    // [max_batch_tokens], all 0 (one sequence)
  std::vector<float> logits_;         // [n_vocab]
};

}  // namespace vela

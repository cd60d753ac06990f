#pragma once
// Builds an Engine from a model file and user-facing options: loads the model and tokenizer,
// picks the context length, and turns a KV memory budget (bytes, or a fraction of the memory
// available now) into a number of blocks. Shared by the LLM API, `vela serve` and the benchmarks.
// Free functions; no shared state.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"

namespace vela {

struct EngineOptions {
  std::string model_path;
  int32_t n_threads = 0;    // 0 = physical cores
  int32_t max_context = 0;  // 0 = the model's, capped at 4096
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  std::string kv_cache_type = "f16";
  // KV token slots per block, in [1, 1024]. 8 rather than 16: half the waste in each sequence's
  // last block (vela bench throughput: 1.4% vs 4.2% at the peak) at the same speed on CPU.
  int32_t block_size = 8;
  std::optional<uint64_t> kv_cache_bytes;   // explicit KV budget (exclusive with the fraction)
  std::optional<double> kv_cache_fraction;  // of MemAvailable, in (0, 1]
  bool enable_prefix_caching = true;
  double priority_aging_per_second = 0.1;
  // Step time to keep under while decodes run, by holding prefill tokens back (0 = no target:
  // prefill takes the whole token budget, best for offline throughput); raised to
  // target_itl_ratio x the decodes' own step time when that is longer (0 = a fixed target).
  double target_itl_ms = 0;
  double target_itl_ratio = 0;
  int32_t min_prefill_tokens = kDefaultMinPrefillTokens;  // per step under the target
  // Speculative decoding: "none", "ngram" (prompt lookup), "draft", "mtp" (the model's
  // multi-token-prediction block) or "auto" (mtp where the file has the block, else ngram); K
  // proposals per step at most; the lookup's suffix lengths; adaptive = speculate only where it
  // is predicted to pay.
  std::string speculative_method = "none";
  // A draft model (GGUF with the same vocabulary); given alone it selects method "draft".
  std::string draft_model_path;
  int32_t num_speculative_tokens = 4;
  int32_t prompt_lookup_min = 1;
  int32_t prompt_lookup_max = 4;
  bool speculative_adaptive = true;
  // An MTP block's proposals come from the first N token ids only (0 = all): its output head
  // shrinks to N rows (SpeculativeConfig::draft_vocab).
  int64_t speculative_draft_vocab = 0;
  // Ranks each pipeline stage's layers are split over, and stages of contiguous layers
  // (tensor_shard.h): tensor_parallel_size * pipeline_parallel_size MPI processes of `mpirun
  // -np N` or spawned by this one, which is world rank 0 (the others run
  // dist::serve_as_worker).
  int32_t tensor_parallel_size = 1;
  int32_t pipeline_parallel_size = 1;
  // A mixture of experts' routed experts: "mapped" (left in the file mapping, paged in on use),
  // "repacked" (into owned memory, faster) or "auto": mapped only when the model plus the KV
  // cache would not fit in memory (expert_placement.h). Tensor-parallel workers repack theirs.
  std::string moe_experts = "auto";
};

// Share of MemAvailable the KV cache takes by default when max_num_seqs full contexts would
// need more.
inline constexpr double kDefaultKvMemoryFraction = 0.25;

struct KvBudgetInput {
  uint64_t bytes_per_block = 0;
  int32_t max_num_seqs = 1;
  int32_t max_context = 1;
  int32_t block_size = 16;
  // Blocks one sequence of max_context tokens holds (windowed layer groups hold fewer than one
  // per block_size tokens); 0: one per block_size tokens.
  int64_t blocks_per_seq = 0;
  std::optional<uint64_t> kv_cache_bytes;
  std::optional<double> kv_cache_fraction;
  std::optional<uint64_t> mem_available;  // bytes; unknown on some systems
};

// KV blocks to allocate: the byte budget (or fraction x MemAvailable) / bytes_per_block; by
// default the full demand (max_num_seqs x blocks per context) capped at
// kDefaultKvMemoryFraction of MemAvailable. Errors when the budget holds no block.
Result<int32_t> kv_block_budget(const KvBudgetInput& in);

// MemAvailable from /proc/meminfo, if readable.
std::optional<uint64_t> mem_available_bytes();

Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& options);

}  // namespace vela

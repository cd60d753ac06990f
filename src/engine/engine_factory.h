#pragma once
// Builds an Engine from a model file and user-facing options: loads the model and tokenizer,
// picks the context length, and turns a KV memory budget (bytes, or a fraction of the memory
// available now) into a number of blocks. Shared by the LLM API, `vela serve` and the benchmarks.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace vela {

struct EngineOptions {
  std::string model_path;
  int32_t n_threads = 0;                  // 0 = physical cores
  int32_t max_context = 0;                // 0 = the model's, capped at 4096
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  std::string kv_cache_type = "f16";
  int64_t kv_cache_bytes = 0;             // explicit KV budget; 0 = use the fraction below
  double kv_cache_fraction = 0;           // of MemAvailable; 0 = enough for max_num_seqs x max_context,
                                          // capped at half the available memory
  bool enable_prefix_caching = true;
  double priority_aging_per_second = 0.1;
};

// Bytes of memory the kernel reports as available (MemAvailable), or 0 if unknown.
int64_t available_memory_bytes();

Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& options);

}  // namespace vela

#pragma once
// Builds what `vela serve` runs: Model::load + Tokenizer::from_gguf + Engine (KV budget in
// blocks from a byte budget or a fraction of available memory) wrapped in an AsyncEngine, plus
// the chat template (a file, or the model's tokenizer.chat_template).
// Free functions; no shared state.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/server_context.h"
#include "util/result.h"

namespace vela::server {

struct EngineSetupOptions {
  std::string model_path;
  int32_t n_threads = 0;  // 0 = physical cores
  int32_t ctx_size = 0;   // 0 = the model's training context, at most 4096
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  std::optional<uint64_t> kv_cache_bytes;   // exclusive with kv_cache_fraction
  std::optional<double> kv_cache_fraction;  // of MemAvailable, in (0, 1]
  std::string kv_type = "f16";
  int32_t block_size = 8;  // KV token slots per block (EngineOptions::block_size)
  bool prefix_caching = true;
  double max_wait_ms = 0;
  int32_t max_queued_requests = 0;  // 0 = no bound
  std::string chat_template_path;   // overrides the model's template
};

// Loads everything; `log` receives human-readable lines for stderr. Errors are fatal for the
// server (bad model file, bad option, unreadable template file).
Result<std::shared_ptr<LoadedModel>> load_model_for_serving(const EngineSetupOptions& options,
                                                            std::string& log);

}  // namespace vela::server

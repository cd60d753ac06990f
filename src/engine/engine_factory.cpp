#include "engine/engine_factory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace vela {

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kb) == 1) return int64_t(kb) * 1024;
  }
  return 0;
}

Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& o) {
  if (o.max_num_seqs <= 0 || o.max_num_seqs > 4096) return make_error("max_num_seqs must be in [1, 4096]");
  if (o.max_num_batched_tokens <= 0 || o.max_num_batched_tokens > 65536)
    return make_error("max_num_batched_tokens must be in [1, 65536]");
  if (o.max_context < 0) return make_error("the context length must not be negative");
  if (o.kv_cache_bytes < 0) return make_error("the KV cache budget must not be negative");
  if (!(o.kv_cache_fraction >= 0 && o.kv_cache_fraction <= 0.95))
    return make_error("the KV cache memory fraction must be in [0, 0.95]");
  if (o.n_threads < 0 || o.n_threads > 1024) return make_error("threads must be in [0, 1024]");
  auto kv_type = parse_kv_type(o.kv_cache_type);
  if (!kv_type) return kv_type.error();
  auto model = Model::load(o.model_path);
  if (!model) return model.error();
  auto tokenizer = Tokenizer::from_gguf((*model)->gguf());
  if (!tokenizer) return make_error("'" + o.model_path + "': " + tokenizer.message());
  const ModelConfig& mc = (*model)->config();
  if (tokenizer->n_vocab() != mc.n_vocab)
    return make_error("'" + o.model_path + "': tokenizer and model disagree on the vocabulary size");

  EngineConfig c;
  c.max_context = o.max_context > 0 ? o.max_context : std::min(mc.n_ctx_train, 4096);
  c.block_size = 16;
  c.kv_type = *kv_type;
  c.enable_prefix_caching = o.enable_prefix_caching;
  c.n_threads = o.n_threads;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens = std::min(o.max_num_batched_tokens, std::max(c.max_context, 1));
  c.scheduler.priority_aging_per_second = o.priority_aging_per_second;

  const KvCacheConfig probe{mc.n_layer, mc.n_head_kv, mc.head_dim, c.block_size, 1, c.kv_type};
  const int64_t block_bytes = int64_t(KvCache::bytes_per_block(probe));
  const int64_t blocks_per_seq = (c.max_context + c.block_size - 1) / c.block_size;
  const int64_t available = available_memory_bytes();
  int64_t budget;
  if (o.kv_cache_bytes > 0) budget = o.kv_cache_bytes;
  else if (o.kv_cache_fraction > 0) budget = int64_t(double(available) * o.kv_cache_fraction);
  else {
    budget = int64_t(o.max_num_seqs) * blocks_per_seq * block_bytes;
    if (available > 0) budget = std::min(budget, available / 2);
  }
  const int64_t n_blocks = std::min<int64_t>(budget / block_bytes, int64_t(1) << 24);
  if (n_blocks < 1)
    return make_error("the KV cache budget of " + std::to_string(budget) + " bytes holds no block (one block is " +
                      std::to_string(block_bytes) + " bytes)");
  c.n_blocks = static_cast<int32_t>(n_blocks);
  return std::make_unique<Engine>(std::move(*model), std::move(*tokenizer), c);
}

}  // namespace vela

#pragma once
// Paged key/value storage for every layer. Token slots are grouped in fixed-size blocks; a
// sequence owns a list of blocks (its block table) and its token at position p lives in slot
// block_table[p / block_size] * block_size + p % block_size. Which blocks belong to whom is the
// business of the block allocator and, later, the cache manager; this class only stores.
// Thread-safety: not synchronised. A forward pass writes the slots of its batch; callers must not
// run two passes that write the same slots concurrently.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace vela {

enum class KvType { kF32, kF16 };

Result<KvType> parse_kv_type(std::string_view name);  // "f32" | "f16"
std::string_view kv_type_name(KvType type);

struct KvCacheConfig {
  int32_t n_layer = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // token slots per block
  int32_t n_blocks = 0;
  KvType type = KvType::kF16;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int64_t n_slots() const { return int64_t(config_.n_blocks) * config_.block_size; }
  int64_t row_elems() const { return int64_t(config_.n_head_kv) * config_.head_dim; }
  size_t bytes() const { return storage_.size(); }
  static size_t bytes_per_block(const KvCacheConfig& config);

  // K or V row of one slot: [n_head_kv, head_dim] elements of config().type.
  void* k_row(int32_t layer, int64_t slot) { return storage_.data() + offset(layer, slot, 0); }
  void* v_row(int32_t layer, int64_t slot) { return storage_.data() + offset(layer, slot, 1); }
  const void* k_row(int32_t layer, int64_t slot) const { return storage_.data() + offset(layer, slot, 0); }
  const void* v_row(int32_t layer, int64_t slot) const { return storage_.data() + offset(layer, slot, 1); }

  // Stores one token's K and V ([n_head_kv * head_dim] f32 each) in a slot, converting to the type.
  void write(int32_t layer, int64_t slot, const float* k, const float* v);

 private:
  size_t offset(int32_t layer, int64_t slot, int kv) const {
    return ((size_t(layer) * 2 + size_t(kv)) * size_t(n_slots()) + size_t(slot)) * row_bytes_;
  }

  KvCacheConfig config_;
  size_t row_bytes_ = 0;
  // [n_layer][K|V][n_slots][n_head_kv * head_dim]
  std::vector<uint8_t> storage_;
};

}  // namespace vela

#include "kv/kv_cache.h"

#include <cstring>

#include "util/half.h"

namespace vela {

Result<KvType> parse_kv_type(std::string_view name) {
  if (name == "f32") return KvType::kF32;
  if (name == "f16") return KvType::kF16;
  return make_error("unknown KV cache type '" + std::string(name) + "' (supported: f32, f16)");
}

std::string_view kv_type_name(KvType type) { return type == KvType::kF32 ? "f32" : "f16"; }

static size_t elem_bytes(KvType type) { return type == KvType::kF32 ? 4 : 2; }

size_t KvCache::bytes_per_block(const KvCacheConfig& c) {
  return size_t(c.n_layer) * 2 * size_t(c.block_size) * size_t(c.n_head_kv) * size_t(c.head_dim) *
         elem_bytes(c.type);
}

KvCache::KvCache(const KvCacheConfig& config)
    : config_(config),
      row_bytes_(size_t(config.n_head_kv) * size_t(config.head_dim) * elem_bytes(config.type)),
      storage_(bytes_per_block(config) * size_t(config.n_blocks)) {}

void KvCache::write(int32_t layer, int64_t slot, const float* k, const float* v) {
  const int64_t n = row_elems();
  if (config_.type == KvType::kF32) {
    std::memcpy(k_row(layer, slot), k, size_t(n) * 4);
    std::memcpy(v_row(layer, slot), v, size_t(n) * 4);
    return;
  }
  auto* kd = static_cast<uint16_t*>(k_row(layer, slot));
  auto* vd = static_cast<uint16_t*>(v_row(layer, slot));
  for (int64_t i = 0; i < n; ++i) {
    kd[i] = fp32_to_fp16(k[i]);
    vd[i] = fp32_to_fp16(v[i]);
  }
}

}  // namespace vela

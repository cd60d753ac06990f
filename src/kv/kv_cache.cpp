#include "kv/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include "util/half.h"

namespace vela {

Result<KvType> parse_kv_type(std::string_view name) {
  if (name == "f32") return KvType::kF32;
  if (name == "f16") return KvType::kF16;
  if (name == "bf16") return KvType::kBF16;
  if (name == "q8_0") return KvType::kQ8_0;
  return make_error("unknown KV cache type '" + std::string(name) +
                    "' (supported: f16, bf16, q8_0, f32)");
}

std::string_view kv_type_name(KvType type) {
  switch (type) {
    case KvType::kF32:
      return "f32";
    case KvType::kF16:
      return "f16";
    case KvType::kBF16:
      return "bf16";
    case KvType::kQ8_0:
      return "q8_0";
  }
  return "?";
}

size_t kv_head_row_bytes(KvType type, int32_t head_dim) {
  const size_t n = size_t(head_dim);
  switch (type) {
    case KvType::kF32:
      return n * 4;
    case KvType::kF16:
    case KvType::kBF16:
      return n * 2;
    case KvType::kQ8_0: {
      // Whole blocks, then a shorter block (scale + the remaining values) when head_dim % 32 != 0.
      const size_t rem = n % kKvQ8Block;
      return n / kKvQ8Block * sizeof(KvQ8Block) + (rem ? sizeof(uint16_t) + rem : 0);
    }
  }
  return 0;
}

namespace {

// One Q8_0 block of n <= 32 values: the scale maps the largest magnitude to 127 and values round
// to nearest (ties away from zero), as the GGUF Q8_0 reference quantizer does.
void encode_q8_block(const float* x, int32_t n, uint8_t* out) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t d16 = fp32_to_fp16(d);
  std::memcpy(out, &d16, sizeof d16);
  auto* q = reinterpret_cast<int8_t*>(out + sizeof d16);
  for (int32_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::round(x[i] * id));
}

void decode_q8_block(const uint8_t* in, int32_t n, float* out) {
  uint16_t d16;
  std::memcpy(&d16, in, sizeof d16);
  const float d = fp16_to_fp32(d16);
  const auto* q = reinterpret_cast<const int8_t*>(in + sizeof d16);
  for (int32_t i = 0; i < n; ++i) out[i] = float(q[i]) * d;
}

}  // namespace

void kv_encode_head_row(KvType type, const float* x, int32_t head_dim, void* out) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(out, x, size_t(head_dim) * 4);
      return;
    case KvType::kF16: {
      auto* o = static_cast<uint16_t*>(out);
      for (int32_t i = 0; i < head_dim; ++i) o[i] = fp32_to_fp16(x[i]);
      return;
    }
    case KvType::kBF16: {
      auto* o = static_cast<uint16_t*>(out);
      for (int32_t i = 0; i < head_dim; ++i) o[i] = fp32_to_bf16(x[i]);
      return;
    }
    case KvType::kQ8_0: {
      auto* o = static_cast<uint8_t*>(out);
      for (int32_t i = 0; i < head_dim; i += kKvQ8Block, o += sizeof(KvQ8Block))
        encode_q8_block(x + i, std::min(kKvQ8Block, head_dim - i), o);
      return;
    }
  }
}

void kv_decode_head_row(KvType type, const void* row, int32_t head_dim, float* out) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(out, row, size_t(head_dim) * 4);
      return;
    case KvType::kF16: {
      const auto* r = static_cast<const uint16_t*>(row);
      for (int32_t i = 0; i < head_dim; ++i) out[i] = fp16_to_fp32(r[i]);
      return;
    }
    case KvType::kBF16: {
      const auto* r = static_cast<const uint16_t*>(row);
      for (int32_t i = 0; i < head_dim; ++i) out[i] = bf16_to_fp32(r[i]);
      return;
    }
    case KvType::kQ8_0: {
      const auto* r = static_cast<const uint8_t*>(row);
      for (int32_t i = 0; i < head_dim; i += kKvQ8Block, r += sizeof(KvQ8Block))
        decode_q8_block(r, std::min(kKvQ8Block, head_dim - i), out + i);
      return;
    }
  }
}

size_t KvCacheConfig::row_bytes(int32_t layer) const {
  const KvRowShape s = layer_shape(layer);
  return size_t(s.n_head_kv) * kv_head_row_bytes(type, s.head_dim);
}

namespace {

// Bytes each group's layers take in a block: [n_groups].
std::vector<size_t> group_bytes(const KvCacheConfig& c) {
  std::vector<size_t> bytes(size_t(c.n_groups()), 0);
  const size_t planes = c.k_only ? 1 : 2;
  for (int32_t l = 0; l < c.n_layer; ++l)
    bytes[size_t(c.group_of(l))] += planes * size_t(c.block_size) * c.row_bytes(l);
  return bytes;
}

}  // namespace

size_t KvCache::bytes_per_block(const KvCacheConfig& c) {
  const std::vector<size_t> bytes = group_bytes(c);
  return *std::max_element(bytes.begin(), bytes.end());
}

size_t KvCache::bytes_per_state_slot(const KvCacheConfig& c) {
  return size_t(c.n_state_layers) * size_t(c.state_floats) * sizeof(float);
}

KvCache::KvCache(const KvCacheConfig& config)
    : config_(config),
      places_(size_t(config.n_layer)),
      block_bytes_(bytes_per_block(config)),
      storage_(block_bytes_ * size_t(config.n_blocks)),
      state_(size_t(config.n_state_slots) * size_t(config.n_state_layers) *
             size_t(config.state_floats)) {
  assert(config.layer_group.empty() || config.layer_group.size() == size_t(config.n_layer));
  assert(config.layer_shapes.empty() || config.layer_shapes.size() == size_t(config.n_layer));
  if (std::has_single_bit(uint32_t(config.block_size)))
    block_shift_ = std::countr_zero(uint32_t(config.block_size));
  // Each group's layers in layer order, from the start of the block.
  std::vector<size_t> filled(size_t(config.n_groups()), 0);
  for (int32_t l = 0; l < config.n_layer; ++l) {
    LayerPlace& p = places_[size_t(l)];
    size_t& at = filled[size_t(config.group_of(l))];
    p.row_bytes = config.row_bytes(l);
    p.k_offset = at;
    at += size_t(config.block_size) * p.row_bytes;
    p.v_offset = p.k_offset;
    if (!config.k_only) {
      p.v_offset = at;
      at += size_t(config.block_size) * p.row_bytes;
    }
  }
}

void KvCache::write(int32_t layer, int64_t slot, const float* k, const float* v) {
  auto* kd = static_cast<uint8_t*>(k_row(layer, slot));
  auto* vd = static_cast<uint8_t*>(v_row(layer, slot));
  const KvRowShape shape = config_.layer_shape(layer);
  const int32_t hd = shape.head_dim;
  const size_t head_bytes = kv_head_row_bytes(config_.type, hd);
  for (int32_t h = 0; h < shape.n_head_kv; ++h) {
    kv_encode_head_row(config_.type, k + int64_t(h) * hd, hd, kd + size_t(h) * head_bytes);
    if (!config_.k_only)
      kv_encode_head_row(config_.type, v + int64_t(h) * hd, hd, vd + size_t(h) * head_bytes);
  }
}

void KvCache::read(int32_t layer, int64_t slot, float* k, float* v) const {
  const KvRowShape shape = config_.layer_shape(layer);
  const int32_t hd = shape.head_dim;
  const size_t head_bytes = kv_head_row_bytes(config_.type, hd);
  const auto* kd = static_cast<const uint8_t*>(k_row(layer, slot));
  const auto* vd = static_cast<const uint8_t*>(v_row(layer, slot));
  for (int32_t h = 0; h < shape.n_head_kv; ++h) {
    kv_decode_head_row(config_.type, kd + size_t(h) * head_bytes, hd, k + int64_t(h) * hd);
    if (!config_.k_only)
      kv_decode_head_row(config_.type, vd + size_t(h) * head_bytes, hd, v + int64_t(h) * hd);
  }
}

}  // namespace vela

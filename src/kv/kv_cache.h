#pragma once
// Paged key/value storage for every attention layer, and the recurrent state of the layers that
// keep one per sequence instead (Gated DeltaNet). Token slots are grouped in fixed-size blocks; a
// sequence owns a list of blocks (its block table) and its token at position p lives in slot
// block_table[p / block_size] * block_size + p % block_size. Which blocks belong to whom is the
// business of the block allocator and the cache manager; this class only stores. Recurrent state
// lives in state slots, one per running sequence (StateSlotPool hands them out): a fixed number of
// f32 values per state layer, whatever the sequence's length.
//
// Element types: f32, f16 (default), bf16, and q8_0 — per KV head row, int8 blocks of 32 values
// with one f16 scale each (the GGUF Q8_0 block; a head_dim that is not a multiple of 32 ends in a
// shorter block), about half the bytes of f16.
//
// Thread-safety: not synchronised. Writes to different slots may run concurrently (a forward pass
// writes its batch's slots from several threads); callers must not write a slot while another
// thread reads or writes it.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "util/result.h"
#include "util/zeroed_pages.h"

namespace vela {

enum class KvType { kF32, kF16, kBF16, kQ8_0 };

Result<KvType> parse_kv_type(std::string_view name);  // "f32" | "f16" | "bf16" | "q8_0"
std::string_view kv_type_name(KvType type);

// Q8_0 block of the KV cache: value i of the block = q[i] * d.
constexpr int32_t kKvQ8Block = 32;
struct KvQ8Block {
  uint16_t d;  // f16 scale
  int8_t q[kKvQ8Block];
};
static_assert(sizeof(KvQ8Block) == 34, "same layout as GGUF Q8_0");

// Bytes one KV head's row of head_dim values takes in `type`.
size_t kv_head_row_bytes(KvType type, int32_t head_dim);

// One head row ([head_dim] values) to or from its stored form (kv_head_row_bytes bytes).
void kv_encode_head_row(KvType type, const float* x, int32_t head_dim, void* out);
void kv_decode_head_row(KvType type, const void* row, int32_t head_dim, float* out);

// The head geometry of one layer's K or V row: n_head_kv head rows of head_dim values.
struct KvRowShape {
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  bool operator==(const KvRowShape&) const = default;
};

struct KvCacheConfig {
  // Layers with K/V: the cache's layer ids 0..n_layer-1 (a model's LayerConfig::kv_index).
  int32_t n_layer = 0;
  // The row geometry of every layer that layer_shapes gives no other.
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // token slots per block
  int32_t n_blocks = 0;
  KvType type = KvType::kF16;
  // Recurrent state: n_state_slots slots of state_floats f32 values for each of n_state_layers.
  int32_t n_state_layers = 0;
  int64_t state_floats = 0;
  int32_t n_state_slots = 0;
  // K rows only, no V (multi-head latent attention: a token's compressed row serves as key, and
  // its leading values as the value); half the bytes of a K/V cache of the same rows.
  bool k_only = false;
  // Layer groups of one attention spec each (vLLM's hybrid cache layout): the sliding window of
  // each group's layers (0: global attention). A sequence has a block table per group, and a
  // windowed group's blocks that slid out of the window go back to the pool. Empty: one group
  // that keeps every position.
  std::vector<int32_t> group_windows;
  // [n_layer] each layer's group, or empty: every layer in group 0. A block belongs to one group
  // at a time and holds block_size positions of each of that group's layers, so a block is as
  // large as the largest group's layers need (the grouping keeps the groups' sizes even).
  std::vector<int32_t> layer_group;
  // [n_layer] each layer's row geometry, or empty: n_head_kv x head_dim for every layer (gemma4's
  // sliding layers have more, smaller heads than its full ones).
  std::vector<KvRowShape> layer_shapes;
  int32_t n_groups() const { return group_windows.empty() ? 1 : int32_t(group_windows.size()); }
  int32_t group_of(int32_t layer) const {
    return layer_group.empty() ? 0 : layer_group[size_t(layer)];
  }
  KvRowShape layer_shape(int32_t layer) const {
    return layer_shapes.empty() ? KvRowShape{n_head_kv, head_dim} : layer_shapes[size_t(layer)];
  }
  // Bytes of one layer's K or V row.
  size_t row_bytes(int32_t layer) const;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int64_t n_slots() const { return int64_t(config_.n_blocks) * config_.block_size; }
  size_t bytes() const { return storage_.size() + state_.size() * sizeof(float); }
  // Bytes of one block: K/V of block_size positions of the largest group's layers.
  static size_t bytes_per_block(const KvCacheConfig& config);
  // Bytes of one sequence's recurrent state over every state layer (0 without such layers).
  static size_t bytes_per_state_slot(const KvCacheConfig& config);

  // One state layer's recurrent state in one slot: [state_floats] f32.
  float* state(int32_t state_layer, int32_t slot) {
    return state_.data() + (size_t(slot) * size_t(config_.n_state_layers) + size_t(state_layer)) *
                               size_t(config_.state_floats);
  }

  // Maps a state slot's pages ahead of the pass that first writes them (ZeroedPages::populate).
  void populate_state_slot(int32_t slot) {
    const size_t per_slot = size_t(config_.n_state_layers) * size_t(config_.state_floats);
    state_.populate(size_t(slot) * per_slot, per_slot);
  }

  // K or V row of one slot for one layer: the layer's n_head_kv head rows of
  // kv_head_row_bytes(type, head_dim) each (for f32/f16/bf16 simply [n_head_kv, head_dim]
  // elements). A K-only cache's V row is its K row, whose leading values a caller reads as the
  // value. Rows of one block and layer are contiguous, slot after slot.
  void* k_row(int32_t layer, int64_t slot) { return storage_.data() + offset(layer, slot, 0); }
  void* v_row(int32_t layer, int64_t slot) { return storage_.data() + offset(layer, slot, 1); }
  const void* k_row(int32_t layer, int64_t slot) const {
    return storage_.data() + offset(layer, slot, 0);
  }
  const void* v_row(int32_t layer, int64_t slot) const {
    return storage_.data() + offset(layer, slot, 1);
  }

  // Stores one token's K and V (the layer's [n_head_kv * head_dim] f32 each) in a slot,
  // converting to the type (a K-only cache stores k alone; v may be null).
  void write(int32_t layer, int64_t slot, const float* k, const float* v);
  // Reads back one slot's K and V as f32 (the layer's [n_head_kv * head_dim] each), e.g. for
  // tests (a K-only cache reads k alone; v may be null).
  void read(int32_t layer, int64_t slot, float* k, float* v) const;

 private:
  // Where a layer's rows sit within each block of its group.
  struct LayerPlace {
    size_t k_offset = 0;  // of the block's first K row
    size_t v_offset = 0;  // of its first V row (k_offset for a K-only cache)
    size_t row_bytes = 0;
  };
  size_t offset(int32_t layer, int64_t slot, int kv) const {
    const LayerPlace& p = places_[size_t(layer)];
    const size_t block = block_shift_ >= 0 ? size_t(slot) >> block_shift_
                                           : size_t(slot) / size_t(config_.block_size);
    const size_t in_block = size_t(slot) - block * size_t(config_.block_size);
    return block * block_bytes_ + (kv == 0 ? p.k_offset : p.v_offset) + in_block * p.row_bytes;
  }

  KvCacheConfig config_;
  std::vector<LayerPlace> places_;  // [n_layer]
  size_t block_bytes_ = 0;
  int block_shift_ = -1;  // log2(block_size) when a power of two
  // [n_blocks][each layer of the block's group: K rows of the block's slots, then V rows]
  // Both take memory only where written (blocks and state slots are handed out lowest id first).
  ZeroedPages<uint8_t> storage_;
  ZeroedPages<float> state_;  // [n_state_slots][n_state_layers][state_floats]
};

}  // namespace vela

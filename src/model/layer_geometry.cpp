#include "model/layer_geometry.h"

#include <algorithm>
#include <vector>

namespace vela {
namespace {

std::string str(int64_t x) {
  return std::to_string(x);
}

// The entries of an array key of one integer per layer, each within [lo, hi]; empty when the
// key is absent or a single value.
Result<std::vector<int32_t>> layer_array(const GgufFile& g, const std::string& key, int32_t n_layer,
                                         int64_t lo, int64_t hi) {
  auto array = g.get_array(key);
  if (!array || !array->has_value()) return std::vector<int32_t>{};
  const GgufArray& items = ***array;
  if (items.items.size() != size_t(n_layer))
    return make_error("metadata '" + key + "' has " + str(int64_t(items.items.size())) +
                      " entries for " + str(n_layer) + " layers");
  std::vector<int32_t> out;
  for (const GgufValue& v : items.items) {
    if (v.is_float() || v.type == GgufValueType::STRING || v.type == GgufValueType::ARRAY)
      return make_error("metadata '" + key + "' holds a non-integer entry");
    if (v.i64 < lo || v.i64 > hi)
      return make_error("metadata '" + key + "' has entry " + str(v.i64) + " out of range [" +
                        str(lo) + ", " + str(hi) + "]");
    out.push_back(int32_t(v.i64));
  }
  return out;
}

// A single integer key within [lo, hi] into out (unchanged when absent).
Status read_single(const GgufFile& g, const std::string& key, int32_t& out, int64_t lo,
                   int64_t hi) {
  auto v = g.get_int(key);
  if (!v) return v.error();
  if (!v->has_value()) return {};
  if (**v < lo || **v > hi)
    return make_error("metadata '" + key + "' = " + str(**v) + " is out of range [" + str(lo) +
                      ", " + str(hi) + "]");
  out = int32_t(**v);
  return {};
}

#define VELA_TRY(expr)                                 \
  do {                                                 \
    if (Status st_ = (expr); !st_) return st_.error(); \
  } while (0)

// The windowed layers' head size and rotated part: key_length_swa / value_length_swa /
// rope.dimension_count_swa, else the model's.
Status read_window_heads(const GgufFile& g, const std::string& a, const ModelConfig& c,
                         int32_t& head_dim, int32_t& n_rot) {
  head_dim = c.head_dim;
  VELA_TRY(read_single(g, a + "attention.key_length_swa", head_dim, 2, 1 << 12));
  int32_t value_length = head_dim;
  VELA_TRY(read_single(g, a + "attention.value_length_swa", value_length, 1, 1 << 12));
  if (value_length != head_dim)
    return make_error("metadata '" + a + "attention.value_length_swa' = " + str(value_length) +
                      " differs from key_length_swa " + str(head_dim) + " (not supported)");
  if (head_dim % 2 != 0)
    return make_error("metadata '" + a + "attention.key_length_swa' = " + str(head_dim) +
                      " must be even");
  n_rot = std::min(c.n_rot, head_dim);
  VELA_TRY(read_single(g, a + "rope.dimension_count_swa", n_rot, 2, head_dim));
  if (n_rot % 2 != 0) return make_error("rope.dimension_count_swa must be even");
  return {};
}

// Layers at or past n_layer - n_shared attend over the last earlier layer of their kind
// (windowed or global) that has K/V; the rest keep their own, renumbered in layer order.
Status assign_kv_sources(ModelConfig& c) {
  const int32_t first_shared = c.n_layer - c.n_shared_kv_layers;
  for (int32_t i = 0; i < c.n_layer; ++i) {
    LayerConfig& l = c.layers[size_t(i)];
    l.kv_source = l.kv_index >= 0 ? i : -1;
    if (i < first_shared || l.kv_index < 0) continue;
    const bool windowed = l.sliding_window > 0;
    int32_t source = -1;
    for (int32_t j = first_shared - 1; j >= 0 && source < 0; --j) {
      const LayerConfig& s = c.layers[size_t(j)];
      if (s.kv_index >= 0 && (s.sliding_window > 0) == windowed) source = j;
    }
    if (source < 0)
      return make_error("layer " + str(i) + " shares the KV cache (attention.shared_kv_layers " +
                        str(c.n_shared_kv_layers) + "), but no earlier layer of its kind (" +
                        (windowed ? "sliding-window" : "global") + ") keeps one");
    const LayerConfig& s = c.layers[size_t(source)];
    if (s.n_head_kv != l.n_head_kv || s.head_dim != l.head_dim)
      return make_error("layer " + str(i) + " reads layer " + str(source) +
                        "'s KV cache, whose KV heads (" + str(s.n_head_kv) + " of " +
                        str(s.head_dim) + ") differ from its own (" + str(l.n_head_kv) + " of " +
                        str(l.head_dim) + ")");
    l.kv_source = source;
    l.kv_index = -1;
  }
  c.n_kv_layers = 0;
  for (LayerConfig& l : c.layers)
    if (l.kv_index >= 0) l.kv_index = c.n_kv_layers++;
  return {};
}

}  // namespace

Status read_int_or_layer_max(const GgufFile& g, const std::string& key, int32_t& out, bool required,
                             int64_t lo, int64_t hi, int32_t n_layer) {
  auto entries = layer_array(g, key, n_layer, lo, hi);
  if (!entries) return entries.error();
  if (!entries->empty()) {
    out = *std::max_element(entries->begin(), entries->end());
    return {};
  }
  if (required && g.find(key) == nullptr) return make_error("missing metadata '" + key + "'");
  return read_single(g, key, out, lo, hi);
}

Status read_layer_geometry(const GgufFile& g, const std::string& a, ModelConfig& c) {
  auto kv_heads = layer_array(g, a + "attention.head_count_kv", c.n_layer, 1, 1024);
  if (!kv_heads) return kv_heads.error();
  auto ff = layer_array(g, a + "feed_forward_length", c.n_layer, 1, 1 << 20);
  if (!ff) return ff.error();
  int32_t window_head_dim = c.head_dim, window_n_rot = c.n_rot;
  if (!c.latent_attention()) VELA_TRY(read_window_heads(g, a, c, window_head_dim, window_n_rot));
  c.n_rot_local = c.separate_local_rope ? window_n_rot : c.n_rot;
  for (int32_t i = 0; i < c.n_layer; ++i) {
    LayerConfig& l = c.layers[size_t(i)];
    const bool windowed = l.sliding_window > 0;
    l.n_head_kv = kv_heads->empty() ? c.n_head_kv : (*kv_heads)[size_t(i)];
    l.n_ff = ff->empty() ? c.n_ff : (*ff)[size_t(i)];
    l.head_dim = windowed ? window_head_dim : c.head_dim;
    l.n_rot = windowed ? window_n_rot : c.n_rot;
    if (c.n_head % l.n_head_kv != 0)
      return make_error("attention.head_count " + str(c.n_head) + " is not a multiple of layer " +
                        str(i) + "'s head_count_kv " + str(l.n_head_kv));
    // A windowed layer on the global RoPE tables rotates the global layers' dimensions.
    if (windowed && !l.local_rope && l.n_rot != c.n_rot)
      return make_error("metadata '" + a + "rope.dimension_count_swa' = " + str(l.n_rot) +
                        " differs from rope.dimension_count " + str(c.n_rot) +
                        " without a separate RoPE base for the windowed layers");
  }
  VELA_TRY(
      read_single(g, a + "attention.shared_kv_layers", c.n_shared_kv_layers, 0, c.n_layer - 1));
  VELA_TRY(read_single(g, a + "embedding_length_per_layer_input", c.n_embd_per_layer, 0, 1 << 16));
  return assign_kv_sources(c);
}

#undef VELA_TRY

KvRowShape kv_base_shape(const ModelConfig& c) {
  for (const LayerConfig& l : c.layers)
    if (l.kv_index >= 0) return {l.n_head_kv, l.head_dim};
  return {c.n_head_kv, c.head_dim};
}

}  // namespace vela

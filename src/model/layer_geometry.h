#pragma once
// Per-layer attention and FFN geometry read from GGUF metadata: keys that hold one value per
// layer (gemma4's head_count_kv and feed_forward_length), the windowed layers' own head size
// (attention.key_length_swa, rope.dimension_count_swa), and KV sharing (attention.shared_kv_layers:
// the last layers attend over an earlier layer's cache and keep none of their own).
// Plain functions; no thread-safety concerns.
#include <cstdint>
#include <string>

#include "io/gguf.h"
#include "model/model_config.h"
#include "util/result.h"

namespace vela {

// An integer key holding one value or one per layer (an array of n_layer entries): out = the
// value, or the largest entry; every entry within [lo, hi]. Absent: out unchanged, or an error
// when required. Errors name the key.
Status read_int_or_layer_max(const GgufFile& g, const std::string& key, int32_t& out, bool required,
                             int64_t lo, int64_t hi, int32_t n_layer);

// Fills every layer's n_head_kv, head_dim, n_rot, n_ff and kv_source (model_config.h), and
// c.n_rot_local and c.n_shared_kv_layers, from the `a`-prefixed keys; layers that share a cache
// lose their kv_index and the others' are renumbered. Runs once the layers' windows and mixers
// are known.
Status read_layer_geometry(const GgufFile& g, const std::string& a, ModelConfig& c);

}  // namespace vela

#include "model/model_config.h"

#include <cmath>

namespace vela {
namespace {

// Reads an integer key into a positive int32 within [lo, hi]; error names the key.
Status read_int(const GgufFile& g, const std::string& key, int32_t& out, bool required, int64_t lo,
                int64_t hi) {
  auto v = g.get_int(key);
  if (!v) return v.error();
  if (!v->has_value()) {
    if (required) return make_error("missing metadata '" + key + "'");
    return {};
  }
  const int64_t x = **v;
  if (x < lo || x > hi)
    return make_error("metadata '" + key + "' = " + std::to_string(x) + " is out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  out = static_cast<int32_t>(x);
  return {};
}

Status read_float(const GgufFile& g, const std::string& key, float& out, double lo, double hi) {
  auto v = g.get_float(key);
  if (!v) return v.error();
  if (!v->has_value()) return {};
  const double x = **v;
  if (!std::isfinite(x) || x < lo || x > hi)
    return make_error("metadata '" + key + "' = " + std::to_string(x) + " is out of range");
  out = static_cast<float>(x);
  return {};
}

}  // namespace

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& g) {
  ModelConfig c;
  auto arch = g.get_string("general.architecture");
  if (!arch) return arch.error();
  if (!arch->has_value()) return make_error("missing metadata 'general.architecture'");
  c.arch_name = std::string(**arch);
  if (c.arch_name == "llama") {
    c.arch = Architecture::kLlama;
    c.rope_style = RopeStyle::kNormal;
  } else if (c.arch_name == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.rope_style = RopeStyle::kNeox;
  } else {
    return make_error("unsupported model architecture '" + c.arch_name + "' (supported: " + kSupported + ")");
  }
  if (auto name = g.get_string("general.name"); name && name->has_value()) c.name = std::string(**name);

  const std::string a = c.arch_name + ".";
  constexpr int64_t kBig = int64_t(1) << 24;
  Status st;
  if (!(st = read_int(g, a + "embedding_length", c.n_embd, true, 1, 1 << 16))) return st.error();
  if (!(st = read_int(g, a + "block_count", c.n_layer, true, 1, 1024))) return st.error();
  if (!(st = read_int(g, a + "feed_forward_length", c.n_ff, true, 1, 1 << 20))) return st.error();
  if (!(st = read_int(g, a + "attention.head_count", c.n_head, true, 1, 1024))) return st.error();
  c.n_head_kv = c.n_head;
  if (!(st = read_int(g, a + "attention.head_count_kv", c.n_head_kv, false, 1, 1024))) return st.error();
  c.n_ctx_train = 2048;
  if (!(st = read_int(g, a + "context_length", c.n_ctx_train, false, 1, kBig))) return st.error();
  if (c.n_head % c.n_head_kv != 0)
    return make_error("attention.head_count " + std::to_string(c.n_head) +
                      " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  c.head_dim = c.n_embd / c.n_head;
  if (!(st = read_int(g, a + "attention.key_length", c.head_dim, false, 1, 1 << 12))) return st.error();
  int32_t value_length = c.head_dim;
  if (!(st = read_int(g, a + "attention.value_length", value_length, false, 1, 1 << 12))) return st.error();
  if (value_length != c.head_dim) return make_error("attention.value_length different from key_length is not supported");
  if (c.head_dim % 2 != 0) return make_error("head dimension " + std::to_string(c.head_dim) + " must be even");
  c.n_rot = c.head_dim;
  if (!(st = read_int(g, a + "rope.dimension_count", c.n_rot, false, 2, c.head_dim))) return st.error();
  if (c.n_rot % 2 != 0) return make_error("rope.dimension_count must be even");
  if (!(st = read_float(g, a + "attention.layer_norm_rms_epsilon", c.rms_eps, 0.0, 1.0))) return st.error();
  if (!(st = read_float(g, a + "rope.freq_base", c.rope_freq_base, 1.0, 1e12))) return st.error();
  float scale_factor = 1.0f;
  auto scaling_type = g.get_string(a + "rope.scaling.type");
  if (!scaling_type) return scaling_type.error();
  if (scaling_type->has_value() && **scaling_type != "none") {
    if (**scaling_type != "linear")
      return make_error("unsupported rope.scaling.type '" + std::string(**scaling_type) + "' (supported: none, linear)");
    if (!(st = read_float(g, a + "rope.scaling.factor", scale_factor, 1e-3, 1e6))) return st.error();
  }
  c.rope_freq_scale = 1.0f / scale_factor;
  if (!(st = read_int(g, a + "attention.sliding_window", c.sliding_window, false, 0, kBig))) return st.error();

  // The vocabulary size is the token list's length (the embedding's shape is checked against it).
  auto tokens = g.get_array("tokenizer.ggml.tokens");
  if (!tokens) return tokens.error();
  if (tokens->has_value()) c.n_vocab = static_cast<int32_t>((**tokens)->items.size());
  if (const GgufTensorInfo* emb = g.find_tensor("token_embd.weight")) {
    if (c.n_vocab == 0 && emb->ne[1] < kBig) c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  }
  if (c.n_vocab <= 0) return make_error("cannot determine the vocabulary size (no tokenizer.ggml.tokens)");
  return c;
}

}  // namespace vela

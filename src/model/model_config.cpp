#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "model/layer_geometry.h"

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

#define VELA_TRY(expr)                                 \
  do {                                                 \
    if (Status st_ = (expr); !st_) return st_.error(); \
  } while (0)

// rope.* keys: base, scaling type and its parameters.
Status read_rope(const GgufFile& g, const std::string& a, ModelConfig& c) {
  RopeConfig& r = c.rope;
  VELA_TRY(read_float(g, a + "rope.freq_base", r.freq_base, 1.0, 1e12));
  auto type = g.get_string(a + "rope.scaling.type");
  if (!type) return type.error();
  const std::string name = type->has_value() ? std::string(**type) : std::string("none");
  float factor = 1.0f;
  VELA_TRY(read_float(g, a + "rope.scaling.factor", factor, 1e-3, 1e6));
  if (name == "none") {
    // Older files state linear scaling only as rope.scale_linear.
    VELA_TRY(read_float(g, a + "rope.scale_linear", factor, 1e-3, 1e6));
    if (factor != 1.0f) r.scaling = RopeScaling::kLinear;
  } else if (name == "linear") {
    r.scaling = RopeScaling::kLinear;
  } else if (name == "yarn") {
    r.scaling = RopeScaling::kYarn;
  } else if (name == "longrope") {
    r.scaling = RopeScaling::kLongRope;
    factor = 1.0f;  // the per-pair factors carry the scaling
  } else {
    return make_error("unsupported rope.scaling.type '" + name +
                      "' (supported: none, linear, yarn, longrope)");
  }
  if (r.scaling == RopeScaling::kLinear || r.scaling == RopeScaling::kYarn)
    r.freq_scale = 1.0f / factor;
  r.original_context = c.n_ctx_train;
  VELA_TRY(read_int(g, a + "rope.scaling.original_context_length", r.original_context, false, 1,
                    int64_t(1) << 24));
  VELA_TRY(read_float(g, a + "rope.scaling.attn_factor", r.attn_factor, 1e-3, 1e3));
  VELA_TRY(read_float(g, a + "rope.scaling.yarn_ext_factor", r.yarn_ext_factor, 0.0, 1e3));
  VELA_TRY(read_float(g, a + "rope.scaling.yarn_beta_fast", r.yarn_beta_fast, 1e-3, 1e6));
  VELA_TRY(read_float(g, a + "rope.scaling.yarn_beta_slow", r.yarn_beta_slow, 1e-3, 1e6));
  float base_swa = c.arch->default_rope_base_swa;
  VELA_TRY(read_float(g, a + "rope.freq_base_swa", base_swa, 1.0, 1e12));
  if (base_swa > 0.0f) {  // the windowed layers' own RoPE: unscaled, at their base
    c.separate_local_rope = true;
    c.rope_local = RopeConfig{};
    c.rope_local.freq_base = base_swa;
  }
  return {};
}

// The attention heads' size (attention.key_length, else n_embd / n_head) and rotated part.
Status read_head_geometry(const GgufFile& g, const std::string& a, ModelConfig& c) {
  auto key_length = g.get_int(a + "attention.key_length");
  if (!key_length) return key_length.error();
  if (!key_length->has_value() && c.n_embd % c.n_head != 0)
    return make_error("embedding_length " + std::to_string(c.n_embd) +
                      " is not a multiple of attention.head_count " + std::to_string(c.n_head) +
                      " (and no attention.key_length gives the head size)");
  c.head_dim = c.n_embd / c.n_head;
  VELA_TRY(read_int(g, a + "attention.key_length", c.head_dim, false, 1, 1 << 12));
  int32_t value_length = c.head_dim;
  VELA_TRY(read_int(g, a + "attention.value_length", value_length, false, 1, 1 << 12));
  if (value_length != c.head_dim)
    return make_error("attention.value_length different from key_length is not supported");
  if (c.head_dim % 2 != 0)
    return make_error("head dimension " + std::to_string(c.head_dim) + " must be even");
  c.n_rot = c.head_dim;
  VELA_TRY(read_int(g, a + "rope.dimension_count", c.n_rot, false, 2, c.head_dim));
  if (c.n_rot % 2 != 0) return make_error("rope.dimension_count must be even");
  return {};
}

// Multi-head latent attention: the *_lora_rank and *_mla keys. head_dim and n_head_kv are the
// absorbed form's: one cache row of kv_lora_rank + rope values per token serves every head.
Status read_latent_geometry(const GgufFile& g, const std::string& a, ModelConfig& c) {
  LatentAttentionConfig& m = c.mla;
  const std::string kv_key = a + "attention.kv_lora_rank";
  VELA_TRY(read_int(g, kv_key, m.kv_lora_rank, false, 0, 1 << 16));
  if (m.kv_lora_rank == 0)
    return make_error("metadata '" + kv_key + "' is missing or 0: '" + c.arch_name +
                      "' needs the rank of its compressed KV rows (multi-head latent attention)");
  VELA_TRY(read_int(g, a + "attention.q_lora_rank", m.q_lora_rank, false, 0, 1 << 16));
  // Files converted before the absorbed form have one attn_kv_b per layer (every head's nope-key
  // and value rows) instead of attn_k_b / attn_v_b, and no *_mla keys: there key_length and
  // value_length state a head's own sizes. The loader splits attn_kv_b (model_weights.cpp).
  auto key_mla_value = g.get_int(a + "attention.key_length_mla");
  if (!key_mla_value) return key_mla_value.error();
  const bool fused_kv_b =
      !key_mla_value->has_value() &&
      std::any_of(g.tensors().begin(), g.tensors().end(), [](const GgufTensorInfo& t) {
        return std::string_view(t.name).ends_with(".attn_kv_b.weight");
      });
  const std::string key_mla_name = fused_kv_b ? "attention.key_length" : "attention.key_length_mla";
  const std::string value_mla_name =
      fused_kv_b ? "attention.value_length" : "attention.value_length_mla";
  int32_t key_mla = 0;
  VELA_TRY(read_int(g, a + key_mla_name, key_mla, true, 3, 1 << 12));
  VELA_TRY(read_int(g, a + value_mla_name, m.v_head_dim, true, 1, 1 << 12));
  VELA_TRY(read_int(g, a + "rope.dimension_count", m.rope_dim, true, 2, key_mla - 1));
  if (m.rope_dim % 2 != 0) return make_error("rope.dimension_count must be even");
  m.nope_dim = key_mla - m.rope_dim;
  c.n_rot = m.rope_dim;
  c.head_dim = m.cache_dim();
  c.n_head_kv = 1;
  if (fused_kv_b) return {};
  // key_length / value_length, where present, state the absorbed form's sizes.
  int32_t key_length = c.head_dim, value_length = m.kv_lora_rank;
  VELA_TRY(read_int(g, a + "attention.key_length", key_length, false, 1, 1 << 17));
  VELA_TRY(read_int(g, a + "attention.value_length", value_length, false, 1, 1 << 17));
  if (key_length != c.head_dim || value_length != m.kv_lora_rank)
    return make_error(
        "metadata '" + a + "attention.key_length' / 'value_length' = " +
        std::to_string(key_length) + " / " + std::to_string(value_length) +
        " differ from kv_lora_rank + rope.dimension_count = " + std::to_string(c.head_dim) +
        " / kv_lora_rank = " + std::to_string(m.kv_lora_rank));
  return {};
}

// The scores' scale of latent attention. DeepSeek's YaRN keeps each rotated pair's norm (the
// factor 1 + 0.1 ln s YaRN gives cos and sin is divided out again when
// rope.scaling.yarn_log_multiplier is set) and scales the scores instead, by mscale^2 with
// mscale = attn_factor (1 + 0.1 ln s) (1 + yarn_log_multiplier ln s), s = 1 / freq_scale; the
// converter wrote yarn_log_multiplier as 0.1 mscale_all_dim.
Status read_latent_scale(const GgufFile& g, const std::string& a, ModelConfig& c) {
  RopeConfig& r = c.rope;
  float log_multiplier = 0.0f;
  VELA_TRY(read_float(g, a + "rope.scaling.yarn_log_multiplier", log_multiplier, 0.0, 1e3));
  const float log_s = std::log(1.0f / r.freq_scale);
  const bool yarn = r.scaling == RopeScaling::kYarn && r.yarn_ext_factor != 0.0f;
  if (yarn && log_multiplier != 0.0f) r.attn_factor /= 1.0f + 0.1f * log_s;
  const float mscale = r.attn_factor * (1.0f + 0.1f * log_s) * (1.0f + log_multiplier * log_s);
  c.mla.scale = mscale * mscale / std::sqrt(float(c.mla.key_dim()));
  return {};
}

// The scores' scale: attention.scale where present; else 1/sqrt(n_embd / n_head) for a model of
// the family's layer count that takes its query scale from the model's width (Gemma 2/3 27B:
// query_pre_attn_scalar 144 and 168 where head_dim is 128); else 1/sqrt(head_dim).
Status read_attention_scale(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
  const int32_t width_layers = c.arch->model_width_query_scale_layers;
  if (width_layers > 0 && c.n_layer == width_layers)
    c.attn_scale = 1.0f / std::sqrt(float(c.n_embd / c.n_head));
  if (c.arch->unit_attention_scale) c.attn_scale = 1.0f;
  return read_float(g, a + "attention.scale", c.attn_scale, 1e-6, 1e3);
}

// Which layers are windowed: attention.sliding_window_pattern (a period, or one bool per layer)
// or the family's default period.
Status read_windows(const GgufFile& g, const std::string& a, ModelConfig& c) {
  VELA_TRY(
      read_int(g, a + "attention.sliding_window", c.sliding_window, false, 0, int64_t(1) << 24));
  c.window_pattern = c.arch->default_window_pattern;
  std::vector<bool> windowed(size_t(c.n_layer), false);
  const std::string key = a + "attention.sliding_window_pattern";
  auto array = g.get_array(key);
  if (array && array->has_value()) {
    const GgufArray& items = ***array;
    if (items.items.size() != size_t(c.n_layer))
      return make_error("metadata '" + key + "' has " + std::to_string(items.items.size()) +
                        " entries for " + std::to_string(c.n_layer) + " layers");
    for (size_t i = 0; i < items.items.size(); ++i) windowed[i] = items.items[i].u64 != 0;
    c.window_pattern = -1;
  } else {
    auto period = g.get_int(key);
    if (!period) return period.error();
    if (period->has_value()) {
      if (**period < 0 || **period > c.n_layer)
        return make_error("metadata '" + key + "' = " + std::to_string(**period) +
                          " is longer than the model's " + std::to_string(c.n_layer) + " layers");
      c.window_pattern = int32_t(**period);
    }
    for (int32_t i = 0; i < c.n_layer; ++i)
      windowed[size_t(i)] = c.window_pattern <= 0 || i % c.window_pattern < c.window_pattern - 1;
  }
  c.layers.assign(size_t(c.n_layer), LayerConfig{});
  for (int32_t i = 0; i < c.n_layer; ++i) {
    if (c.sliding_window == 0 || !windowed[size_t(i)]) continue;
    c.layers[size_t(i)].sliding_window = c.sliding_window;
    c.layers[size_t(i)].local_rope = c.separate_local_rope;
  }
  return {};
}

// How tokens choose experts: expert_gating_func, expert_weights_scale, expert groups; and which
// layers lead dense (leading_dense_block_count).
Status read_routing(const GgufFile& g, const std::string& a, ModelConfig& c) {
  int32_t gating = 0;  // 0: the file does not say
  const std::string gating_key = a + "expert_gating_func";
  VELA_TRY(read_int(g, gating_key, gating, false, 0, 1 << 16));
  c.expert_gating = c.arch->expert_gating;
  if (gating == 1) {
    c.expert_gating = ExpertGating::kSoftmax;
  } else if (gating == 2) {
    c.expert_gating = ExpertGating::kSigmoid;
  } else if (gating != 0) {
    return make_error("metadata '" + gating_key + "' = " + std::to_string(gating) +
                      " is not supported (1 softmax, 2 sigmoid)");
  }
  float scale = 0.0f;  // 0: none, as when the key is absent
  VELA_TRY(read_float(g, a + "expert_weights_scale", scale, 0.0, 1e6));
  c.expert_weights_scale = scale != 0.0f ? scale : 1.0f;
  VELA_TRY(read_int(g, a + "expert_group_count", c.n_expert_groups, false, 1, c.n_expert));
  c.n_expert_groups_used = c.n_expert_groups;
  VELA_TRY(read_int(g, a + "expert_group_used_count", c.n_expert_groups_used, false, 1,
                    c.n_expert_groups));
  if (c.n_expert_groups > 1) {
    const int32_t per_group = c.n_expert / c.n_expert_groups;
    // A group's score is the sum of its two best experts' scores.
    if (c.n_expert % c.n_expert_groups != 0 || per_group < 2)
      return make_error("metadata '" + a + "expert_group_count' = " +
                        std::to_string(c.n_expert_groups) + " does not split expert_count " +
                        std::to_string(c.n_expert) + " into groups of at least 2 experts");
    if (c.n_expert_used > per_group * c.n_expert_groups_used)
      return make_error(
          "metadata '" + a + "expert_used_count' = " + std::to_string(c.n_expert_used) +
          " exceeds the experts of " + std::to_string(c.n_expert_groups_used) + " used groups");
  }
  int32_t n_dense = 0;
  VELA_TRY(read_int(g, a + "leading_dense_block_count", n_dense, false, 0, c.n_layer));
  for (int32_t i = n_dense; i < c.n_layer; ++i) c.layers[size_t(i)].moe = true;
  return {};
}

// expert_count / expert_used_count / expert_feed_forward_length, checked against the family.
Status read_experts(const GgufFile& g, const std::string& a, ModelConfig& c) {
  VELA_TRY(read_int(g, a + "expert_count", c.n_expert, false, 0, 4096));
  VELA_TRY(read_int(g, a + "expert_used_count", c.n_expert_used, false, 0, 4096));
  const FfnKind kind = c.arch->ffn;
  if (kind == FfnKind::kDense && c.n_expert > 0)
    return make_error("architecture '" + c.arch_name + "' has no mixture-of-experts layers, but '" +
                      a + "expert_count' = " + std::to_string(c.n_expert));
  if (kind == FfnKind::kMoe && c.n_expert == 0)
    return make_error("missing metadata '" + a + "expert_count' (architecture '" + c.arch_name +
                      "' is a mixture of experts)");
  if (c.n_expert == 0) {
    c.n_expert_used = 0;
    return {};
  }
  if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert)
    return make_error("metadata '" + a + "expert_used_count' = " + std::to_string(c.n_expert_used) +
                      " must be in [1, expert_count = " + std::to_string(c.n_expert) + "]");
  c.n_ff_expert = c.n_ff;
  VELA_TRY(read_int(g, a + "expert_feed_forward_length", c.n_ff_expert, false, 1, 1 << 20));
  if (c.arch->gated_shared_expert) {
    c.n_ff_shared_expert = c.n_ff_expert;
    VELA_TRY(read_int(g, a + "expert_shared_feed_forward_length", c.n_ff_shared_expert, false, 1,
                      1 << 20));
  }
  if (c.arch->ungated_shared_expert) {
    int32_t n_shared = 0;
    VELA_TRY(read_int(g, a + "expert_shared_count", n_shared, false, 0, 64));
    c.n_ff_shared_expert = n_shared * c.n_ff_expert;
  }
  c.shared_expert_gated = c.arch->gated_shared_expert;
  c.renormalize_experts = c.arch->renormalize_experts;
  auto norm = g.get_bool(a + "expert_weights_norm");
  if (!norm) return norm.error();
  if (norm->has_value()) c.renormalize_experts = **norm;
  return read_routing(g, a, c);
}

// Which layers are Gated DeltaNet (kDeltaNetHybrid families) and the ssm.* geometry; then every
// layer's place in the cache.
Status read_mixers(const GgufFile& g, const std::string& a, ModelConfig& c) {
  if (c.arch->layer_pattern == LayerPattern::kDeltaNetHybrid) {
    int32_t interval = c.arch->default_full_attention_interval;
    VELA_TRY(read_int(g, a + "full_attention_interval", interval, false, 1, c.n_layer));
    DeltaNetConfig& d = c.delta_net;
    int32_t inner = 0;
    VELA_TRY(read_int(g, a + "ssm.conv_kernel", d.conv_kernel, true, 2, 64));
    VELA_TRY(read_int(g, a + "ssm.state_size", d.head_k_dim, true, 1, 1024));
    VELA_TRY(read_int(g, a + "ssm.group_count", d.n_k_heads, true, 1, 1024));
    VELA_TRY(read_int(g, a + "ssm.time_step_rank", d.n_v_heads, true, 1, 4096));
    VELA_TRY(read_int(g, a + "ssm.inner_size", inner, true, 1, 1 << 20));
    if (d.n_v_heads % d.n_k_heads != 0)
      return make_error("ssm.time_step_rank (value heads) " + std::to_string(d.n_v_heads) +
                        " is not a multiple of ssm.group_count (key heads) " +
                        std::to_string(d.n_k_heads));
    if (inner % d.n_v_heads != 0)
      return make_error("ssm.inner_size " + std::to_string(inner) +
                        " is not a multiple of ssm.time_step_rank " + std::to_string(d.n_v_heads));
    d.head_v_dim = inner / d.n_v_heads;
    d.grouped_value_heads = c.arch->fused_delta_projections;
    if (d.head_v_dim != d.head_k_dim)
      return make_error("DeltaNet value head size " + std::to_string(d.head_v_dim) +
                        " differs from the key head size ssm.state_size " +
                        std::to_string(d.head_k_dim));
    for (int32_t i = 0; i < c.n_layer; ++i)
      if ((i + 1) % interval != 0) c.layers[size_t(i)].mixer = MixerKind::kGatedDeltaNet;
  } else if (c.arch->layer_pattern == LayerPattern::kLatentAttention) {
    for (LayerConfig& l : c.layers) l.mixer = MixerKind::kLatentAttention;
  }
  for (LayerConfig& l : c.layers) {
    if (l.mixer == MixerKind::kGatedDeltaNet)
      l.state_index = c.n_state_layers++;
    else
      l.kv_index = c.n_kv_layers++;
  }
  return {};
}

// An EAGLE-3 head's eagle3.* keys (checked against its target by eagle3_head_config) and its
// draft vocabulary's size (the d2t tensor's length; 0 without one).
Status read_eagle3(const GgufFile& g, const std::string& a, ModelConfig& c) {
  if (c.n_layer != 1)
    return make_error("metadata '" + a + "block_count' = " + std::to_string(c.n_layer) +
                      ": an EAGLE-3 head has one layer");
  Eagle3Config e;
  const std::string key = a + "extract_layers";
  auto array = g.get_array(key);
  if (!array) return array.error();
  if (!array->has_value())
    return make_error("missing metadata '" + key +
                      "' (the 3 target layers whose inputs an EAGLE-3 head reads)");
  const GgufArray& items = ***array;
  if (items.items.size() != e.extract_layers.size())
    return make_error("metadata '" + key + "' has " + std::to_string(items.items.size()) +
                      " entries, expected 3");
  for (size_t i = 0; i < items.items.size(); ++i) {
    const GgufValue& v = items.items[i];
    if (!v.is_integer()) return make_error("metadata '" + key + "' holds a non-integer entry");
    // Whether it is one of the target's layers is eagle3_head_config's to say.
    const bool fits = v.i64 >= -(int64_t(1) << 20) && v.i64 <= int64_t(1) << 20 &&
                      (v.type != GgufValueType::UINT64 || v.u64 == uint64_t(v.i64));
    if (!fits)
      return make_error("metadata '" + key + "' has entry " + v.to_string() +
                        ", not a layer index");
    e.extract_layers[i] = int32_t(v.i64);
  }
  VELA_TRY(read_int(g, a + "target_hidden_size", e.target_n_embd, true, 1, 1 << 16));
  auto before = g.get_bool(a + "norm_before_residual");
  if (!before) return before.error();
  if (before->has_value()) e.norm_before_residual = **before;
  if (const GgufTensorInfo* d2t = g.find_tensor("d2t")) {
    if (d2t->n_dims != 1 || d2t->ne[0] >= int64_t(1) << 24)
      return make_error("tensor 'd2t' must be one row of at most 2^24 target token ids");
    e.n_draft_vocab = int32_t(d2t->ne[0]);
  }
  c.eagle3 = e;
  return {};
}

}  // namespace

KvLayerGroups kv_layer_groups(const ModelConfig& c, bool group_windows) {
  KvLayerGroups g;
  g.group.assign(size_t(c.n_layer), -1);
  const auto window_of = [&](const LayerConfig& l) { return group_windows ? l.sliding_window : 0; };
  const auto values_of = [](const LayerConfig& l) { return int64_t(l.n_head_kv) * l.head_dim; };
  // The distinct windows, in order of first appearance, and the K/V values per position of each.
  std::vector<int32_t> windows;
  std::vector<int64_t> totals;
  int64_t widest = 0;
  for (const LayerConfig& l : c.layers) {
    if (l.kv_index < 0) continue;
    const auto it = std::find(windows.begin(), windows.end(), window_of(l));
    if (it == windows.end()) {
      windows.push_back(window_of(l));
      totals.push_back(values_of(l));
    } else {
      totals[size_t(it - windows.begin())] += values_of(l);
    }
    widest = std::max(widest, values_of(l));
  }
  if (windows.empty()) return g;
  const int64_t capacity = std::max(widest, *std::min_element(totals.begin(), totals.end()));
  // Each window's groups in turn, filled in layer order.
  for (size_t w = 0; w < windows.size(); ++w) {
    int64_t filled = 0;
    bool opened = false;
    for (int32_t i = 0; i < c.n_layer; ++i) {
      const LayerConfig& l = c.layers[size_t(i)];
      if (l.kv_index < 0 || window_of(l) != windows[w]) continue;
      if (!opened || filled + values_of(l) > capacity) {
        opened = true;
        g.windows.push_back(windows[w]);
        filled = 0;
      }
      g.group[size_t(i)] = int32_t(g.windows.size()) - 1;
      filled += values_of(l);
    }
  }
  return g;
}

KvCacheConfig model_cache_config(const ModelConfig& c, int32_t block_size, int32_t n_blocks,
                                 KvType type, int32_t n_state_slots, bool group_windows) {
  const KvRowShape base = kv_base_shape(c);
  KvCacheConfig k{c.n_kv_layers, base.n_head_kv, base.head_dim, block_size, n_blocks, type};
  const KvLayerGroups groups = kv_layer_groups(c, group_windows);
  const bool grouped =
      groups.windows.size() > 1 || (groups.windows.size() == 1 && groups.windows[0] > 0);
  if (grouped) {
    k.group_windows = groups.windows;
    k.layer_group.resize(size_t(c.n_kv_layers));
  }
  bool alike = true;
  std::vector<KvRowShape> shapes(size_t(c.n_kv_layers));
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const LayerConfig& l = c.layers[size_t(i)];
    if (l.kv_index < 0) continue;
    if (grouped) k.layer_group[size_t(l.kv_index)] = groups.group[size_t(i)];
    shapes[size_t(l.kv_index)] = {l.n_head_kv, l.head_dim};
    alike = alike && shapes[size_t(l.kv_index)] == base;
  }
  if (!alike) k.layer_shapes = std::move(shapes);
  k.k_only = c.latent_attention();
  if (c.recurrent()) {
    k.n_state_layers = c.n_state_layers;
    k.state_floats = c.delta_net.state_floats();
    k.n_state_slots = n_state_slots;
  }
  return k;
}

Result<ModelConfig> mtp_block_config(const ModelConfig& decoder) {
  const std::string key = decoder.arch_name + ".nextn_predict_layers";
  if (decoder.n_nextn_layers == 0)
    return make_error("the model has no multi-token-prediction block ('" + key +
                      "' is 0 or absent)");
  if (decoder.n_nextn_layers > 1)
    return make_error("the model has " + std::to_string(decoder.n_nextn_layers) +
                      " multi-token-prediction blocks ('" + key + "'); only one is supported");
  ModelConfig c = decoder;
  LayerConfig l;
  l.mixer = c.arch->layer_pattern == LayerPattern::kLatentAttention ? MixerKind::kLatentAttention
                                                                    : MixerKind::kAttention;
  l.kv_index = 0;
  l.kv_source = 0;
  l.moe = !decoder.layers.empty() && decoder.layers.back().moe;
  l.n_head_kv = c.n_head_kv;
  l.head_dim = c.head_dim;
  l.n_rot = c.n_rot;
  l.n_ff = c.n_ff;
  c.first_file_layer = decoder.first_file_layer + decoder.n_layer;
  c.n_layer = 1;
  c.layers = {l};
  c.n_kv_layers = 1;
  c.n_state_layers = 0;
  c.delta_net = DeltaNetConfig{};
  c.n_nextn_layers = 0;
  c.sliding_window = 0;
  c.window_pattern = 0;
  c.separate_local_rope = false;
  c.rope_local = RopeConfig{};
  c.n_rot_local = c.n_rot;
  c.n_shared_kv_layers = 0;
  c.n_embd_per_layer = 0;
  c.mtp_block = true;
  return c;
}

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& g) {
  ModelConfig c;
  auto arch = g.get_string("general.architecture");
  if (!arch) return arch.error();
  if (!arch->has_value()) return make_error("missing metadata 'general.architecture'");
  c.arch_name = std::string(**arch);
  c.arch = find_architecture(c.arch_name);
  if (c.arch == nullptr)
    return make_error("unsupported model architecture '" + c.arch_name +
                      "' (supported: " + supported_architectures() + ")");
  c.rope_style = c.arch->rope_style;
  if (auto name = g.get_string("general.name"); name && name->has_value())
    c.name = std::string(**name);

  const std::string a = c.arch_name + ".";
  constexpr int64_t kBig = int64_t(1) << 24;
  VELA_TRY(read_int(g, a + "embedding_length", c.n_embd, true, 1, 1 << 16));
  VELA_TRY(read_int(g, a + "block_count", c.n_layer, true, 1, 1024));
  VELA_TRY(read_int(g, a + "nextn_predict_layers", c.n_nextn_layers, false, 0, c.n_layer - 1));
  c.n_layer -= c.n_nextn_layers;
  VELA_TRY(
      read_int_or_layer_max(g, a + "feed_forward_length", c.n_ff, true, 1, 1 << 20, c.n_layer));
  VELA_TRY(read_int(g, a + "attention.head_count", c.n_head, true, 1, 1024));
  c.n_head_kv = c.n_head;
  VELA_TRY(read_int_or_layer_max(g, a + "attention.head_count_kv", c.n_head_kv, false, 1, 1024,
                                 c.n_layer));
  c.n_ctx_train = 2048;
  VELA_TRY(read_int(g, a + "context_length", c.n_ctx_train, false, 1, kBig));
  if (c.n_head % c.n_head_kv != 0)
    return make_error("attention.head_count " + std::to_string(c.n_head) +
                      " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  if (c.arch->layer_pattern == LayerPattern::kLatentAttention)
    VELA_TRY(read_latent_geometry(g, a, c));
  else
    VELA_TRY(read_head_geometry(g, a, c));
  VELA_TRY(read_float(g, a + "attention.layer_norm_rms_epsilon", c.rms_eps, 0.0, 1.0));
  VELA_TRY(read_attention_scale(g, a, c));
  VELA_TRY(read_rope(g, a, c));
  if (c.latent_attention()) VELA_TRY(read_latent_scale(g, a, c));
  VELA_TRY(read_windows(g, a, c));
  VELA_TRY(read_mixers(g, a, c));
  VELA_TRY(read_layer_geometry(g, a, c));
  VELA_TRY(read_float(g, a + "attn_logit_softcapping", c.attn_softcap, 0.0, 1e6));
  VELA_TRY(read_float(g, a + "final_logit_softcapping", c.final_softcap, 0.0, 1e6));
  if (c.arch->scale_embeddings) c.embed_scale = std::sqrt(float(c.n_embd));
  VELA_TRY(read_experts(g, a, c));
  if (c.arch_name == "eagle3") VELA_TRY(read_eagle3(g, a, c));

  // The vocabulary size is the token list's length (the embedding's shape is checked against it).
  auto tokens = g.get_array("tokenizer.ggml.tokens");
  if (!tokens) return tokens.error();
  if (tokens->has_value()) c.n_vocab = static_cast<int32_t>((**tokens)->items.size());
  if (const GgufTensorInfo* emb = g.find_tensor("token_embd.weight")) {
    if (c.n_vocab == 0 && emb->ne[1] < kBig) c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  }
  // An EAGLE-3 head's is its target's (eagle3_head_config).
  if (c.n_vocab <= 0 && !c.eagle3)
    return make_error("cannot determine the vocabulary size (no tokenizer.ggml.tokens)");
  return c;
}

Result<ModelConfig> eagle3_head_config(const GgufFile& head, const ModelConfig& target) {
  auto c = ModelConfig::from_gguf(head);
  if (!c) return c.error();
  if (!c->eagle3)
    return make_error("general.architecture '" + c->arch_name +
                      "' is not an EAGLE-3 draft head ('eagle3')");
  Eagle3Config& e = *c->eagle3;
  for (const int32_t layer : e.extract_layers)
    if (layer < 0 || layer >= target.n_layer)
      return make_error("metadata 'eagle3.extract_layers' entry " + std::to_string(layer) +
                        " is not a layer of the target (layers 0 to " +
                        std::to_string(target.n_layer - 1) + ")");
  if (e.target_n_embd != target.n_embd)
    return make_error("metadata 'eagle3.target_hidden_size' = " + std::to_string(e.target_n_embd) +
                      " differs from the target's embedding_length " +
                      std::to_string(target.n_embd));
  c->n_vocab = target.n_vocab;
  if (e.n_draft_vocab == 0) e.n_draft_vocab = target.n_vocab;
  return c;
}

#undef VELA_TRY

}  // namespace vela

#include "tools_support/synth.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "io/gguf.h"
#include "tools_support/gguf_stream_writer.h"
#include "tools_support/tensor_stream.h"

namespace vela {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0xD6E8FEB86659FD93ull);
  return splitmix64(s);
}

// A per-token array (tokens, scores, token types) extended to n_vocab entries with unused tokens.
// The returned value's strings point into `names`, which must outlive it.
GgufValue padded_vocab_array(std::string_view key, const GgufValue& v, int32_t n_vocab,
                             std::deque<std::string>& names) {
  GgufValue out = v;
  out.array = std::make_shared<GgufArray>(*v.array);
  const size_t first = v.array->items.size();
  for (size_t id = first; id < size_t(n_vocab); ++id) {
    GgufValue item;
    item.type = v.array->elem_type;
    if (key == "tokenizer.ggml.tokens") {
      item.str = names.emplace_back("[PAD" + std::to_string(id) + "]");
    } else if (key == "tokenizer.ggml.token_type") {
      item.i64 = 5;  // UNUSED: never produced by tokenization, never parsed from text
      item.u64 = 5;
    }  // scores and anything else: zero
    out.array->items.push_back(item);
  }
  return out;
}

}  // namespace

void synth_rows(uint64_t seed, size_t tensor_index, TensorKind kind, float weight_std,
                int64_t n_cols, int64_t row_begin, int64_t row_end, float* dst) {
  const int64_t n = (row_end - row_begin) * n_cols;
  if (kind == TensorKind::kNorm || kind == TensorKind::kOutputNorm || kind == TensorKind::kScale) {
    std::fill(dst, dst + n, 1.0f);
    return;
  }
  // Sum of four 16-bit uniforms in (0, 1): mean 2, variance 4/12; centred and scaled by sqrt(3)
  // it has unit variance. One 64-bit draw per value keeps an 8B model's synthesis fast.
  constexpr float kUnit = 1.0f / 65536.0f;
  // Convolution taps: std 1/sqrt(taps), so a tap-weighted sum of unit-variance inputs keeps
  // unit variance.
  const float std_dev = kind == TensorKind::kConv ? 1.0f / std::sqrt(float(n_cols)) : weight_std;
  const float scale = std_dev * 1.7320508f;
  const uint64_t tensor_seed = mix(mix(seed, 0x5EEDull), tensor_index + 1);
  for (int64_t r = row_begin; r < row_end; ++r) {
    uint64_t state = mix(tensor_seed, uint64_t(r));
    float* out = dst + (r - row_begin) * n_cols;
    for (int64_t i = 0; i < n_cols; ++i) {
      const uint64_t x = splitmix64(state);
      if (kind == TensorKind::kDecay) {
        // -exp(A_log), A_log uniform in [0, ln 16): per-step decays exp(-A softplus(.)) that
        // range from slow to fast, as the reference initialisation's.
        const float u = float(x >> 40) * (1.0f / 16777216.0f);  // 24 bits: [0, 1)
        out[i] = -std::exp(u * 2.7725887f);                     // ln 16
        continue;
      }
      const float sum = float(x & 0xFFFF) + float((x >> 16) & 0xFFFF) + float((x >> 32) & 0xFFFF) +
                        float(x >> 48) + 2.0f;  // +0.5 per uniform
      out[i] = (sum * kUnit - 2.0f) * scale;
    }
  }
}

Result<SynthSummary> synthesize_model(const SynthOptions& o) {
  const ModelShape& s = o.shape;
  if (const std::string problem = shape_problem(s); !problem.empty())
    return make_error("shape '" + s.name + "' is inconsistent: " + problem);
  auto vocab = GgufFile::open(o.vocab_path);
  if (!vocab) return make_error("vocabulary: " + vocab.message());
  auto tokens = vocab->get_array("tokenizer.ggml.tokens");
  if (!tokens) return make_error("vocabulary '" + o.vocab_path + "': " + tokens.message());
  if (!tokens->has_value() || (**tokens)->items.empty())
    return make_error("vocabulary '" + o.vocab_path + "' has no tokenizer.ggml.tokens");
  const int32_t file_vocab = int32_t((**tokens)->items.size());
  if (o.pad_vocab && file_vocab > s.n_vocab)
    return make_error("vocabulary '" + o.vocab_path + "' has " + std::to_string(file_vocab) +
                      " tokens, more than shape " + s.name + "'s " + std::to_string(s.n_vocab) +
                      " (cannot pad)");
  const int32_t n_vocab = o.pad_vocab ? s.n_vocab : file_vocab;

  GgufStreamWriter w;
  const std::string a = s.architecture + ".";
  w.add_string("general.architecture", s.architecture);
  w.add_string("general.name", "synthetic " + s.name);
  w.add_string("general.description",
               "random weights written by vela synth (seed " + std::to_string(o.seed) + ")");
  w.add_u32("general.file_type", o.target.file_type);
  w.add_u32("general.quantization_version", 2);
  w.add_u32(a + "vocab_size", uint32_t(n_vocab));
  w.add_u32(a + "context_length", uint32_t(s.n_ctx));
  w.add_u32(a + "embedding_length", uint32_t(s.n_embd));
  w.add_u32(a + "block_count", uint32_t(s.n_blocks()));
  if (s.n_nextn > 0) w.add_u32(a + "nextn_predict_layers", uint32_t(s.n_nextn));
  // Keys of one value per layer where the layers differ, as the Gemma 4 converter writes them.
  const auto per_layer = [&](int32_t (ModelShape::*of)(int32_t) const) {
    std::vector<int32_t> v;
    for (int32_t i = 0; i < s.n_layer; ++i) v.push_back((s.*of)(i));
    return v;
  };
  if (s.n_ff_kv_shared > 0)
    w.add_i32s(a + "feed_forward_length", per_layer(&ModelShape::layer_ff));
  else
    w.add_u32(a + "feed_forward_length", uint32_t(s.n_ff));
  w.add_u32(a + "attention.head_count", uint32_t(s.n_head));
  if (s.n_head_kv_global > 0)
    w.add_i32s(a + "attention.head_count_kv", per_layer(&ModelShape::layer_head_kv));
  else
    w.add_u32(a + "attention.head_count_kv", uint32_t(s.n_head_kv));
  if (s.head_size > 0 && !s.latent_attention()) {
    w.add_u32(a + "attention.key_length", uint32_t(s.head_size));
    w.add_u32(a + "attention.value_length", uint32_t(s.head_size));
  }
  if (s.head_size_swa > 0) {
    w.add_u32(a + "attention.key_length_swa", uint32_t(s.head_size_swa));
    w.add_u32(a + "attention.value_length_swa", uint32_t(s.head_size_swa));
    w.add_u32(a + "rope.dimension_count_swa", uint32_t(s.head_size_swa));
  }
  w.add_u32(a + "rope.dimension_count", uint32_t(s.rotated_dim()));
  if (s.rope_sections != std::array<int32_t, 4>{})
    w.add_i32s(a + "rope.dimension_sections", s.rope_sections);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.add_f32(a + "rope.freq_base", s.rope_freq_base);
  if (s.rope_freq_base_swa > 0) w.add_f32(a + "rope.freq_base_swa", s.rope_freq_base_swa);
  if (s.yarn_factor > 0) {
    w.add_string(a + "rope.scaling.type", "yarn");
    w.add_f32(a + "rope.scaling.factor", s.yarn_factor);
    w.add_u32(a + "rope.scaling.original_context_length", uint32_t(s.yarn_original_context));
  }
  if (s.sliding_window > 0) w.add_u32(a + "attention.sliding_window", uint32_t(s.sliding_window));
  if (s.window_pattern_per_layer) {
    GgufValue pattern;
    pattern.type = GgufValueType::ARRAY;
    pattern.array = std::make_shared<GgufArray>();
    pattern.array->elem_type = GgufValueType::BOOL;
    for (int32_t i = 0; i < s.n_layer; ++i) {
      GgufValue windowed;
      windowed.type = GgufValueType::BOOL;
      windowed.u64 = s.windowed_layer(i) ? 1 : 0;
      pattern.array->items.push_back(windowed);
    }
    w.add_value(a + "attention.sliding_window_pattern", pattern);
  } else if (s.sliding_window_pattern > 0) {
    w.add_u32(a + "attention.sliding_window_pattern", uint32_t(s.sliding_window_pattern));
  }
  if (s.n_kv_shared > 0) w.add_u32(a + "attention.shared_kv_layers", uint32_t(s.n_kv_shared));
  if (s.n_embd_per_layer > 0)
    w.add_u32(a + "embedding_length_per_layer_input", uint32_t(s.n_embd_per_layer));
  if (s.attn_softcap > 0) w.add_f32(a + "attn_logit_softcapping", s.attn_softcap);
  if (s.final_softcap > 0) w.add_f32(a + "final_logit_softcapping", s.final_softcap);
  if (s.n_expert > 0) {
    w.add_u32(a + "expert_count", uint32_t(s.n_expert));
    w.add_u32(a + "expert_used_count", uint32_t(s.n_expert_used));
    if (s.n_ff_exp > 0) w.add_u32(a + "expert_feed_forward_length", uint32_t(s.n_ff_exp));
    if (s.n_ff_shexp > 0)
      w.add_u32(a + "expert_shared_feed_forward_length", uint32_t(s.n_ff_shexp));
    if (s.n_shared_experts > 0) w.add_u32(a + "expert_shared_count", uint32_t(s.n_shared_experts));
    if (s.n_dense_lead > 0) w.add_u32(a + "leading_dense_block_count", uint32_t(s.n_dense_lead));
    if (s.sigmoid_routing) {
      w.add_u32(a + "expert_gating_func", 2);
      w.add_bool(a + "expert_weights_norm", true);
    }
    if (s.expert_weights_scale > 0) w.add_f32(a + "expert_weights_scale", s.expert_weights_scale);
    if (s.n_expert_groups > 0) {
      w.add_u32(a + "expert_group_count", uint32_t(s.n_expert_groups));
      w.add_u32(a + "expert_group_used_count", uint32_t(s.n_expert_groups_used));
    }
  }
  if (s.latent_attention()) {
    // key_length / value_length state the absorbed form: one cached row of kv_lora_rank +
    // rope values per token read by every head.
    w.add_u32(a + "attention.q_lora_rank", uint32_t(s.q_lora_rank));
    w.add_u32(a + "attention.kv_lora_rank", uint32_t(s.kv_lora_rank));
    w.add_u32(a + "attention.key_length", uint32_t(s.kv_lora_rank + s.rope_dim));
    w.add_u32(a + "attention.value_length", uint32_t(s.kv_lora_rank));
    w.add_u32(a + "attention.key_length_mla", uint32_t(s.mla_nope_dim + s.rope_dim));
    w.add_u32(a + "attention.value_length_mla", uint32_t(s.mla_v_dim));
  }
  if (s.hybrid()) {
    w.add_u32(a + "full_attention_interval", uint32_t(s.full_attention_interval));
    w.add_u32(a + "ssm.conv_kernel", uint32_t(s.ssm_conv_kernel));
    w.add_u32(a + "ssm.state_size", uint32_t(s.ssm_head_dim));
    w.add_u32(a + "ssm.group_count", uint32_t(s.ssm_k_heads));
    w.add_u32(a + "ssm.time_step_rank", uint32_t(s.ssm_v_heads));
    w.add_u32(a + "ssm.inner_size", uint32_t(s.ssm_value_dim()));
  }
  std::deque<std::string> pad_names;  // padded token texts, alive while they are encoded
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    if (n_vocab > file_vocab && value.type == GgufValueType::ARRAY &&
        value.array->items.size() == size_t(file_vocab))
      w.add_value(key, padded_vocab_array(key, value, n_vocab, pad_names));
    else
      w.add_value(key, value);
  }

  const std::vector<TensorSpec> specs = model_tensors(s, n_vocab);
  std::vector<GgmlType> types;
  SynthSummary summary;
  summary.n_vocab = n_vocab;
  for (const TensorSpec& t : specs) {
    // The blocks as the common quantizer counts them (block_count): the mixes' rules see a
    // multi-token-prediction block as the last layer.
    const TensorRole role{t.name,  t.ne[0],      int32_t(t.ne.size()),
                          t.layer, s.n_blocks(), !s.tied_embeddings};
    types.push_back(choose_tensor_type(o.target, role, o.pure));
    if (auto st = w.add_tensor(t.name, types.back(), t.ne); !st) return st.error();
    summary.n_params += uint64_t(t.n_elements());
  }
  summary.n_tensors = specs.size();
  summary.file_bytes = w.total_bytes();

  if (auto st = w.open(o.output_path); !st) return st.error();
  const int n_threads =
      o.n_threads > 0 ? o.n_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  TensorStreamer streamer(n_threads);
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& t = specs[i];
    if (o.on_tensor) o.on_tensor(i, specs.size(), t.name, types[i]);
    const RowSource source = [&](int64_t r0, int64_t r1, float* dst) {
      if (t.kind == TensorKind::kRopeFreqs) {  // one row: pair k turns while 2k < rotated
        for (int64_t k = 0; k < t.ne[0]; ++k) dst[k] = 2 * k < s.rope_freqs_rotated ? 1.0f : 1e30f;
        return;
      }
      synth_rows(o.seed, i, t.kind, o.weight_std, t.ne[0], r0, r1, dst);
    };
    if (auto st = streamer.write(w, types[i], t.n_rows(), t.ne[0], source); !st) return st.error();
  }
  if (auto st = w.finish(); !st) return st.error();
  return summary;
}

}  // namespace vela

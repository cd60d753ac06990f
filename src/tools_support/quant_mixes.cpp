#include "tools_support/quant_mixes.h"

#include <algorithm>
#include <numeric>

#include "io/gguf.h"
#include "quant/quantize.h"

namespace vela {
namespace {

using T = GgmlType;

// GGUF general.file_type numbers (the common llama_ftype enum).
enum FileType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ2_XXS = 19,
  kIQ2_XS = 20,
  kQ2_K_S = 21,
  kIQ3_XS = 22,
  kIQ3_XXS = 23,
  kIQ1_S = 24,
  kIQ4_NL = 25,
  kIQ3_S = 26,
  kIQ3_M = 27,
  kIQ2_S = 28,
  kIQ2_M = 29,
  kIQ4_XS = 30,
  kIQ1_M = 31,
  kBF16 = 32,
  kTQ1_0 = 36,
  kTQ2_0 = 37,
  kMXFP4_MOE = 38,
};

constexpr QuantMix kMixes[] = {
    {"F32", kF32, T::F32, false, false, "no quantization"},
    {"F16", kF16, T::F16, false, false, "16-bit floats"},
    {"BF16", kBF16, T::BF16, false, false, "bfloat16"},
    {"Q8_0", kQ8_0, T::Q8_0, false, false, "8-bit throughout"},
    {"Q4_0", kQ4_0, T::Q4_0, false, false, "4-bit, Q6_K output"},
    {"Q4_1", kQ4_1, T::Q4_1, false, false, "4-bit with offsets, Q6_K output"},
    {"Q5_0", kQ5_0, T::Q5_0, false, false, "5-bit, Q6_K output"},
    {"Q5_1", kQ5_1, T::Q5_1, false, false, "5-bit with offsets, Q6_K output"},
    {"Q4_K", kQ4_K_S, T::Q4_K, true, false,
     "Q4_K throughout but a Q6_K output (vela's; the common tool's Q4_K is Q4_K_M)"},
    {"Q5_K", kQ5_K_S, T::Q5_K, true, false,
     "Q5_K throughout but a Q6_K output (vela's; the common tool's Q5_K is Q5_K_M)"},
    {"Q6_K", kQ6_K, T::Q6_K, false, false, "6-bit K"},
    {"Q4_K_S", kQ4_K_S, T::Q4_K, false, false, "Q4_K; Q5_K for the first attn_v and ffn_down"},
    {"Q4_K_M", kQ4_K_M, T::Q4_K, false, false, "Q4_K; Q6_K for about half of attn_v and ffn_down"},
    {"Q5_K_S", kQ5_K_S, T::Q5_K, false, false, "Q5_K"},
    {"Q5_K_M", kQ5_K_M, T::Q5_K, false, false, "Q5_K; Q6_K for about half of attn_v and ffn_down"},
    {"Q2_K", kQ2_K, T::Q2_K, false, false, "Q2_K; Q3_K ffn_down and attn_output, Q3_K/Q4_K attn_v"},
    {"Q2_K_S", kQ2_K_S, T::Q2_K, false, true, "Q2_K; Q4_K for the first ffn_down"},
    {"Q3_K_S", kQ3_K_S, T::Q3_K, false, false, "Q3_K"},
    {"Q3_K_M", kQ3_K_M, T::Q3_K, false, false, "Q3_K; Q4_K/Q5_K attn_v, ffn_down, attn_output"},
    {"Q3_K_L", kQ3_K_L, T::Q3_K, false, false, "Q3_K; Q5_K attn_v, ffn_down, attn_output"},
    {"IQ4_NL", kIQ4_NL, T::IQ4_NL, false, false, "4.5-bit non-linear, blocks of 32"},
    {"IQ4_XS", kIQ4_XS, T::IQ4_XS, false, false, "4.25-bit non-linear"},
    {"IQ3_M", kIQ3_M, T::IQ3_S, false, false, "IQ3_S; Q4_K attn_v, attn_output, first ffn_down"},
    {"IQ3_S", kIQ3_S, T::IQ3_S, false, false, "3.44-bit"},
    {"IQ3_XS", kIQ3_XS, T::IQ3_S, false, true,
     "IQ3_S; IQ3_XXS attn_q/attn_k and middle ffn_gate/ffn_up"},
    {"IQ3_XXS", kIQ3_XXS, T::IQ3_XXS, false, true,
     "3.06-bit; IQ2_S attn_q/attn_k, IQ3_S attn_output"},
    {"IQ2_M", kIQ2_M, T::IQ2_S, false, true, "IQ2_S; IQ3_S attn_v, attn_output, first ffn_down"},
    {"IQ2_S", kIQ2_S, T::IQ2_XS, false, true, "IQ2_XS; IQ3_S attn_v, attn_output, first ffn_down"},
    {"IQ2_XS", kIQ2_XS, T::IQ2_XS, false, true, "2.31-bit"},
    {"IQ2_XXS", kIQ2_XXS, T::IQ2_XXS, false, true, "2.06-bit"},
    {"IQ1_M", kIQ1_M, T::IQ1_M, false, true, "1.75-bit; IQ2_XXS attn_output"},
    {"IQ1_S", kIQ1_S, T::IQ1_S, false, true, "1.56-bit; IQ2_XXS attn_output"},
    {"TQ2_0", kTQ2_0, T::TQ2_0, false, false, "ternary, 2.06-bit (ternary-trained models)"},
    {"TQ1_0", kTQ1_0, T::TQ1_0, false, false, "ternary, 1.69-bit (ternary-trained models)"},
    {"MXFP4_MOE", kMXFP4_MOE, T::MXFP4, false, false, "MXFP4 experts, Q8_0 the rest"},
};

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

template <typename V>
bool one_of(V v, std::initializer_list<V> set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

int64_t block_size(T t) {
  return ggml_type_info(uint32_t(t))->block_size;
}

bool is_float(T t) {
  return t == T::F32 || t == T::F16 || t == T::BF16;
}

// Names the common quantizer leaves as they are, matched anywhere in a tensor's name (small
// tensors of particular architectures, routers, convolution taps, multimodal parts).
constexpr std::string_view kNeverQuantized[] = {"_norm.weight",
                                                "ffn_gate_inp.weight",
                                                "ffn_gate_tid2eid.weight",
                                                "altup",
                                                "laurel",
                                                "per_layer_model_proj",
                                                "ssm_conv1d",
                                                "shortconv.conv.weight",
                                                "indexer.k_proj.weight",
                                                "indexer.q_proj.weight",
                                                "time_mix_first.weight",
                                                "time_mix_w0.weight",
                                                "time_mix_w1.weight",
                                                "time_mix_w2.weight",
                                                "time_mix_v0.weight",
                                                "time_mix_v1.weight",
                                                "time_mix_v2.weight",
                                                "time_mix_a0.weight",
                                                "time_mix_a1.weight",
                                                "time_mix_a2.weight",
                                                "time_mix_g1.weight",
                                                "time_mix_g2.weight",
                                                "time_mix_decay_w1.weight",
                                                "time_mix_decay_w2.weight",
                                                "time_mix_lerp_fused.weight",
                                                "attn_rel_b.weight",
                                                ".position_embd",
                                                "sam.pos_embd",
                                                "sam.neck.",
                                                "sam.net_",
                                                ".rel_pos",
                                                ".patch_embd",
                                                ".patch_merger",
                                                "a.rvq.codebook",
                                                "mm.a.code_embd"};

bool quantizable(const MixTensor& t) {
  if (t.n_dims < 2 || !ends_with(t.name, "weight")) return false;
  if (t.name == "position_embd.weight" || t.name == "token_types.weight") return false;
  for (std::string_view part : kNeverQuantized)
    if (contains(t.name, part)) return false;
  return true;
}

enum class Role {
  kOutput,
  kEmbedding,
  kAttnQkv,
  kAttnKvB,
  kAttnV,
  kAttnK,
  kAttnQ,
  kAttnOut,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOther
};

// The first matching pattern decides (the order matters: "ffn_up" before "ffn_gate" keeps
// ffn_gate_up_exps a gate, and so on).
Role role_of(std::string_view name) {
  if (name == "output.weight") return Role::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Role::kEmbedding;
  constexpr std::pair<std::string_view, Role> kPatterns[] = {{"attn_qkv.weight", Role::kAttnQkv},
                                                             {"attn_kv_b.weight", Role::kAttnKvB},
                                                             {"attn_v.weight", Role::kAttnV},
                                                             {"attn_k.weight", Role::kAttnK},
                                                             {"attn_q.weight", Role::kAttnQ},
                                                             {"attn_output.weight", Role::kAttnOut},
                                                             {"ffn_up", Role::kFfnUp},
                                                             {"ffn_gate", Role::kFfnGate},
                                                             {"ffn_down", Role::kFfnDown}};
  for (const auto& [pattern, role] : kPatterns)
    if (contains(name, pattern)) return role;
  return Role::kOther;
}

bool v_like(Role r) {
  return r == Role::kAttnV || r == Role::kAttnQkv || r == Role::kAttnKvB;
}

// The layers that get more bits: the first and last eighth, and every third one between.
bool more_bits(int32_t i, int32_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// The block index a "blk.N." name states, or -1 (the common quantizer's sort key).
int32_t name_layer(std::string_view name) {
  return layer_of_tensor(name);
}

T fallback(T t, int64_t row_length) {
  if (row_length % block_size(t) == 0) return t;
  T f = T::F16;
  switch (t) {
    case T::IQ1_S:
    case T::IQ1_M:
    case T::IQ2_XXS:
    case T::IQ2_XS:
    case T::IQ2_S:
    case T::IQ3_XXS:
    case T::IQ3_S:
    case T::IQ4_XS:
      f = T::IQ4_NL;
      break;
    case T::Q2_K:
    case T::Q3_K:
    case T::TQ1_0:
    case T::TQ2_0:
      f = T::Q4_0;
      break;
    case T::Q4_K:
      f = T::Q5_0;
      break;
    case T::Q5_K:
      f = T::Q5_1;
      break;
    case T::Q6_K:
      f = T::Q8_0;
      break;
    default:
      break;
  }
  return row_length % block_size(f) == 0 ? f : T::F16;
}

// The 1- and 2-bit IQ file types, which share one set of rules.
bool low_iq(uint32_t ft) {
  return one_of<uint32_t>(ft, {kIQ2_XXS, kIQ2_XS, kIQ2_S, kIQ2_M, kIQ1_S, kIQ1_M});
}

struct Shape {
  int32_t gqa = 0;
  int32_t n_expert = 0;
  int32_t n_layer = 0;
  bool falcon = false, is_70b = false, bailing3 = false, imatrix = false;
};

T output_type(uint32_t ft, T base, int64_t row_length, const Shape& s) {
  if (ft == kMXFP4_MOE || s.falcon || row_length % block_size(base) != 0) return T::Q8_0;
  if (low_iq(ft) || ft == kIQ3_XXS) return T::Q5_K;
  return base == T::Q8_0 ? T::Q8_0 : T::Q6_K;
}

T embedding_type(uint32_t ft, T base) {
  switch (ft) {
    case kIQ2_XXS:
    case kIQ2_XS:
    case kIQ1_S:
    case kIQ1_M:
      return T::Q2_K;
    case kIQ2_S:
    case kIQ2_M:
    case kIQ3_XXS:
      return T::IQ3_S;
    case kTQ1_0:
    case kTQ2_0:
      return T::Q4_K;
    default:
      return base;
  }
}

// The 1-2 bit IQ mixes: V and the first eighth of FFN down a step up, attention output too.
T low_iq_type(uint32_t ft, T base, Role role, const Shape& s, MixPosition& p) {
  const bool s_or_m = ft == kIQ2_S || ft == kIQ2_M;
  if (v_like(role)) {
    ++p.attn_v;
    if (s.gqa >= 4 || s.n_expert >= 4) return T::Q4_K;
    return s_or_m ? T::IQ3_S : T::Q2_K;
  }
  if (role == Role::kAttnK && s.n_expert == 8) return T::Q4_K;
  if (role == Role::kFfnDown) {
    const bool early = p.ffn_down++ < s.n_layer / 8;
    return early ? (s_or_m ? T::IQ3_S : T::Q2_K) : base;
  }
  if (role == Role::kAttnOut) {
    if (s.n_expert == 8) return T::Q5_K;
    if (ft == kIQ1_S || ft == kIQ1_M) return T::IQ2_XXS;
    if (s_or_m) return T::IQ3_S;
  }
  return base;
}

T attn_v_type(uint32_t ft, T base, const Shape& s, MixPosition& p) {
  const int32_t i = p.attn_v++;
  const bool gqa4 = s.gqa >= 4;
  T t = base;
  switch (ft) {
    case kQ2_K:
      t = gqa4 ? T::Q4_K : T::Q3_K;
      break;
    case kQ2_K_S:
      if (gqa4) t = T::Q4_K;
      break;
    case kIQ3_XXS:
      t = gqa4 ? T::Q4_K : s.imatrix ? T::IQ3_XXS : T::IQ3_S;
      break;
    case kIQ3_XS:
    case kIQ3_S:
      if (gqa4) t = T::Q4_K;
      break;
    case kIQ3_M:
      t = T::Q4_K;
      break;
    case kQ3_K_M:
      t = i < 2 ? T::Q5_K : T::Q4_K;
      break;
    case kQ3_K_L:
      t = T::Q5_K;
      break;
    case kIQ4_NL:
    case kIQ4_XS:
      if (gqa4) t = T::Q5_K;
      break;
    case kQ4_K_M:
    case kQ5_K_M:
      if (more_bits(i, p.n_attn_v)) t = T::Q6_K;
      break;
    case kQ4_K_S:
      if (i < 4) t = T::Q5_K;
      break;
    default:
      break;
  }
  // A 70B Llama shares each V among 8 heads: V is small, so it gets more bits cheaply.
  if (s.is_70b && (t == T::Q3_K || t == T::Q4_K)) t = T::Q5_K;
  if (s.n_expert == 8) t = T::Q8_0;
  return t;
}

T ffn_down_type(uint32_t ft, T base, int32_t i, int32_t n, const Shape& s) {
  const bool more = more_bits(i, n);
  switch (ft) {
    case kQ2_K:
      return T::Q3_K;
    case kQ2_K_S:
      return i < n / 8 ? T::Q4_K : base;
    case kIQ3_XXS:
      if (!s.imatrix) return i < n / 8 ? T::Q4_K : T::Q3_K;
      return base;
    case kQ3_K_M:
      if (i < n / 16) return T::Q5_K;
      return !s.falcon || more ? T::Q4_K : T::Q3_K;
    case kIQ3_M:
      return i < n / 8 || (s.n_expert == 8 && more) ? T::Q4_K : base;
    case kQ3_K_L:
      return s.falcon ? T::Q4_K : T::Q5_K;
    case kQ4_K_M:
      if (s.falcon) return i < n / 16 ? T::Q6_K : more ? T::Q5_K : T::Q4_K;
      return more ? T::Q6_K : base;
    case kIQ4_NL:
    case kIQ4_XS:
      return i < n / 8 && !s.imatrix ? T::Q5_K : base;
    case kQ5_K_M:
      return more ? T::Q6_K : base;
    case kQ4_K_S:
      return !s.falcon && i < n / 8 ? T::Q5_K : base;
    case kQ4_0:
      return s.imatrix && i < n / 8 ? T::Q4_1 : base;
    case kQ5_0:
      return s.imatrix && i < n / 8 ? T::Q5_1 : base;
    default:
      return base;
  }
}

T attn_output_type(uint32_t ft, T base, const Shape& s) {
  if (s.falcon) return ft == kQ3_K_L ? T::Q4_K : base;
  if (s.n_expert == 8)
    return one_of<uint32_t>(ft, {kQ2_K, kIQ3_XS, kIQ3_XXS, kQ3_K_S, kQ3_K_M, kIQ4_NL, kQ4_K_S,
                                 kQ4_K_M, kIQ3_S, kIQ3_M, kIQ4_XS})
               ? T::Q5_K
               : base;
  switch (ft) {
    case kQ2_K:
      return T::Q3_K;
    case kIQ3_XXS:
      return T::IQ3_S;
    case kQ3_K_M:
    case kIQ3_M:
      return T::Q4_K;
    case kQ3_K_L:
      return T::Q5_K;
    default:
      return base;
  }
}

// FFN rules read the block index: an expert model's from the name (its expert tensors are not
// one per block in order), a dense model's from how many of that kind came before.
Result<int32_t> ffn_layer(const MixTensor& t, int32_t counted, const Shape& s) {
  if (s.n_expert <= 1) return counted;
  const int32_t layer = name_layer(t.name);
  if (layer < 0 || layer >= s.n_layer)
    return make_error("cannot tell the block of tensor '" + std::string(t.name) + "' (0.." +
                      std::to_string(s.n_layer - 1) + ")");
  return layer;
}

Shape shape_of(const MixModel& m) {
  Shape s;
  s.gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 0;
  s.n_expert = m.n_expert;
  s.n_layer = m.n_layer;
  s.falcon = m.arch == "falcon";
  s.bailing3 = m.arch == "bailingmoe3";
  s.is_70b = m.arch == "llama" && m.n_layer == 80 && m.n_head != m.n_head_kv;
  s.imatrix = m.has_imatrix;
  return s;
}

Result<T> rule_type(const QuantTarget& target, const Shape& s, const MixTensor& t, MixPosition& p) {
  const uint32_t ft = target.file_type;
  const T base = target.base;
  const Role role = role_of(t.name);
  if (role == Role::kOutput || (p.tied_embeddings && role == Role::kEmbedding))
    return output_type(ft, base, t.ne[0], s);
  if (target.plain) return base;
  if (ft == kMXFP4_MOE) {
    const bool ffn = role == Role::kFfnUp || role == Role::kFfnGate || role == Role::kFfnDown;
    return t.ne[2] > 1 && (!s.bailing3 || ffn) ? T::MXFP4 : T::Q8_0;
  }
  if (role == Role::kEmbedding) return embedding_type(ft, base);
  if (low_iq(ft)) return low_iq_type(ft, base, role, s, p);
  if (v_like(role)) return attn_v_type(ft, base, s, p);
  switch (role) {
    case Role::kAttnK:
      if (s.n_expert == 8) return T::Q8_0;
      [[fallthrough]];
    case Role::kAttnQ:
      if (ft == kIQ3_XS) return T::IQ3_XXS;
      if (ft == kIQ3_XXS) return T::IQ2_S;
      return base;
    case Role::kFfnDown: {
      auto layer = ffn_layer(t, p.ffn_down++, s);
      if (!layer) return layer.error();
      return ffn_down_type(ft, base, *layer, s.n_layer, s);
    }
    case Role::kAttnOut:
      return attn_output_type(ft, base, s);
    case Role::kFfnGate:
    case Role::kFfnUp: {
      int32_t& counter = role == Role::kFfnGate ? p.ffn_gate : p.ffn_up;
      auto layer = ffn_layer(t, counter++, s);
      if (!layer) return layer.error();
      const bool middle = *layer >= s.n_layer / 8 && *layer < 7 * s.n_layer / 8;
      return ft == kIQ3_XS && middle ? T::IQ3_XXS : base;
    }
    default:
      return base;
  }
}

}  // namespace

std::span<const QuantMix> quant_mixes() {
  return kMixes;
}

MixModel mix_model_of(const GgufFile& g) {
  MixModel m;
  if (auto a = g.get_string("general.architecture"); a && *a) m.arch = std::string(**a);
  const std::string k = m.arch + ".";
  // A count, or the first element of a per-layer array.
  const auto count = [&](const std::string& key) -> std::optional<int64_t> {
    if (auto v = g.get_uint(key); v && *v) return int64_t(**v);
    if (auto arr = g.get_array(key); arr && *arr) {
      auto ints = gguf_array_ints(***arr);
      if (ints && !ints->empty()) return ints->front();
    }
    return std::nullopt;
  };
  if (auto n = count(k + "block_count")) {
    m.n_layer = int32_t(*n);
  } else {
    for (const GgufTensorInfo& t : g.tensors())
      m.n_layer = std::max(m.n_layer, layer_of_tensor(t.name) + 1);
  }
  m.n_head = int32_t(count(k + "attention.head_count").value_or(0));
  m.n_head_kv = int32_t(count(k + "attention.head_count_kv").value_or(m.n_head));
  m.n_expert = int32_t(count(k + "expert_count").value_or(0));
  return m;
}

Result<GgmlType> mix_tensor_type(const QuantTarget& target, const MixModel& model,
                                 const MixTensor& tensor, MixPosition& position, bool pure) {
  if (!quantizable(tensor)) return tensor.type;
  if (is_float(target.base)) return target.base;
  T t = target.base;
  if (!pure) {
    auto r = rule_type(target, shape_of(model), tensor, position);
    if (!r) return r.error();
    t = *r;
  }
  return fallback(t, tensor.ne[0]);
}

Result<std::vector<GgmlType>> plan_tensor_types(const QuantTarget& target, const MixModel& model,
                                                std::span<const MixTensor> tensors, bool pure) {
  MixPosition p;
  p.tied_embeddings = true;
  for (const MixTensor& t : tensors) {
    const Role r = role_of(t.name);
    p.n_attn_v += v_like(r);
    if (r == Role::kOutput) p.tied_embeddings = false;
  }
  // The common quantizer walks the tensors by block index (those outside the blocks first),
  // then by name; its counters follow that order.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int32_t la = name_layer(tensors[a].name), lb = name_layer(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  std::vector<GgmlType> types(tensors.size(), GgmlType::F32);
  for (size_t i : order) {
    auto t = mix_tensor_type(target, model, tensors[i], p, pure);
    if (!t) return t.error();
    types[i] = *t;
  }
  return types;
}

bool tensor_needs_importance(const QuantTarget& target, std::string_view name, GgmlType type) {
  const Role role = role_of(name);
  if (role == Role::kOutput || role == Role::kEmbedding) return false;
  if (one_of(type, {T::IQ3_XXS, T::IQ2_XXS, T::IQ2_XS, T::IQ2_S, T::IQ1_M, T::IQ1_S})) return true;
  if (type == T::Q2_K && target.file_type == kQ2_K_S) return true;
  return needs_importance(type);
}

}  // namespace vela

#include "tools_support/quant_recipe.h"

#include <cctype>

namespace vela {
namespace {

struct TargetEntry {
  const char* name;
  GgmlType base;
  bool k_mix;
  uint32_t file_type;
};

// file_type numbers of the common llama_ftype enum.
constexpr TargetEntry kTargets[] = {
    {"F32", GgmlType::F32, false, 0},     {"F16", GgmlType::F16, false, 1},
    {"BF16", GgmlType::BF16, false, 32},  {"Q8_0", GgmlType::Q8_0, false, 7},
    {"Q4_0", GgmlType::Q4_0, false, 2},   {"Q4_1", GgmlType::Q4_1, false, 3},
    {"Q5_0", GgmlType::Q5_0, false, 8},   {"Q5_1", GgmlType::Q5_1, false, 9},
    {"Q4_K", GgmlType::Q4_K, false, 14},  {"Q5_K", GgmlType::Q5_K, false, 16},
    {"Q6_K", GgmlType::Q6_K, false, 18},  {"Q4_K_M", GgmlType::Q4_K, true, 15},
    {"Q5_K_M", GgmlType::Q5_K, true, 17},
};

int64_t block_size(GgmlType t) {
  return ggml_type_info(uint32_t(t))->block_size;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The layers that get more bits in the K mixes: the first and last eighth, and every third one
// in between (the common quantizer's choice).
bool use_more_bits(int32_t layer, int32_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

GgmlType fallback(GgmlType t, int64_t row_length) {
  if (row_length % block_size(t) == 0) return t;
  GgmlType f = GgmlType::F16;
  if (t == GgmlType::Q4_K) f = GgmlType::Q5_0;
  if (t == GgmlType::Q5_K) f = GgmlType::Q5_1;
  if (t == GgmlType::Q6_K) f = GgmlType::Q8_0;
  return row_length % block_size(f) == 0 ? f : GgmlType::F16;
}

bool is_float(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

}  // namespace

Result<QuantTarget> parse_quant_target(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (const TargetEntry& e : kTargets)
    if (upper == e.name) return QuantTarget{e.name, e.base, e.k_mix, e.file_type};
  return make_error("unknown type '" + std::string(name) + "' (supported: " + quant_target_names() +
                    ")");
}

std::string quant_target_names() {
  std::string out;
  for (const TargetEntry& e : kTargets) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

int32_t layer_of_tensor(std::string_view name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t v = 0;
  size_t i = 4;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    v = v * 10 + (name[i] - '0');
    if (v > (1 << 20)) return -1;
  }
  return i > 4 && i < name.size() && name[i] == '.' ? int32_t(v) : -1;
}

GgmlType choose_tensor_type(const QuantTarget& target, const TensorRole& role, bool pure) {
  // Routers stay F32 as in the common quantizer: they are tiny and pick the experts, so their
  // rounding would change which experts run.
  if (role.n_dims < 2 || ends_with(role.name, "ffn_gate_inp.weight")) return GgmlType::F32;
  // A DeltaNet's convolution taps stay F32 as well: a few per channel, read as floats (engines
  // take them in F32/F16/BF16 only).
  if (ends_with(role.name, "ssm_conv1d.weight")) return GgmlType::F32;
  GgmlType t = target.base;
  if (!pure && !is_float(target.base)) {
    const bool is_output =
        role.name == "output.weight" || (!role.has_output && role.name == "token_embd.weight");
    const bool more_bits =
        target.k_mix && role.layer >= 0 && use_more_bits(role.layer, role.n_layer);
    if (is_output) {
      if (role.row_length % block_size(target.base) != 0)
        t = GgmlType::Q8_0;
      else if (target.base != GgmlType::Q8_0)
        t = GgmlType::Q6_K;
    } else if (more_bits &&
               (ends_with(role.name, "attn_v.weight") || ends_with(role.name, "ffn_down.weight") ||
                ends_with(role.name, "ffn_down_exps.weight"))) {
      t = GgmlType::Q6_K;
    }
  }
  return fallback(t, role.row_length);
}

}  // namespace vela

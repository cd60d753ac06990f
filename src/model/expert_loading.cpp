#include "model/expert_loading.h"

#include <string_view>

#include "quant/ggml_type.h"

namespace vela {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  return true;
}

// "blk.N.<rest>" -> rest, or empty when the name is not a layer's tensor.
std::string_view layer_tensor_rest(std::string_view name) {
  if (name.rfind("blk.", 0) != 0) return {};
  const size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos || !all_digits(name.substr(4, dot - 4))) return {};
  return name.substr(dot + 1);
}

bool is_routed_expert_tensor(std::string_view name) {
  const std::string_view rest = layer_tensor_rest(name);
  constexpr std::string_view kStackedSuffix = "_exps.weight";
  if (rest.rfind("ffn_", 0) != 0) return false;
  if (rest.size() > kStackedSuffix.size() &&
      rest.substr(rest.size() - kStackedSuffix.size()) == kStackedSuffix)
    return true;
  // ffn_{gate,up,down}.E.weight
  for (std::string_view kind : {"ffn_gate.", "ffn_up.", "ffn_down."}) {
    if (rest.rfind(kind, 0) != 0) continue;
    const std::string_view tail = rest.substr(kind.size());
    const size_t dot = tail.find('.');
    return dot != std::string_view::npos && all_digits(tail.substr(0, dot)) &&
           tail.substr(dot) == ".weight";
  }
  return false;
}

std::string shape_text(const GgufTensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

// One expert's matrix [n_rows, n_cols] (GGUF ne = {n_cols, n_rows}).
Result<WeightMatrix> expert_matrix(const GgufFile& g, const std::string& name, int64_t n_rows,
                                   int64_t n_cols) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t)
    return make_error("missing tensor '" + name +
                      "' (the file stores its experts one tensor each, and every expert needs "
                      "its gate, up and down)");
  if (!is_supported_weight_type(t->type))
    return make_error("tensor '" + name + "' has type " + ggml_type_name(t->type) +
                      ", not a weight type");
  if (t->n_dims != 2 || t->ne[0] != n_cols || t->ne[1] != n_rows)
    return make_error("tensor '" + name + "' has shape " + shape_text(*t) + ", expected [" +
                      std::to_string(n_cols) + ", " + std::to_string(n_rows) + "]");
  const GgmlTypeInfo info = *ggml_type_info(t->type);
  return WeightMatrix{t->ggml_type(), t->data, n_rows, n_cols, row_bytes(info, n_cols)};
}

}  // namespace

uint64_t routed_expert_bytes(const GgufFile& g) {
  uint64_t total = 0;
  for (const GgufTensorInfo& t : g.tensors())
    if (is_routed_expert_tensor(t.name)) total += t.n_bytes;
  return total;
}

bool has_per_expert_tensors(const GgufFile& g, const std::string& prefix) {
  return g.find_tensor(prefix + "ffn_gate.0.weight") != nullptr;
}

Result<std::vector<ExpertWeights>> load_per_expert_tensors(const GgufFile& g,
                                                           const std::string& prefix,
                                                           int64_t n_expert, int64_t n_ff,
                                                           int64_t n_embd) {
  for (const char* stacked : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
    if (g.find_tensor(prefix + stacked + ".weight"))
      return make_error("layer '" + prefix +
                        "' has both per-expert tensors (ffn_gate.0.weight) and stacked ones (" +
                        stacked +
                        ".weight); rewrite the file with one layout (llama.cpp's "
                        "convert_hf_to_gguf.py writes stacked ffn_*_exps)");
  std::vector<ExpertWeights> experts(static_cast<size_t>(n_expert));
  for (int64_t e = 0; e < n_expert; ++e) {
    const std::string id = "." + std::to_string(e) + ".weight";
    ExpertWeights& x = experts[size_t(e)];
    auto gate = expert_matrix(g, prefix + "ffn_gate" + id, n_ff, n_embd);
    if (!gate) return gate.error();
    auto up = expert_matrix(g, prefix + "ffn_up" + id, n_ff, n_embd);
    if (!up) return up.error();
    auto down = expert_matrix(g, prefix + "ffn_down" + id, n_embd, n_ff);
    if (!down) return down.error();
    x = {*gate, *up, *down};
  }
  // An expert index past n_expert would be silently unused: the file disagrees with its
  // expert_count.
  if (g.find_tensor(prefix + "ffn_gate." + std::to_string(n_expert) + ".weight"))
    return make_error("layer '" + prefix + "' has more per-expert tensors than expert_count (" +
                      std::to_string(n_expert) + ")");
  return experts;
}

}  // namespace vela

#include "tools_support/quant_recipe.h"

#include <algorithm>
#include <cctype>

#include "tools_support/quant_mixes.h"

namespace vela {

Result<QuantTarget> parse_quant_target(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (const QuantMix& m : quant_mixes())
    if (upper == m.name)
      return QuantTarget{m.name, m.base, m.name != ggml_type_name(uint32_t(m.base)), m.file_type,
                         m.plain};
  return make_error("unknown type '" + std::string(name) + "' (supported: " + quant_target_names() +
                    ")");
}

std::string quant_target_names() {
  std::string out;
  for (const QuantMix& m : quant_mixes()) out += (out.empty() ? "" : ", ") + std::string(m.name);
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
  MixModel model;
  model.n_layer = role.n_layer;
  MixTensor tensor;
  tensor.name = role.name;
  tensor.ne[0] = role.row_length;
  tensor.n_dims = role.n_dims;
  tensor.ne[2] = role.n_dims >= 3 ? 2 : 1;  // a 3-D tensor here is a stack of experts
  const int32_t layer = std::max(role.layer, 0);
  MixPosition position{layer, role.n_layer, layer, layer, layer, !role.has_output};
  // Without expert rules the block index never has to come from the name: no error is possible.
  auto t = mix_tensor_type(target, model, tensor, position, pure);
  return t ? *t : target.base;
}

}  // namespace vela

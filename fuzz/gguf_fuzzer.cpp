// libFuzzer target: a hostile GGUF image through the reader and everything that interprets its
// metadata when a model loads (the model configuration and the tokenizer), and the blocks of its
// small tensors through the scalar decoders and dot products: any bytes (grid indices, scales,
// exponent bytes) must decode to defined values without reading outside the block.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "io/gguf.h"
#include "kernels/type_traits.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace {

// Rows of a tensor of at most 64K elements, through the scalar table's to_float and vec_dot
// (against an activation row of ones); other tensors are left alone to keep runs fast.
void decode_and_multiply(const vela::GgufTensorInfo& tensor) {
  const vela::TypeTraits* traits =
      vela::type_traits_for(vela::KernelIsa::kScalar, tensor.ggml_type());
  const auto info = vela::ggml_type_info(tensor.type);
  if (traits == nullptr || traits->vec_dot == nullptr || !info) return;
  const auto act_info = vela::ggml_type_info(uint32_t(traits->vec_dot_type));
  const int64_t n_cols = tensor.ne[0];
  if (tensor.n_elements() > (int64_t(1) << 16) || n_cols % info->block_size != 0 ||
      n_cols % act_info->block_size != 0)
    return;
  std::vector<float> row(size_t(n_cols), 1.0f);  // [n_cols]
  std::vector<uint8_t> act(size_t(vela::row_bytes(*act_info, n_cols)));
  traits->from_float(row.data(), act.data(), n_cols);
  const int64_t row_bytes = vela::row_bytes(*info, n_cols);
  const auto* data = static_cast<const uint8_t*>(tensor.data);
  for (int64_t r = 0; r < tensor.n_elements() / n_cols; ++r) {
    traits->to_float(data + r * row_bytes, row.data(), n_cols);
    (void)traits->vec_dot(n_cols, data + r * row_bytes, act.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = vela::GgufFile::from_bytes(std::span<const uint8_t>(data, size));
  if (!file.ok()) return 0;
  const vela::GgufFile& gguf = file.value();
  for (const auto& [key, value] : gguf.metadata()) {
    (void)value.to_string();
    if (value.type == vela::GgufValueType::ARRAY && value.array) {
      (void)vela::gguf_array_strings(*value.array);
      (void)vela::gguf_array_floats(*value.array);
      (void)vela::gguf_array_ints(*value.array);
    }
    (void)gguf.find(key);
  }
  for (const vela::GgufTensorInfo& tensor : gguf.tensors()) {
    (void)gguf.find_tensor(tensor.name);
    decode_and_multiply(tensor);
  }
  (void)vela::ModelConfig::from_gguf(gguf);
  (void)vela::Tokenizer::from_gguf(gguf);
  return 0;
}

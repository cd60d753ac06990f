// libFuzzer target: a hostile GGUF image through the reader and everything that interprets its
// metadata when a model loads (the model configuration and the tokenizer).
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/gguf.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

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
  for (const vela::GgufTensorInfo& tensor : gguf.tensors()) (void)gguf.find_tensor(tensor.name);
  (void)vela::ModelConfig::from_gguf(gguf);
  (void)vela::Tokenizer::from_gguf(gguf);
  return 0;
}

#pragma once
// Converts a GGUF model with float weights (F32, F16, BF16) to another type or a K mix, choosing
// each tensor's type like the common quantizer (quant_recipe.h), streaming tensor by tensor.
// Metadata is copied except the keys that describe the old encoding (general.file_type,
// general.quantization_version, general.alignment), which are rewritten.
// Thread-safety: quantize_model() uses its own worker threads and shares no state.
#include <cstdint>
#include <functional>
#include <string>

#include "quant/ggml_type.h"
#include "tools_support/quant_recipe.h"
#include "util/result.h"

namespace vela {

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;
  QuantTarget target;
  bool pure = false;  // every 2-D tensor in the target type (no output/mix rules)
  int n_threads = 0;  // 0 = all hardware threads
  // Called before each tensor is written: (index, count, name, from type, to type).
  std::function<void(size_t, size_t, const std::string&, GgmlType, GgmlType)> on_tensor;
};

struct QuantizeSummary {
  uint64_t input_bytes = 0;  // file sizes
  uint64_t output_bytes = 0;
  size_t n_tensors = 0;
};

Result<QuantizeSummary> quantize_model(const QuantizeOptions& options);

}  // namespace vela

#pragma once
// Converts a GGUF model with float weights (F32, F16, BF16) to another type or a K mix, choosing
// each tensor's type like the common quantizer (quant_recipe.h), streaming tensor by tensor.
// Metadata is copied except the keys that describe the old encoding (general.file_type,
// general.quantization_version, general.alignment), which are rewritten. With an importance
// matrix each tensor's entry (each expert's, for stacked experts) weights its rows' rounding,
// and the file records it as the common quantizer does (quantize.imatrix.file, .dataset,
// .entries_count, .chunks_count).
// Everything is checked before the output is opened: a type vela cannot make yet, a tensor whose
// type needs an importance matrix without one (or without its entry), an entry whose rows differ
// from the tensor's are errors naming the tensor.
// Thread-safety: quantize_model() uses its own worker threads and shares no state.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/ggml_type.h"
#include "tools_support/imatrix_file.h"
#include "tools_support/quant_recipe.h"
#include "util/result.h"

namespace vela {

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;
  QuantTarget target;
  bool pure = false;  // every 2-D tensor in the target type (no output/mix rules)
  int n_threads = 0;  // 0 = all hardware threads
  const ImportanceMatrix* imatrix = nullptr;  // read_imatrix()'s; nullptr: none
  std::string imatrix_path;                   // as named to the command (quantize.imatrix.file)
  // Called before each tensor is written: (index, count, name, from type, to type).
  std::function<void(size_t, size_t, const std::string&, GgmlType, GgmlType)> on_tensor;
};

struct QuantizeSummary {
  uint64_t input_bytes = 0;  // file sizes
  uint64_t output_bytes = 0;
  size_t n_tensors = 0;
  // Tensors of the blocks quantized without importance although an importance matrix was given
  // (it has no entry for them; none of them needed one).
  std::vector<std::string> without_importance;
};

Result<QuantizeSummary> quantize_model(const QuantizeOptions& options);

}  // namespace vela

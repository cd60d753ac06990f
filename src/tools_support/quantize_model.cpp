#include "tools_support/quantize_model.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "tools_support/gguf_stream_writer.h"
#include "tools_support/tensor_stream.h"

namespace vela {
namespace {

bool is_float(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

}  // namespace

Result<QuantizeSummary> quantize_model(const QuantizeOptions& o) {
  auto in = GgufFile::open(o.input_path);
  if (!in) return in.error();
  const GgufFile& g = *in;

  // The mix rules need the number of blocks; the embedding rule needs to know about tying.
  int32_t n_layer = 0;
  for (const GgufTensorInfo& t : g.tensors())
    n_layer = std::max(n_layer, layer_of_tensor(t.name) + 1);
  const bool has_output = g.find_tensor("output.weight") != nullptr;

  GgufStreamWriter w;
  for (const auto& [key, value] : g.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version" ||
        key == "general.alignment")
      continue;
    w.add_value(key, value);
  }
  w.add_u32("general.file_type", o.target.file_type);
  w.add_u32("general.quantization_version", 2);

  QuantizeSummary summary;
  std::vector<GgmlType> types;
  for (const GgufTensorInfo& t : g.tensors()) {
    const std::string name(t.name);
    const TensorRole role{t.name,  t.ne[0],   int32_t(t.n_dims), layer_of_tensor(t.name),
                          n_layer, has_output};
    const GgmlType to = choose_tensor_type(o.target, role, o.pure);
    if (to != t.ggml_type() && !is_float(t.ggml_type()))
      return make_error("tensor '" + name + "' is " + ggml_type_name(t.type) +
                        "; only F32, F16 and BF16 tensors can be converted (to " +
                        ggml_type_name(uint32_t(to)) + ")");
    if (auto st = w.add_tensor(t.name, to, std::span<const int64_t>(t.ne, t.n_dims)); !st)
      return st.error();
    types.push_back(to);
  }
  summary.n_tensors = types.size();
  summary.input_bytes = g.file_size();
  summary.output_bytes = w.total_bytes();

  if (auto st = w.open(o.output_path); !st) return st.error();
  const int n_threads =
      o.n_threads > 0 ? o.n_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  TensorStreamer streamer(n_threads);
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const GgufTensorInfo& t = g.tensors()[i];
    const GgmlType from = t.ggml_type(), to = types[i];
    if (o.on_tensor) o.on_tensor(i, types.size(), std::string(t.name), from, to);
    if (from == to) {
      if (auto st = w.write({t.data, size_t(t.n_bytes)}); !st) return st.error();
      continue;
    }
    const int64_t n_cols = t.ne[0];
    const int64_t src_row = row_bytes(*ggml_type_info(t.type), n_cols);
    const RowSource source = [&](int64_t r0, int64_t r1, float* dst) {
      for (int64_t r = r0; r < r1; ++r)
        dequantize_row(from, t.data + r * src_row, dst + (r - r0) * n_cols, n_cols);
    };
    if (auto st = streamer.write(w, to, t.n_elements() / n_cols, n_cols, source); !st)
      return st.error();
  }
  if (auto st = w.finish(); !st) return st.error();
  return summary;
}

}  // namespace vela

#include "tools_support/quantize_model.h"

#include <algorithm>
#include <iterator>
#include <thread>
#include <vector>

#include "io/gguf.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "tools_support/gguf_stream_writer.h"
#include "tools_support/quant_mixes.h"
#include "tools_support/tensor_stream.h"

namespace vela {
namespace {

bool is_float(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

std::string type_name(GgmlType t) {
  return ggml_type_name(uint32_t(t));
}

// The importance rows of a tensor about to become `to`: {} when it needs none and the matrix
// (if any) has none, an error when it needs one that is missing or when the entry's rows do not
// match the tensor's.
Result<RowImportance> tensor_importance(const QuantizeOptions& o, const GgufTensorInfo& t,
                                        GgmlType to, std::vector<std::string>& without) {
  const std::string name(t.name);
  const bool needed = tensor_needs_importance(o.target, t.name, to);
  if (o.imatrix == nullptr) {
    if (!needed) return RowImportance{};
    return make_error(o.target.name + " needs an importance matrix: tensor '" + name +
                      "' becomes " + type_name(to) +
                      ", which rounds too coarsely unless the quantizer knows which input "
                      "columns matter. Make one from the model and a calibration text with "
                      "`vela imatrix -m MODEL.gguf -f TEXT.txt -o imatrix.gguf`, then pass "
                      "--imatrix imatrix.gguf");
  }
  const ImatrixEntry* e = o.imatrix->find(t.name);
  const bool embedding = t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight";
  if (e == nullptr) {
    if (needed)
      return make_error("the importance matrix " + o.imatrix_path + " has no entry for tensor '" +
                        name + "', which " + o.target.name + " makes " + type_name(to) +
                        " and which needs one (was it computed on another model?)");
    if (layer_of_tensor(t.name) >= 0) without.push_back(name);
    return RowImportance{};
  }
  const int64_t n_cols = t.ne[0], rows = t.ne[1];
  const int64_t n_mat = t.n_elements() / (n_cols * rows);
  const bool fits = int64_t(e->importance.size()) == n_cols * n_mat &&
                    !e->matrix_importance(int32_t(n_mat - 1), n_cols).empty();
  if (!fits) {
    // As in the common quantizer, the embedding (a row lookup) may go without.
    if (embedding && !needed) return RowImportance{};
    return make_error("the importance matrix's entry for tensor '" + name + "' has " +
                      std::to_string(e->importance.size() / size_t(e->n_mat)) +
                      " values per row (" + std::to_string(e->n_mat) +
                      " matrices) but the tensor's rows have " + std::to_string(n_cols) + " (" +
                      std::to_string(n_mat) + " matrices): it was computed on another model");
  }
  return RowImportance{e->importance.data(), rows};
}

void add_imatrix_metadata(const QuantizeOptions& o, GgufStreamWriter& w) {
  w.add_string("quantize.imatrix.file", o.imatrix_path);
  if (!o.imatrix->datasets.empty())
    w.add_string("quantize.imatrix.dataset", o.imatrix->datasets[0]);
  w.add_u32("quantize.imatrix.entries_count", uint32_t(o.imatrix->entries.size()));
  if (o.imatrix->chunk_count > 0)
    w.add_u32("quantize.imatrix.chunks_count", uint32_t(o.imatrix->chunk_count));
}

}  // namespace

Result<QuantizeSummary> quantize_model(const QuantizeOptions& o) {
  auto in = GgufFile::open(o.input_path);
  if (!in) return in.error();
  const GgufFile& g = *in;

  MixModel model = mix_model_of(g);
  model.has_imatrix = o.imatrix != nullptr;
  std::vector<MixTensor> mix_tensors;
  for (const GgufTensorInfo& t : g.tensors()) {
    MixTensor m;
    m.name = t.name;
    std::copy(std::begin(t.ne), std::end(t.ne), m.ne);
    m.n_dims = int32_t(t.n_dims);
    m.type = t.ggml_type();
    mix_tensors.push_back(m);
  }
  auto planned = plan_tensor_types(o.target, model, mix_tensors, o.pure);
  if (!planned) return planned.error();
  const std::vector<GgmlType>& types = *planned;

  // Every refusal before anything is written: types vela cannot convert from or make yet first
  // (all of them named), then the importance each tensor needs.
  std::string missing;
  for (size_t i = 0; i < types.size(); ++i) {
    const GgufTensorInfo& t = g.tensors()[i];
    const GgmlType to = types[i];
    if (to == t.ggml_type()) continue;
    if (!is_float(t.ggml_type()))
      return make_error("tensor '" + std::string(t.name) + "' is " + ggml_type_name(t.type) +
                        "; only F32, F16 and BF16 tensors can be converted (to " + type_name(to) +
                        ")");
    if (!can_quantize_weighted(to) && missing.find(type_name(to)) == std::string::npos)
      missing +=
          (missing.empty() ? "" : ", ") + type_name(to) + " (first '" + std::string(t.name) + "')";
  }
  if (!missing.empty())
    return make_error(o.target.name + " puts tensors in types vela cannot make yet: " + missing);
  QuantizeSummary summary;
  std::vector<RowImportance> importance(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    const GgufTensorInfo& t = g.tensors()[i];
    if (types[i] == t.ggml_type() || is_float(types[i])) continue;
    auto imp = tensor_importance(o, t, types[i], summary.without_importance);
    if (!imp) return imp.error();
    importance[i] = *imp;
  }

  GgufStreamWriter w;
  for (const auto& [key, value] : g.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version" ||
        key == "general.alignment" || (o.imatrix && key.rfind("quantize.imatrix.", 0) == 0))
      continue;
    w.add_value(key, value);
  }
  w.add_u32("general.file_type", o.target.file_type);
  w.add_u32("general.quantization_version", 2);
  if (o.imatrix) add_imatrix_metadata(o, w);

  for (size_t i = 0; i < types.size(); ++i) {
    const GgufTensorInfo& t = g.tensors()[i];
    if (auto st = w.add_tensor(t.name, types[i], std::span<const int64_t>(t.ne, t.n_dims)); !st)
      return st.error();
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
    if (auto st = streamer.write(w, to, t.n_elements() / n_cols, n_cols, source, importance[i]);
        !st)
      return st.error();
  }
  if (auto st = w.finish(); !st) return st.error();
  return summary;
}

}  // namespace vela

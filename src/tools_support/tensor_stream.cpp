#include "tools_support/tensor_stream.h"

#include <algorithm>
#include <thread>

#include "quant/quantize.h"

namespace vela {

TensorStreamer::TensorStreamer(int n_threads, int64_t chunk_elements)
    : n_threads_(std::max(1, n_threads)), chunk_elements_(std::max<int64_t>(1, chunk_elements)) {}

Status TensorStreamer::write(GgufStreamWriter& writer, GgmlType type, int64_t n_rows,
                             int64_t n_cols, const RowSource& source, RowImportance importance) {
  auto info = ggml_type_info(uint32_t(type));
  if (!info || !can_quantize_weighted(type) || n_cols % info->block_size != 0)
    return make_error("cannot convert rows of " + std::to_string(n_cols) + " elements to " +
                      ggml_type_name(uint32_t(type)));
  const int64_t out_row = row_bytes(*info, n_cols);
  const int64_t chunk_rows = std::clamp<int64_t>(chunk_elements_ / n_cols, 1, n_rows);
  rows_.resize(size_t(chunk_rows * n_cols));
  bytes_.resize(size_t(chunk_rows * out_row));

  for (int64_t r0 = 0; r0 < n_rows; r0 += chunk_rows) {
    const int64_t nr = std::min(chunk_rows, n_rows - r0);
    // Each worker fills and converts its own slice of the chunk's rows.
    const auto work = [&](int64_t a, int64_t b) {
      if (a >= b) return;
      float* f = rows_.data() + a * n_cols;
      source(r0 + a, r0 + b, f);
      for (int64_t r = a; r < b; ++r) {
        const float* weights =
            importance.values == nullptr
                ? nullptr
                : importance.values + (r0 + r) / importance.rows_per_matrix * n_cols;
        quantize_row_weighted(type, rows_.data() + r * n_cols, bytes_.data() + r * out_row, n_cols,
                              weights);
      }
    };
    const int64_t n_workers = std::min<int64_t>(n_threads_, nr);
    std::vector<std::thread> threads;
    threads.reserve(size_t(n_workers - 1));
    for (int64_t w = 1; w < n_workers; ++w)
      threads.emplace_back(work, nr * w / n_workers, nr * (w + 1) / n_workers);
    work(0, nr / n_workers);
    for (std::thread& t : threads) t.join();
    if (auto st = writer.write({bytes_.data(), size_t(nr * out_row)}); !st) return st;
  }
  return {};
}

}  // namespace vela

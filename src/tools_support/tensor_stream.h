#pragma once
// Produces one tensor's bytes chunk by chunk for a GgufStreamWriter: rows are filled as f32 by
// a callback and converted to the tensor's type on several threads, so memory stays bounded
// (a few tens of MiB) whatever the tensor's size.
// Thread-safety: a TensorStreamer is used by one thread; it calls the row source from its
// worker threads concurrently, on disjoint row ranges.
#include <cstdint>
#include <functional>
#include <vector>

#include "quant/ggml_type.h"
#include "tools_support/gguf_stream_writer.h"
#include "util/result.h"

namespace vela {

// Fills rows [row_begin, row_end) of a tensor: dst is [row_end - row_begin, n_cols] f32.
// Called concurrently for disjoint ranges; must not depend on the call order.
using RowSource = std::function<void(int64_t row_begin, int64_t row_end, float* dst)>;

// Per-column importance of a tensor's rows for the weighted quantizers: values holds one row of
// n_cols weights per matrix, and rows [m * rows_per_matrix, (m + 1) * rows_per_matrix) use
// matrix m's (the experts of a stacked tensor have one each). values == nullptr: none.
struct RowImportance {
  const float* values = nullptr;
  int64_t rows_per_matrix = 0;
};

class TensorStreamer {
 public:
  explicit TensorStreamer(int n_threads, int64_t chunk_elements = int64_t(4) << 20);

  // Streams a tensor of [n_rows, n_cols] elements in `type` to the writer (the writer's next
  // declared tensor must have that shape and type). type must satisfy can_quantize_weighted();
  // rows go through quantize_row_weighted() with their matrix's importance, if any.
  Status write(GgufStreamWriter& writer, GgmlType type, int64_t n_rows, int64_t n_cols,
               const RowSource& source, RowImportance importance = {});

 private:
  int n_threads_;
  int64_t chunk_elements_;
  std::vector<float> rows_;     // [chunk rows, n_cols] f32
  std::vector<uint8_t> bytes_;  // the same rows converted
};

}  // namespace vela

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

class TensorStreamer {
 public:
  explicit TensorStreamer(int n_threads, int64_t chunk_elements = int64_t(4) << 20);

  // Streams a tensor of [n_rows, n_cols] elements in `type` to the writer (the writer's next
  // declared tensor must have that shape and type). type must satisfy can_quantize().
  Status write(GgufStreamWriter& writer, GgmlType type, int64_t n_rows, int64_t n_cols,
               const RowSource& source);

 private:
  int n_threads_;
  int64_t chunk_elements_;
  std::vector<float> rows_;     // [chunk rows, n_cols] f32
  std::vector<uint8_t> bytes_;  // the same rows converted
};

}  // namespace vela

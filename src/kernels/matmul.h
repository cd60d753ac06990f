#pragma once
// Matrix multiplication of a weight matrix in any supported type by a batch of f32 activation
// rows: y[t, r] = dot(W[r, :], x[t, :]). Activations are converted once per call to the weight
// type's vec_dot_type (type_traits.h), then every (row, token) pair is one vec_dot.
// The work splits into two phases so callers can parallelize: convert the activations once (by
// token ranges: prepare_activations + convert_activations, or quantize_activations for all),
// then matmul_rows() on disjoint row ranges from any number of threads; MatmulSplit chooses the
// row ranges. Every output element is one dot product, so no split changes any result.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/packed/packed_layout.h"
#include "quant/ggml_type.h"

namespace vela {

// Buffer for the converted activations, sized once for the largest batch and reused, so the
// per-token path does not allocate.
// Thread-safety: not thread-safe; one scratch per concurrent matmul() caller. Its contents may be
// read concurrently (by matmul_rows) once written.
class MatmulScratch {
 public:
  MatmulScratch() = default;
  MatmulScratch(MatmulScratch&&) noexcept = default;
  MatmulScratch& operator=(MatmulScratch&&) noexcept = default;

  // Grows the buffer to at least `bytes` (never shrinks; contents are not kept on growth).
  void reserve(size_t bytes);
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  struct AlignedDelete {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], AlignedDelete> data_;
  size_t capacity_ = 0;
};

// Bytes of scratch a matmul with weights of w_type in `layout` needs for up to n_tokens rows of
// n_cols (0 when the activations are used as they are, i.e. vec_dot_type is F32).
size_t matmul_scratch_bytes(GgmlType w_type, int64_t n_cols, int64_t n_tokens,
                            WeightLayout layout = WeightLayout::kRowMajor);

// Activation rows converted to a vec_dot_type: row t starts at data + t * row_stride.
struct QuantizedActivations {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;  // bytes per row
  // For interleaved weights of type packed_for: the same rows in their packed kernel's own
  // layout (PackedActPrep, packed_gemm.h), written alongside the rows; null when not needed.
  const uint8_t* packed = nullptr;
  GgmlType packed_for = GgmlType::F32;
  int64_t n_tokens = 0;
};

// Converts x: [n_tokens, n_cols] f32 to w_type's vec_dot_type, into `scratch` (grown if needed)
// or, when that type is F32, by pointing at x itself (x must then outlive the result; a packed
// copy for interleaved weights still goes to `scratch`).
// n_cols must be a multiple of both w_type's and vec_dot_type's block size.
// `layout` is that of the weights the rows will meet (interleaved ones may get a packed copy).
QuantizedActivations quantize_activations(GgmlType w_type, const float* x, int64_t n_cols,
                                          int64_t n_tokens, MatmulScratch& scratch,
                                          WeightLayout layout = WeightLayout::kRowMajor);

// quantize_activations in two steps, for converting token ranges on several threads: the layout
// (scratch grown, nothing converted yet), then rows [t_begin, t_end) of x: [n_tokens, n_cols]
// into it (nothing to do for F32). Disjoint ranges may be converted concurrently.
QuantizedActivations prepare_activations(GgmlType w_type, const float* x, int64_t n_cols,
                                         int64_t n_tokens, MatmulScratch& scratch,
                                         WeightLayout layout = WeightLayout::kRowMajor);
void convert_activations(const QuantizedActivations& act, const float* x, int64_t n_cols,
                         int64_t t_begin, int64_t t_end, MatmulScratch& scratch);

// The same two steps into part of a larger buffer the caller owns (several matmuls' activations
// side by side): `buffer` is 64-byte aligned with room for matmul_scratch_bytes(w_type, n_cols,
// n_tokens, layout) bytes.
QuantizedActivations prepare_activations_in(GgmlType w_type, const float* x, int64_t n_cols,
                                            int64_t n_tokens, uint8_t* buffer,
                                            WeightLayout layout = WeightLayout::kRowMajor);
void convert_activations_in(const QuantizedActivations& act, const float* x, int64_t n_cols,
                            int64_t t_begin, int64_t t_end, uint8_t* buffer);

// y[t, r] for r in [row_begin, row_end) and all t < n_tokens.
// w: [n_rows, n_cols] in w_type, row-major, rows of row_bytes(w_type, n_cols) bytes;
// act: [n_tokens, n_cols] from quantize_activations(w_type, ...); y: [n_tokens, n_rows] f32.
// Writes only columns [row_begin, row_end) of y, so disjoint ranges may run concurrently.
// A kInterleaved16 matrix (packed_layout.h) needs row_begin and row_end multiples of 16.
void matmul_rows(GgmlType w_type, const void* w, int64_t n_rows, int64_t n_cols, int64_t row_begin,
                 int64_t row_end, const QuantizedActivations& act, int64_t n_tokens, float* y,
                 WeightLayout layout = WeightLayout::kRowMajor);

// y[t, r] = dot(W[r, :], x[t, :]) for t < n_tokens, r < n_rows.
// w: [n_rows, n_cols] in w_type (row-major, rows of row_bytes); x: [n_tokens, n_cols] f32;
// y: [n_tokens, n_rows] f32. w_type must have a vec_dot kernel (abort otherwise: weight types
// are validated at load time).
void matmul(GgmlType w_type, const void* w, int64_t n_rows, int64_t n_cols, const float* x,
            int64_t n_tokens, float* y, MatmulScratch& scratch,
            WeightLayout layout = WeightLayout::kRowMajor);

// Splits one or more matmuls that run back to back (the q/k/v projections of one input, gate and
// up) into chunks of weight rows for a thread pool, so one parallel loop covers all of them.
// Chunks are multiples of 16 rows (the kernels' row tile), about four per thread so that threads
// finishing early pick up the rest; products too small to be worth a handoff are not split.
// The parts' storage is sized once, at construction (an MoE step adds one part per expert
// matrix it runs).
// Thread-safety: add() and split() on one thread; then run_chunk() may run concurrently for
// different chunks (each writes only its own rows of y).
class MatmulSplit {
 public:
  static constexpr int kDefaultMaxParts = 4;

  explicit MatmulSplit(int max_parts = kDefaultMaxParts) : parts_(size_t(max_parts)) {}

  void clear() { n_parts_ = 0; }
  // Adds y = W x: w: [n_rows, n_cols] in w_type; act: [n_tokens, n_cols] from
  // quantize_activations(w_type, ...); y: [n_tokens, n_rows]. At most max_parts per split.
  void add(GgmlType w_type, const void* w, int64_t n_rows, int64_t n_cols,
           const QuantizedActivations& act, int64_t n_tokens, float* y,
           WeightLayout layout = WeightLayout::kRowMajor);
  // Chooses the chunks for n_threads threads; products of fewer than min_parallel_work
  // multiply-adds in all (a few microseconds of one core) stay on one thread.
  static constexpr int64_t kMinParallelWork = 64 * 1024;
  void split(int32_t n_threads, int64_t min_parallel_work = kMinParallelWork);

  // False when the work is too small to share: run every chunk on the calling thread.
  bool parallel() const { return parallel_; }
  int64_t n_chunks() const { return n_chunks_; }
  void run_chunk(int64_t chunk) const;

 private:
  struct Part {
    GgmlType w_type;
    WeightLayout layout;
    const void* w;
    int64_t n_rows, n_cols, n_tokens;
    QuantizedActivations act;
    float* y;
    int64_t chunk_rows = 0;
    int64_t first_chunk = 0;  // index of the part's first chunk
  };
  std::vector<Part> parts_;  // [max_parts]
  int n_parts_ = 0;
  int64_t n_chunks_ = 0;
  bool parallel_ = false;
};

}  // namespace vela

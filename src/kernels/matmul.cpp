#include "kernels/matmul.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/type_traits.h"

namespace vela {

namespace {

// Cache-line (and widest SIMD register) alignment for the converted activations.
constexpr std::align_val_t kScratchAlignment{64};

// Rows processed together against each token: a tile of weight rows stays in cache while the
// token loop streams the activations.
constexpr int64_t kRowTile = 16;

// gemm_tile (register-tiled prompt processing) from this many tokens; below it the per-row
// kernels lose nothing, since a register tile would be mostly empty.
constexpr int64_t kGemmMinTokens = 4;

[[noreturn]] void fail(const char* what, GgmlType type) {
  std::fprintf(stderr, "matmul: %s for type %s\n", what, ggml_type_name(uint32_t(type)).c_str());
  std::abort();
}

const TypeTraits& weight_traits(GgmlType w_type) {
  const TypeTraits* traits = type_traits(w_type);
  if (traits == nullptr || traits->vec_dot == nullptr) fail("no dot-product kernel", w_type);
  return *traits;
}

size_t row_size(GgmlType type, int64_t n_cols) {
  const auto info = ggml_type_info(uint32_t(type));
  if (!info) fail("unknown geometry", type);
  // A partial block would silently read past the row; checked always since it is one modulo.
  if (n_cols % info->block_size != 0) fail("row length not a multiple of the block size", type);
  return size_t(row_bytes(*info, n_cols));
}

}  // namespace

void MatmulScratch::AlignedDelete::operator()(uint8_t* p) const {
  ::operator delete[](p, kScratchAlignment);
}

void MatmulScratch::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  data_.reset(static_cast<uint8_t*>(::operator new[](bytes, kScratchAlignment)));
  capacity_ = bytes;
}

namespace {

// The packed kernel's activation copy a matmul of n_tokens needs, or nullptr.
const PackedActPrep* packed_prep(GgmlType w_type, int64_t n_tokens, WeightLayout layout) {
  if (layout != WeightLayout::kInterleaved16) return nullptr;
  return active_packed_kernels(w_type).prep_for_tokens(n_tokens);
}

// The rows, then (at a 64-byte boundary) the packed copy.
size_t packed_offset(size_t rows_bytes) {
  return (rows_bytes + 63) / 64 * 64;
}

}  // namespace

size_t matmul_scratch_bytes(GgmlType w_type, int64_t n_cols, int64_t n_tokens,
                            WeightLayout layout) {
  const GgmlType act_type = weight_traits(w_type).vec_dot_type;
  // f32 rows are read from x itself; only a packed copy needs room.
  const size_t rows = act_type == GgmlType::F32 ? 0 : row_size(act_type, n_cols) * size_t(n_tokens);
  // Enough for any batch up to n_tokens, whichever kernel each size picks.
  const PackedActPrep& prep = active_packed_kernels(w_type).small_prep;
  return layout == WeightLayout::kInterleaved16 && prep.write
             ? packed_offset(rows) + prep.bytes(n_tokens, n_cols)
             : rows;
}

QuantizedActivations prepare_activations_in(GgmlType w_type, const float* x, int64_t n_cols,
                                            int64_t n_tokens, uint8_t* buffer,
                                            WeightLayout layout) {
  const TypeTraits& traits = weight_traits(w_type);
  QuantizedActivations act;
  act.type = traits.vec_dot_type;
  act.row_stride = row_size(act.type, n_cols);
  act.n_tokens = n_tokens;
  const bool f32_rows = act.type == GgmlType::F32;  // the f32 kernels read x directly
  act.data = f32_rows ? reinterpret_cast<const uint8_t*>(x) : buffer;
  if (packed_prep(w_type, n_tokens, layout) != nullptr) {
    act.packed = buffer + (f32_rows ? 0 : packed_offset(act.row_stride * size_t(n_tokens)));
    act.packed_for = w_type;
  }
  return act;
}

void convert_activations_in(const QuantizedActivations& act, const float* x, int64_t n_cols,
                            int64_t t_begin, int64_t t_end, uint8_t* buffer) {
  if (act.type != GgmlType::F32) {
    assert(act.data == buffer);
    const TypeTraits& act_traits = *type_traits(act.type);
    for (int64_t t = t_begin; t < t_end; ++t)
      act_traits.from_float(x + t * n_cols, buffer + size_t(t) * act.row_stride, n_cols);
  }
  if (act.packed != nullptr) {
    const PackedActPrep& prep =
        *packed_prep(act.packed_for, act.n_tokens, WeightLayout::kInterleaved16);
    // act.packed lies in the buffer this conversion was prepared with.
    prep.write(act.data, act.row_stride, act.n_tokens, n_cols, t_begin, t_end,
               const_cast<uint8_t*>(act.packed));
  }
}

QuantizedActivations prepare_activations(GgmlType w_type, const float* x, int64_t n_cols,
                                         int64_t n_tokens, MatmulScratch& scratch,
                                         WeightLayout layout) {
  scratch.reserve(matmul_scratch_bytes(w_type, n_cols, n_tokens, layout));
  return prepare_activations_in(w_type, x, n_cols, n_tokens, scratch.data(), layout);
}

void convert_activations(const QuantizedActivations& act, const float* x, int64_t n_cols,
                         int64_t t_begin, int64_t t_end, MatmulScratch& scratch) {
  convert_activations_in(act, x, n_cols, t_begin, t_end, scratch.data());
}

QuantizedActivations quantize_activations(GgmlType w_type, const float* x, int64_t n_cols,
                                          int64_t n_tokens, MatmulScratch& scratch,
                                          WeightLayout layout) {
  const QuantizedActivations act =
      prepare_activations(w_type, x, n_cols, n_tokens, scratch, layout);
  convert_activations(act, x, n_cols, 0, n_tokens, scratch);
  return act;
}

void matmul_rows(GgmlType w_type, const void* w, int64_t n_rows, int64_t n_cols, int64_t row_begin,
                 int64_t row_end, const QuantizedActivations& act, int64_t n_tokens, float* y,
                 WeightLayout layout) {
  assert(0 <= row_begin && row_begin <= row_end && row_end <= n_rows);
  const TypeTraits& traits = weight_traits(w_type);
  assert(act.type == traits.vec_dot_type);
  const auto vec_dot = traits.vec_dot;
  const size_t w_stride = row_size(w_type, n_cols);
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  if (layout == WeightLayout::kInterleaved16) {
    const PackedKernels& k = active_packed_kernels(w_type);
    const PackedGemmFn gemm = k.for_tokens(n_tokens);
    if (gemm == nullptr) fail("no kernel for the interleaved layout", w_type);
    assert(row_begin % kPackedRows == 0 && row_end % kPackedRows == 0);
    PackedGemmArgs args;
    args.w = w_bytes + size_t(row_begin / kPackedRows * interleaved16_group_bytes(w_type, n_cols));
    args.n_groups = (row_end - row_begin) / kPackedRows;
    args.n_cols = n_cols;
    args.act = act.data;
    args.act_stride = act.row_stride;
    args.n_act = n_tokens;
    args.y = y + row_begin;
    args.y_stride = n_rows;
    if (act.packed != nullptr && act.packed_for == w_type && act.n_tokens == n_tokens)
      args.act_prepared = act.packed;
    gemm(args);
    return;
  }
  if (traits.gemm_tile && n_tokens >= kGemmMinTokens) {
    // The kernel blocks the rows for its caches and handles ragged tile edges itself.
    traits.gemm_tile(n_cols, w_bytes + size_t(row_begin) * w_stride, w_stride, row_end - row_begin,
                     act.data, act.row_stride, n_tokens, y + row_begin, n_rows);
    return;
  }
  if (traits.vec_dot_rows && n_tokens > 1) {
    // Each weight row is decoded once for all tokens.
    for (int64_t r = row_begin; r < row_end; ++r)
      traits.vec_dot_rows(n_cols, w_bytes + size_t(r) * w_stride, act.data, act.row_stride,
                          n_tokens, y + r, n_rows);
    return;
  }
  for (int64_t tile = row_begin; tile < row_end; tile += kRowTile) {
    const int64_t tile_end = std::min(tile + kRowTile, row_end);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* a_row = act.data + size_t(t) * act.row_stride;
      float* y_row = y + t * n_rows;
      for (int64_t r = tile; r < tile_end; ++r) {
        y_row[r] = vec_dot(n_cols, w_bytes + size_t(r) * w_stride, a_row);
      }
    }
  }
}

void matmul(GgmlType w_type, const void* w, int64_t n_rows, int64_t n_cols, const float* x,
            int64_t n_tokens, float* y, MatmulScratch& scratch, WeightLayout layout) {
  const QuantizedActivations act =
      quantize_activations(w_type, x, n_cols, n_tokens, scratch, layout);
  matmul_rows(w_type, w, n_rows, n_cols, 0, n_rows, act, n_tokens, y, layout);
}

void MatmulSplit::add(GgmlType w_type, const void* w, int64_t n_rows, int64_t n_cols,
                      const QuantizedActivations& act, int64_t n_tokens, float* y,
                      WeightLayout layout) {
  if (n_parts_ == int(parts_.size())) {
    std::fprintf(stderr, "MatmulSplit: more than %d parts\n", int(parts_.size()));
    std::abort();
  }
  Part& p = parts_[n_parts_++];
  p.w_type = w_type;
  p.layout = layout;
  p.w = w;
  p.n_rows = n_rows;
  p.n_cols = n_cols;
  p.n_tokens = n_tokens;
  p.act = act;
  p.y = y;
}

void MatmulSplit::split(int32_t n_threads, int64_t min_parallel_work) {
  double total = 0;  // multiply-adds
  for (int i = 0; i < n_parts_; ++i)
    total += double(parts_[i].n_rows) * double(parts_[i].n_cols) * double(parts_[i].n_tokens);
  parallel_ = n_threads > 1 && total >= double(min_parallel_work);
  const double chunk_work = parallel_ ? total / (4.0 * n_threads) : total;
  n_chunks_ = 0;
  for (int i = 0; i < n_parts_; ++i) {
    Part& p = parts_[i];
    const double row_work = std::max(1.0, double(p.n_cols) * double(p.n_tokens));
    int64_t rows = int64_t(std::ceil(chunk_work / row_work));
    rows = std::max(kRowTile, (rows + kRowTile - 1) / kRowTile * kRowTile);  // whole row tiles
    p.chunk_rows = rows < p.n_rows ? rows : std::max<int64_t>(p.n_rows, 1);
    p.first_chunk = n_chunks_;
    n_chunks_ += (p.n_rows + p.chunk_rows - 1) / p.chunk_rows;
  }
}

void MatmulSplit::run_chunk(int64_t chunk) const {
  // The last part whose first chunk is at or before `chunk`.
  const auto it = std::upper_bound(parts_.begin(), parts_.begin() + n_parts_, chunk,
                                   [](int64_t c, const Part& p) { return c < p.first_chunk; });
  const Part& p = *(it - 1);
  const int64_t begin = (chunk - p.first_chunk) * p.chunk_rows;
  const int64_t end = std::min(begin + p.chunk_rows, p.n_rows);
  matmul_rows(p.w_type, p.w, p.n_rows, p.n_cols, begin, end, p.act, p.n_tokens, p.y, p.layout);
}

}  // namespace vela

#pragma once
// Which weight matrices are repacked into 16-row interleaved groups (packed_blocks.h) at load,
// and the repacking itself.
// Thread-safety: pure functions; disjoint row ranges may be packed concurrently.
#include <cstdint>

#include "quant/ggml_type.h"

namespace vela {

enum class WeightLayout : uint8_t {
  kRowMajor,       // GGUF blocks, row after row
  kInterleaved16,  // groups of 16 rows, block by block (BlockQ8_0x16 / BlockQ4_0x16)
};

// True when the selected kernels have a packed kernel for w_type and the shape fits (rows a
// multiple of 16, columns of 32).
bool prefers_interleaved16(GgmlType w_type, int64_t n_rows, int64_t n_cols);

// Repacks rows [row_begin, row_end) (multiples of 16) of the row-major matrix src: [n_rows,
// n_cols] in w_type (Q8_0 or Q4_0) into dst, which has the same size; a group lands at the same
// byte offset its rows had, so row ranges map to byte ranges identically in both layouts.
void pack_interleaved16(GgmlType w_type, const void* src, int64_t n_cols, int64_t row_begin,
                        int64_t row_end, void* dst);

// The inverse, for tests and row lookups: row `row` of a packed matrix as GGUF blocks.
void unpack_interleaved16_row(GgmlType w_type, const void* packed, int64_t n_cols, int64_t row,
                              void* dst_row);

}  // namespace vela

#pragma once
// Which weight matrices are repacked into 16-row interleaved groups (packed_blocks.h) at load,
// and the repacking itself.
// Thread-safety: pure functions; disjoint row ranges may be packed concurrently.
#include <cstdint>

#include "quant/ggml_type.h"

namespace vela {

enum class WeightLayout : uint8_t {
  kRowMajor,       // GGUF blocks, row after row
  kInterleaved16,  // groups of 16 rows, block by block (BlockQ8_0x16, BlockQ4_0x16, ...)
};

// Elements per packed block of w_type: 256 for the K types, 1 for F32 and F16, 2 for BF16, else
// 32.
int64_t interleaved16_block_cols(GgmlType w_type);

// True when the selected kernels have a packed kernel for w_type and the shape fits (rows a
// multiple of 16, columns of the type's block).
bool prefers_interleaved16(GgmlType w_type, int64_t n_rows, int64_t n_cols);

// Bytes of one group of 16 rows of n_cols in the interleaved layout of w_type (F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K, IQ4_NL, MXFP4: the same as 16 GGUF rows; Q4_K, Q5_K, IQ4_XS:
// 2.8% / 2.3% / 1.5% more, their decoded scales; Q3_K: 3.6% more, its decoded scales; Q2_K,
// TQ2_0: the same).
// Group g starts at g * this.
int64_t interleaved16_group_bytes(GgmlType w_type, int64_t n_cols);

// Repacks rows [row_begin, row_end) (multiples of 16) of the row-major matrix src: [n_rows,
// n_cols] in w_type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL,
// MXFP4, IQ4_XS, Q3_K, Q2_K or TQ2_0) into dst, a buffer of n_rows
// / 16 groups; the rows land in groups row_begin / 16 onward.
void pack_interleaved16(GgmlType w_type, const void* src, int64_t n_cols, int64_t row_begin,
                        int64_t row_end, void* dst);

// The inverse, for tests and row lookups: row `row` of a packed matrix as GGUF blocks.
void unpack_interleaved16_row(GgmlType w_type, const void* packed, int64_t n_cols, int64_t row,
                              void* dst_row);

}  // namespace vela

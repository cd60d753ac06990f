#pragma once
// Activation-side values the packed K-type kernels of every instruction set need, computed in
// plain C++ (compiled once, without SIMD flags, so no ISA-specific copy can be shared).
// Thread-safety: each thread gets its own buffer.
#include <cstddef>
#include <cstdint>

namespace vela {

// For n_act Q8_K activation rows (act_stride bytes apart) of nb super-blocks: per row and
// super-block, the sums of sub-blocks 2k and 2k + 1 (k < 4) as an int16 pair (low half 2k), the
// operand vpmaddwd / vpdpwssd meets the packed (min, min) pairs with. [n_act][nb][4]; valid until
// the calling thread's next call.
const uint32_t* q8_k_bsum_pairs(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb);

// For the same rows: per row, super-block and 16-element sub-block s (< 16), the start of the
// Q6_K kernels' integer sums, -32 * the activations' sub-block sum (Q6_K weights are stored as
// q + 32). [n_act][nb][16]; valid until the calling thread's next call.
const int32_t* q6_k_sum_starts(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb);

}  // namespace vela

#pragma once
// Activation-side values the packed kernels of every instruction set need beside the quants,
// computed in plain C++ (compiled once, without SIMD flags, so no ISA-specific copy can be
// shared). Each is [n_act][nb][per block] int32, so a range of rows is written independently:
// the activation conversion writes them once per matmul (PackedActPrep, packed_gemm.h), and a
// kernel called without that copy makes its own in a per-thread buffer.
// Thread-safety: the writers touch only their rows of `out`; the per-thread forms their thread's
// buffer.
#include <cstddef>
#include <cstdint>

#include "kernels/packed/packed_gemm.h"
#include "quant/ggml_type.h"

namespace vela {

// Values per activation block for the packed kernels of w_type: Q4_0 and Q5_0 (the AVX2
// kernels): 1, the start of each block's integer sum, -8 (Q5_0: -16) * its quants' sum; Q4_K /
// Q5_K: 4, the sums of sub-blocks 2k and 2k + 1 as an int16 pair (low half 2k), the operand
// vpmaddwd / vpdpwssd meets the packed (min, min) pairs with; Q6_K: 16, the start of each
// 16-element sub-block's sum, -32 * its activation sum; IQ4_XS: 8, the start of each 32-element
// sub-block's sum, -128 * its activation sum (the AVX-512 kernel's levels + 128); Q3_K: 16, the
// start of each 16-element sub-block's sum, -4 * its activation sum (the AVX-512 kernel's q, level
// + 4); Q2_K: 8, the sums of sub-blocks 2k and 2k + 1 as an int16 pair (low half 2k), as Q4_K's
// for its mins; TQ2_0: 1, the start of each block's integer sum, -1 * its activation sum. 0 for
// other types.
int packed_act_sums_per_block(GgmlType w_type);

// Rows [t_begin, t_end) of w_type's values for the activation rows at act (act_stride bytes
// apart; Q8_0 rows for Q4_0 and Q5_0, Q8_K rows for the K types) of n_cols, into out:
// [rows][nb][per].
void write_packed_act_sums(GgmlType w_type, const uint8_t* act, size_t act_stride, int64_t n_cols,
                           int64_t t_begin, int64_t t_end, int32_t* out);

// All n_act rows' values in the calling thread's buffer (valid until its next call), or the
// prepared copy when the kernel was given one.
const int32_t* packed_act_sums(GgmlType w_type, const PackedGemmArgs& p);

// The PackedActPrep of these values for w_type (empty for types without any).
PackedActPrep packed_act_sums_prep(GgmlType w_type);

// A kernel's copy of the activations in prep's layout: the prepared one when the kernel was given
// it, else written into the calling thread's buffer (valid until its next call).
const void* packed_act_view(const PackedActPrep& prep, const PackedGemmArgs& p);

// The BF16 activation rows widened to f32, [n_act][n_cols] (exact), for the AVX2 kernel that
// multiplies BF16 weights widened (Bf16Kernel::kWidenedFma).
PackedActPrep widened_bf16_act_prep();

// The AVX-512 float kernels' view of the activation rows: tokens in tiles of kFloatActTile and,
// within a tile of n tokens, the tokens' values of each column step side by side, so that a tile
// of tokens reads one sequential stream (rows act_stride apart would put every token's stream in
// the same cache set). A step is P = 1 column (f32 rows for F32 and F16 weights, BF16 rows
// widened to f32 for the widened BF16 kernel) or P = 2 (the bf16 pair vdpbf16ps takes): element
// k of token t0 + j of the tile at t0 is at t0 n_cols + ((k / P) n + j) P + k % P.
inline constexpr int64_t kFloatActTile = 12;

// The PackedActPrep of that view for w_type's AVX-512 kernel (F32, F16, BF16 with `bf16`); empty
// for other types.
PackedActPrep interleaved_float_act_prep(GgmlType w_type, Bf16Kernel bf16);

}  // namespace vela

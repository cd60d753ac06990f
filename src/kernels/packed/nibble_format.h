#pragma once
// Internal to the packed int8 kernels: what the formats on Q4_0's nibble layout (packed_blocks.h)
// differ in. Q4_0 and Q5_0 store levels + bias and meet Q8_0 activations (the bias enters through
// the activations' start sums); Q4_1 and Q5_1 are d q + m and meet Q8_1, whose s = d_a * sum of
// quants carries the offset term. Q5_0 and Q5_1 add a plane of 5th bits. No instruction-set code.
#include <type_traits>

#include "kernels/packed/packed_blocks.h"
#include "quant/blocks.h"

namespace vela::kernels {

template <class P>
struct NibbleTraits {
  using Packed = P;
  static constexpr bool kHighBit = requires(const Packed& p) { p.qh; };
  static constexpr bool kAffine = requires(const Packed& p) { p.m; };
  using Act = std::conditional_t<kAffine, BlockQ8_1, BlockQ8_0>;
  // The stored levels' bias (0 for the affine formats).
  static constexpr int kBias = kAffine ? 0 : kHighBit ? kQ5_0PackedBias : kQ4_0PackedBias;
};

}  // namespace vela::kernels

#pragma once
// Internal to the packed int8 kernels: what the formats on Q4_0's nibble layout (packed_blocks.h)
// differ in. Q4_0 and Q5_0 store levels + bias and meet Q8_0 activations (the bias enters through
// the activations' start sums); Q4_1 and Q5_1 are d q + m and meet Q8_1, whose s = d_a * sum of
// quants carries the offset term. Q5_0 and Q5_1 add a plane of 5th bits. The codebook formats
// (IQ4_NL, MXFP4) store in each nibble the index of one of 16 int8 levels and meet Q8_0: the
// kernels look the levels up with a byte shuffle (AVX-512: level + kCodebookPackedBias, unsigned
// for vpdpbusd; AVX2: the signed level, taken apart as Q8_0's). MXFP4 keeps its e8m0 scale bytes.
// No instruction-set code.
#include <array>
#include <cstdint>
#include <type_traits>

#include "kernels/packed/packed_blocks.h"
#include "quant/blocks.h"
#include "quant/blocks_nonlinear4.h"

namespace vela::kernels {

// The 16 levels a codebook format's nibbles index; nullptr for the formats whose nibble is the
// level itself.
template <class P>
inline constexpr const int8_t* kNibbleLevels = nullptr;
template <>
inline constexpr const int8_t* kNibbleLevels<BlockIQ4_NLx16> = kIQ4Levels;
template <>
inline constexpr const int8_t* kNibbleLevels<BlockMXFP4x16> = kMXFP4Levels;

template <class P>
struct NibbleTraits {
  using Packed = P;
  static constexpr bool kHighBit = requires(const Packed& p) { p.qh; };
  static constexpr bool kAffine = requires(const Packed& p) { p.m; };
  static constexpr const int8_t* kLevels = kNibbleLevels<P>;
  static constexpr bool kCodebook = kLevels != nullptr;
  // Scales as e8m0 bytes (2^(e - 128), e8m0_half_scale) rather than f16.
  static constexpr bool kE8M0 = requires(const Packed& p) { p.e; };
  using Act = std::conditional_t<kAffine, BlockQ8_1, BlockQ8_0>;
  // The stored levels' bias (0 for the affine formats; for the codebook formats, the bias of
  // kBiasedLevels).
  static constexpr int kBias = kAffine     ? 0
                               : kCodebook ? kCodebookPackedBias
                               : kHighBit  ? kQ5_0PackedBias
                                           : kQ4_0PackedBias;
  // A codebook format's levels + kBias, indexed by the nibble (zeros for the other formats).
  static constexpr std::array<uint8_t, 16> kBiasedLevels = [] {
    std::array<uint8_t, 16> t{};
    if constexpr (kCodebook)
      for (int i = 0; i < 16; ++i) t[size_t(i)] = uint8_t(kLevels[i] + kBias);
    return t;
  }();
};

}  // namespace vela::kernels

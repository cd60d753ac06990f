#pragma once
// The codebooks of the E8-lattice IQ2 types (IQ2_XXS, IQ2_XS, IQ2_S) and of the IQ3 types
// (IQ3_XXS, IQ3_S), and their shared sign table. A grid entry holds the magnitudes of a group of
// 8 (IQ2) or 4 (IQ3) consecutive weights, byte j (little-endian) being element j's; the signs
// come separately (blocks_iq23.h). The values are format data (iq23_grids.cpp, generated).
// Thread-safety: immutable tables; safe to read concurrently.
#include <cstdint>

namespace vela {

inline constexpr int kIq2XxsGridSize = 256;
inline constexpr int kIq2XsGridSize = 512;
inline constexpr int kIq2SGridSize = 1024;
inline constexpr int kIq3XxsGridSize = 256;
inline constexpr int kIq3SGridSize = 512;

// [256] / [512] / [1024] entries of 8 bytes, each byte in {8, 25, 43}.
extern const uint64_t kIq2XxsGrid[kIq2XxsGridSize];
extern const uint64_t kIq2XsGrid[kIq2XsGridSize];
extern const uint64_t kIq2SGrid[kIq2SGridSize];
// [256] entries of 4 bytes, each in {4, 12, 20, 28, 36, 44, 52, 62}.
extern const uint32_t kIq3XxsGrid[kIq3XxsGridSize];
// [512] entries of 4 bytes, each in {1, 3, 5, ..., 15}.
extern const uint32_t kIq3SGrid[kIq3SGridSize];

// [128]: the 7 sign bits IQ2_XXS / IQ2_XS / IQ3_XXS store for a group of 8 -> its 8 sign bits
// (bit j set = element j negative). Bit 7 is the parity of the 7, so every group has an even
// number of negative elements: kIqSigns[s] == s | (popcount(s) & 1) << 7.
extern const uint8_t kIqSigns[128];

// The sign bits of a group from its 7-bit stored field (any higher bits of `field` are ignored,
// so every bit pattern reads in bounds).
inline uint8_t iq_sign_byte(uint32_t field) {
  return kIqSigns[field & 127];
}

}  // namespace vela

#pragma once
// The codebook of the 1-bit types IQ1_S and IQ1_M (blocks_iq1.h): 2048 groups of 8 values, each
// in {-1, 0, +1}. Entry i is a little-endian uint64 whose byte j is element j's value as an int8
// (0xFF = -1, 0x00 = 0, 0x01 = +1). The values are format data (iq1_grid.cpp, generated).
// Thread-safety: an immutable table; safe to read concurrently.
#include <cstdint>

namespace vela {

inline constexpr int kIq1GridSize = 2048;  // indices are 11 bits: every index is in bounds

// [2048] entries of 8 int8 values in {-1, 0, +1}.
extern const uint64_t kIq1Grid[kIq1GridSize];

// Value of element j (0..7) of entry `index` (0..2047).
inline int iq1_grid_value(uint32_t index, int j) {
  return int(int8_t(uint8_t(kIq1Grid[index & (kIq1GridSize - 1)] >> (8 * j))));
}

}  // namespace vela

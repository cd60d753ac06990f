#pragma once
// Float-to-integer rounding as ggml's quantizers do it (internal to the quantizers).
#include <cstdint>
#include <cstring>

namespace vela::quant_detail {

// Rounds to the nearest integer, ties to even, for |x| < 2^22. Adding 1.5 * 2^23 pushes the
// value into the binade where the float's unit in the last place is 1, so the FPU's own
// round-to-nearest-even does the rounding and the integer sits in the low mantissa bits.
// This is how ggml's K-quant and Q8_K quantizers round; it must stay bit-compatible with them.
inline int round_nearest_even(float x) {
  const float shifted = x + 12582912.0f;  // 1.5 * 2^23
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace vela::quant_detail

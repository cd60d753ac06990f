#pragma once
// fp32 decoding of the E8-lattice codebook types (layouts and value formula in blocks_iq23.h).
// Thread-safety: pure functions over immutable tables; safe to call concurrently.
#include <cstdint>

namespace vela {

// Each: src holds n elements (n a multiple of 256: whole super-blocks) of the type; dst is [n]
// f32. The signature of a to_float kernel.
void dequantize_row_iq2_xxs(const void* src, float* dst, int64_t n);
void dequantize_row_iq2_xs(const void* src, float* dst, int64_t n);
void dequantize_row_iq2_s(const void* src, float* dst, int64_t n);
void dequantize_row_iq3_xxs(const void* src, float* dst, int64_t n);
void dequantize_row_iq3_s(const void* src, float* dst, int64_t n);

}  // namespace vela

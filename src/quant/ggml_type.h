#pragma once
// Tensor element types as numbered in the GGUF format, and their block geometry.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vela {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  std::string_view name;
  int64_t block_size;  // elements per block
  int64_t type_size;   // bytes per block
};

// Geometry of a block type GGUF files hold (weights) or the engine uses internally (Q8_1, Q8_K
// activations); nullopt for other type numbers (I8..I64, F64, removed and unknown types).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);

// Human-readable name of any type number, including unsupported ones ("type 17" if unknown).
std::string ggml_type_name(uint32_t type);

// Whether weights of this type can be loaded (F32, F16, BF16 and the quantized types vela has
// kernels for).
bool is_supported_weight_type(uint32_t type);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline int64_t row_bytes(const GgmlTypeInfo& info, int64_t n) {
  return n / info.block_size * info.type_size;
}

}  // namespace vela

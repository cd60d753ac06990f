// Helpers shared by the kernel tests of the low-bit weight types: row sizes, the scalar table and
// its decoder, and every kernel table this CPU runs, to check against the scalar one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/type_traits.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/blocks.h"

namespace vela::test {

// Bytes of one row of n elements of `type` (n a multiple of the block size).
inline size_t bytes_of(GgmlType type, int64_t n) {
  return size_t(row_bytes(*ggml_type_info(uint32_t(type)), n));
}

// The scalar kernel table's entry for `type`: the reference every other table is checked against.
inline const TypeTraits& scalar_traits(GgmlType type) {
  return *type_traits_for(KernelIsa::kScalar, type);
}

// Decodes one row with the scalar table. row: bytes_of(type, n); returns [n] f32.
inline std::vector<float> decode_scalar(GgmlType type, const void* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  scalar_traits(type).to_float(row, out.data(), n);
  return out;
}

// Q8_K activations whose quants are the integers themselves: each block starts with 127, so its
// scale is exactly 1; the rest are in [-limit, limit]. Returns bytes_of(Q8_K, n).
inline std::vector<uint8_t> make_integer_activations(int64_t n, int limit, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-limit, limit);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 256 == 0 ? 127.0f : float(value(rng));
  std::vector<uint8_t> act(bytes_of(GgmlType::Q8_K, n));
  scalar_traits(GgmlType::Q8_K).from_float(x.data(), act.data(), n);
  return act;
}

// A kernel table under test: its name (in test names) and its entry for a type.
struct Table {
  std::string name;
  const TypeTraits* (*get)(GgmlType);
};

// The AVX-512 table built with the given extensions, so the plain (non-VNNI) kernels are tested
// on a CPU with VNNI too; only used where the CPU runs AVX-512.
template <bool kVnni>
const TypeTraits* avx512_variant(GgmlType type) {
  static const kernels::TraitsTable table = [] {
    kernels::TraitsTable t;
    for (size_t i = 0; i < t.size(); ++i) {
      const TypeTraits* s = type_traits_for(KernelIsa::kAvx2, static_cast<GgmlType>(i));
      t[i] = s != nullptr ? *s : TypeTraits{GgmlType::F32, nullptr, nullptr, nullptr};
    }
    kernels::avx512::register_kernels(t, {.vnni = kVnni, .bf16 = false});
    return t;
  }();
  return &table[static_cast<size_t>(type)];
}

// Every kernel table this CPU runs: scalar, avx2, and for AVX-512 the default, VNNI and plain
// variants.
inline std::vector<Table> tables() {
  std::vector<Table> out;
  for (const KernelIsa isa : supported_kernel_isas()) {
    switch (isa) {
      case KernelIsa::kScalar:
        out.push_back(
            {"scalar", [](GgmlType t) { return type_traits_for(KernelIsa::kScalar, t); }});
        break;
      case KernelIsa::kAvx2:
        out.push_back({"avx2", [](GgmlType t) { return type_traits_for(KernelIsa::kAvx2, t); }});
        break;
      case KernelIsa::kAvx512:
        out.push_back(
            {"avx512", [](GgmlType t) { return type_traits_for(KernelIsa::kAvx512, t); }});
        out.push_back({"avx512_vnni", avx512_variant<true>});
        out.push_back({"avx512_plain", avx512_variant<false>});
        break;
    }
  }
  return out;
}

}  // namespace vela::test

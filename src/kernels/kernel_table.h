#pragma once
// Internal: the per-instruction-set kernel tables behind type_traits(). Each SIMD file fills the
// entries it implements in a copy of the scalar table, so a type it leaves alone keeps the
// scalar kernels. Activation conversions (from_float) must give bit-identical results in every
// table, so that which table runs never changes what a matmul quantizes.
#include <array>
#include <cstddef>

#include "kernels/type_traits.h"

namespace vela::kernels {

// Indexed by the GGUF type number.
constexpr size_t kTraitsTableSize = 40;
using TraitsTable = std::array<TypeTraits, kTraitsTableSize>;

inline void set_entry(TraitsTable& t, GgmlType type, const TypeTraits& traits) {
  t[static_cast<size_t>(type)] = traits;
}

// Defined in x86/avx2/*.cpp and x86/avx512/*.cpp; each is only called when the CPU has the ISA.
void register_avx2_kernels(TraitsTable& table);
void register_avx512_kernels(TraitsTable& table);

}  // namespace vela::kernels

#pragma once
// Subnormal inputs read as zero and subnormal results flush to zero (MXCSR DAZ and FTZ) for the
// calling thread while an instance lives; the kernels that widen BF16 for FMA run under it, so
// that each FMA rounds and flushes as vdpbf16ps does (packed_gemm.h: Bf16Kernel).
// Thread-safety: affects only the calling thread, which must also destroy it.
#include <xmmintrin.h>

namespace vela::kernels {

class FlushSubnormals {
 public:
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kDaz | kFtz); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  static constexpr unsigned kDaz = 1u << 6, kFtz = 1u << 15;
  unsigned saved_;
};

}  // namespace vela::kernels

// The element-wise kernels of every level this CPU has against the scalar reference: SiLU x up
// within 4e-7 relative (a few ulp: the polynomial exp and the sigmoid's division), over the whole
// range where exp(-g) would overflow too, every tail length, and without writing past the row.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/elementwise.h"

namespace vela::kernels {
namespace {

TEST(ElementwiseKernels, SiluMulMatchesReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> gate(300), up(300);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = normal(rng), up[i] = normal(rng);
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 100.0f, -100.0f, -1e4f, 1e4f};
  for (size_t i = 0; i < std::size(specials); ++i) gate[i * 11] = specials[i];
  const ElementwiseKernels& ref = elementwise_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const ElementwiseKernels& kern = elementwise_kernels(isa);
    for (int64_t n : {1, 15, 16, 17, 100, 300}) {
      SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " n=" + std::to_string(n));
      std::vector<float> want(gate.begin(), gate.begin() + n), got(gate.begin(), gate.begin() + n);
      got.push_back(-5.0f);
      ref.silu_mul(want.data(), up.data(), n);
      kern.silu_mul(got.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[size_t(i)], want[size_t(i)], 4e-7 * std::fabs(want[size_t(i)]) + 1e-37)
            << "gate " << gate[size_t(i)];
      ASSERT_EQ(got[size_t(n)], -5.0f) << "wrote past the row";
    }
  }
}

}  // namespace
}  // namespace vela::kernels

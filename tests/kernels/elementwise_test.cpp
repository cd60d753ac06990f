// The element-wise kernels of every level this CPU has against the scalar reference: SiLU x up
// within 4e-7 relative (a few ulp: the polynomial exp and the sigmoid's division), tanh-GELU x up
// within 1e-6 of 0.5 |x up| (see there), over the whole range where exp would overflow too,
// every tail length, and without writing past the row.
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
  const float specials[] = {0.0f,   -0.0f,  1e-30f,  -1e-30f, 88.0f,
                            -88.0f, 100.0f, -100.0f, -1e4f,   1e4f};
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

TEST(ElementwiseKernels, GeluTanhMulMatchesReference) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> gate(300), up(300);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = normal(rng), up[i] = normal(rng);
  // 0, tiny, the saturated tanh (|u| > 9 from |x| > ~4.5), |x| where x^3 is huge but finite.
  const float specials[] = {0.0f,   -0.0f,  1e-30f,  -1e-30f, 30.0f, -30.0f, 88.0f,
                            -88.0f, 100.0f, -100.0f, -1e4f,   1e4f,  5.0f,   -5.0f};
  for (size_t i = 0; i < std::size(specials); ++i) gate[i * 11] = specials[i];
  const ElementwiseKernels& ref = elementwise_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const ElementwiseKernels& kern = elementwise_kernels(isa);
    for (int64_t n : {1, 7, 15, 16, 17, 31, 100, 300}) {
      SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " n=" + std::to_string(n));
      std::vector<float> want(gate.begin(), gate.begin() + n), got(gate.begin(), gate.begin() + n);
      got.push_back(-5.0f);
      ref.gelu_tanh_mul(want.data(), up.data(), n);
      kern.gelu_tanh_mul(got.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float x = gate[size_t(i)], u = up[size_t(i)];
        const double diff = std::fabs(double(got[size_t(i)]) - double(want[size_t(i)]));
        // gelu x up = 0.5 x up (1 + t). The levels' t = tanh(.) differ by an absolute few 1e-8
        // (std::tanh against (1 - e) / (1 + e) from a polynomial exp), and their arguments by an
        // ulp (an fma against two roundings), which moves t by (1 - t^2) |u| ulp <= ~0.5 ulp;
        // with the products' roundings that is up to 5.8e-7 of 0.5 |x up| (measured with a
        // scalar emulation of the AVX-512 kernel over 4e7 inputs, x in [-12, 12], |up| < 4).
        // Relative to the result it is unbounded for x < 0, where 1 + t cancels to 0, hence the
        // bound on 0.5 |x up|: 1.2e-6, 2x the measured.
        ASSERT_LE(diff, 1.2e-6 * std::fabs(0.5 * double(x) * double(u))) << "gate " << x;
        // Where x >= 0, 1 + t is in [1, 2] and nothing cancels: a few ulp of the result (3.3e-7
        // measured the same way); 6e-7 relative.
        if (x >= 0.0f) {
          ASSERT_LE(diff, 6e-7 * std::fabs(double(want[size_t(i)]))) << "gate " << x;
        }
      }
      ASSERT_EQ(got[size_t(n)], -5.0f) << "wrote past the row";
    }
  }
}

TEST(ElementwiseKernels, GeluTanhReferenceIsTheFormula) {
  // The scalar reference against the formula in double, so the table's baseline is itself right:
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) up. On 0.5 |x up| for the same reason as
  // above: rounding u (a few ulp) moves t by (1 - t^2) |u| of that, tanh and 1 + t round once,
  // and the three products once each: 3.0e-7 measured with up = 1, one more product's rounding
  // (1.2e-7) with up; 1e-6 is 2x that.
  const ElementwiseKernels& ref = elementwise_kernels(KernelIsa::kScalar);
  std::vector<float> x, up;
  for (float v = -12.0f; v <= 12.0f; v += 0.0173f) x.push_back(v), up.push_back(1.0f + 0.1f * v);
  for (float v : {0.0f, 30.0f, -30.0f, 100.0f, -100.0f}) x.push_back(v), up.push_back(-2.0f);
  std::vector<float> got = x;
  ref.gelu_tanh_mul(got.data(), up.data(), int64_t(got.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    const double want = 0.5 * xd *
                        (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) *
                                         (xd + 0.044715 * xd * xd * xd))) *
                        up[i];
    ASSERT_LE(std::fabs(got[i] - want), 1e-6 * std::fabs(0.5 * xd * up[i])) << "x " << x[i];
  }
}

}  // namespace
}  // namespace vela::kernels

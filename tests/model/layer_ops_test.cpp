// The layer operations against scalar formulas in double written here: soft-capping, the gated
// FFN activations (SiLU, tanh-GELU) of the kernel level in use over the whole float range that
// matters, and RMS norm applied per head (the Q/K norms) as one call over all heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "model/layer_ops.h"

namespace vela {
namespace {

TEST(SoftCap, CapTimesTanh) {
  const float cap = 30.0f;  // gemma2's final logit cap
  std::vector<float> x;
  for (float v = -400.0f; v <= 400.0f; v += 0.37f) x.push_back(v);
  for (float v : {0.0f, 1e-6f, -1e-6f, 1e4f, -1e4f, 3e38f, -3e38f}) x.push_back(v);
  std::sort(x.begin(), x.end());
  std::vector<float> y = x;
  soft_cap(y.data(), int64_t(y.size()), cap);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = cap * std::tanh(double(x[i]) / cap);
    // x / cap rounds (6e-8 relative), tanh and the product each round once more: a few ulp of a
    // value below 30, whose ulp is at most 1.9e-6; 4e-6 leaves 2x.
    EXPECT_NEAR(y[i], want, 4e-6) << "x " << x[i];
    EXPECT_LE(std::fabs(y[i]), cap) << "x " << x[i];  // float tanh reaches 1 for |x| > ~9 cap
    if (i > 0) {
      EXPECT_LE(y[i - 1], y[i]) << "not monotonic at x " << x[i];
    }
    if (std::fabs(x[i]) < 0.1f * cap) {
      // Strictly inside the cap where tanh is far from 1 in float.
      EXPECT_LT(std::fabs(y[i]), cap) << "x " << x[i];
    }
  }
  // Near 0 soft-capping is the identity to first order: tanh(u) = u - u^3/3, so at |x| <= 0.3
  // the relative change is (x/cap)^2/3 <= 3.3e-5, plus ~3 float roundings (2e-7).
  for (float v : {0.3f, -0.3f, 0.01f, -0.01f, 1e-6f}) {
    float y1 = v;
    soft_cap(&y1, 1, cap);
    EXPECT_NEAR(y1, v, 3.6e-5 * std::fabs(v)) << "x " << v;
  }
  float zero = 0.0f;
  soft_cap(&zero, 1, cap);
  EXPECT_EQ(zero, 0.0f);
}

double silu_ref(double x) {
  return x / (1.0 + std::exp(-x));
}

double gelu_tanh_ref(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// Inputs over the whole range that matters: fine steps where the activations bend, the large
// magnitudes where exp/tanh saturate, and 0.
std::vector<float> activation_inputs() {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.013f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-20f, -1e-20f, 30.0f, -30.0f, 88.0f, -88.0f, 100.0f, -100.0f})
    x.push_back(v);
  return x;
}

TEST(GatedActivation, SiluTimesUp) {
  const std::vector<float> x = activation_inputs();
  std::vector<float> up(x.size());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  for (float& u : up) u = uniform(rng);
  std::vector<float> got = x;
  gated_activation(FfnActivation::kSilu, got.data(), up.data(), int64_t(got.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = silu_ref(x[i]) * up[i];
    // exp, the sum, the division and the product round once each, plus a few ulp for a
    // polynomial exp: 1e-6 relative (~8 ulp). The floor covers silu(-100) = -3.7e-42, which
    // is subnormal in float (and 0 where exp(100) overflows to inf): at most ~4e-42 * |up|.
    EXPECT_NEAR(got[i], want, 1e-6 * std::fabs(want) + 1.2e-41) << "x " << x[i];
  }
}

TEST(GatedActivation, GeluTanhTimesUp) {
  const std::vector<float> x = activation_inputs();
  std::vector<float> up(x.size());
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  for (float& u : up) u = uniform(rng);
  std::vector<float> got = x;
  gated_activation(FfnActivation::kGeluTanh, got.data(), up.data(), int64_t(got.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = gelu_tanh_ref(x[i]) * up[i];
    // gelu = 0.5 x up (1 + t) with t = tanh(u). Where x < 0, 1 + t cancels (down to 0 at
    // x < -5 in float), so its error is absolute: tanh rounds to a few 1e-8 near |t| = 1, the
    // sum to 6e-8, and u's relative rounding (~3 ulp) moves t by (1 - t^2) |u| 3.6e-7 <= 1.6e-7.
    // With the products' roundings: 3.0e-7 of |0.5 x up| measured for the scalar kernel and a
    // scalar emulation of the AVX-512 one (up = 1), up to 1.2e-7 more for the product with up;
    // 8e-7 is 2x that.
    const double scale = std::fabs(0.5 * double(x[i]) * up[i]);
    EXPECT_LE(std::fabs(double(got[i]) - want), 8e-7 * scale) << "x " << x[i] << " up " << up[i];
  }
  // Saturation: gelu(x) = x for large x, 0 (not NaN) for very negative x.
  float big[4] = {30.0f, 100.0f, -30.0f, -100.0f};
  const float ones[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  gated_activation(FfnActivation::kGeluTanh, big, ones, 4);
  EXPECT_EQ(big[0], 30.0f);
  EXPECT_EQ(big[1], 100.0f);
  EXPECT_EQ(big[2], 0.0f);
  EXPECT_EQ(big[3], 0.0f);
}

// gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1), in double.
TEST(GatedActivation, SwigluClampedTimesUpPlusOne) {
  std::vector<float> x = activation_inputs();
  std::vector<float> up(x.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-12.0f, 12.0f);  // past the clamp both ways
  for (float& u : up) u = uniform(rng);
  std::vector<float> got = x;
  gated_activation(FfnActivation::kSwigluClamped, got.data(), up.data(), int64_t(got.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double g = std::min(double(x[i]), 7.0);
    const double u = std::clamp(double(up[i]), -7.0, 7.0);
    const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    // The exponent -1.702 g rounds twice in float (1.702 and the product: 1.2e-7 of |1.702 g|
    // absolute, which is the sigmoid tail's relative error), then exp, sum, division and
    // products: 1e-6 relative more; the floor covers the subnormal tail of very negative gates.
    const double exponent_error = 1.2e-7 * std::fabs(1.702 * g);
    EXPECT_NEAR(got[i], want, (1e-6 + exponent_error) * std::fabs(want) + 1e-38)
        << "x " << x[i] << " up " << up[i];
  }
  // The clamps: gate 10 acts as 7, up -10 as -7 and up 10 as 7.
  float g[3] = {10.0f, 10.0f, 1.0f};
  const float u[3] = {-10.0f, 10.0f, 0.0f};
  gated_activation(FfnActivation::kSwigluClamped, g, u, 3);
  const double at7 = 7.0 / (1.0 + std::exp(-1.702 * 7.0));
  EXPECT_NEAR(g[0], at7 * -6.0, 1e-5);
  EXPECT_NEAR(g[1], at7 * 8.0, 1e-5);
  EXPECT_NEAR(g[2], 1.0 / (1.0 + std::exp(-1.702)), 1e-6);  // up 0: the gate's own value
}

TEST(GatedActivation, TheTwoActivationsDiffer) {
  // gelu(1) = 0.8412 and silu(1) = 0.7311: the dispatch must pick the family's function.
  float s = 1.0f, g = 1.0f;
  const float one = 1.0f;
  gated_activation(FfnActivation::kSilu, &s, &one, 1);
  gated_activation(FfnActivation::kGeluTanh, &g, &one, 1);
  // Within 1e-6 of the double values (a few ulp).
  EXPECT_NEAR(s, silu_ref(1.0), 1e-6);
  EXPECT_NEAR(g, gelu_tanh_ref(1.0), 1e-6);
}

TEST(RmsNorm, PerHeadNormIsEachHeadNormalisedAlone) {
  // Q/K norms: one call over n_tokens * n_heads rows of head_dim, with one weight of head_dim.
  const int64_t n_tokens = 5, n_heads = 4, head_dim = 32;
  const float eps = 1e-6f;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * n_heads * head_dim));
  std::vector<float> w(static_cast<size_t>(head_dim));
  for (float& v : x) v = normal(rng);
  for (size_t h = 0; h < size_t(n_heads); ++h)  // heads of very different magnitudes
    for (size_t t = 0; t < size_t(n_tokens); ++t)
      for (size_t d = 0; d < size_t(head_dim); ++d)
        x[(t * size_t(n_heads) + h) * size_t(head_dim) + d] *= float(std::pow(10.0, double(h) - 1));
  for (float& v : w) v = 1.0f + 0.5f * normal(rng);
  std::vector<float> y(x.size());
  rms_norm(x.data(), w.data(), n_tokens * n_heads, head_dim, eps, y.data());
  std::vector<float> in_place = x;
  rms_norm(in_place.data(), w.data(), n_tokens * n_heads, head_dim, eps, in_place.data());
  EXPECT_EQ(in_place, y);  // y may alias x
  for (int64_t r = 0; r < n_tokens * n_heads; ++r) {
    const float* xr = x.data() + r * head_dim;
    double sum = 0;
    for (int64_t d = 0; d < head_dim; ++d) sum += double(xr[d]) * xr[d];
    const double scale = 1.0 / std::sqrt(sum / double(head_dim) + eps);
    for (int64_t d = 0; d < head_dim; ++d) {
      const double want = xr[d] * scale * w[size_t(d)];
      // The scale goes through ~4 float roundings (mean, + eps, sqrt, 1 / s: <= 1.8e-7 with the
      // sqrt halving its input's), then two products (1.2e-7): 6e-7 relative leaves 2x.
      ASSERT_NEAR(y[size_t(r * head_dim + d)], want, 6e-7 * std::fabs(want))
          << "row " << r << " dim " << d;
    }
  }
}

}  // namespace
}  // namespace vela

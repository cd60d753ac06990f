// RoPE against plain scalar formulas written here: the per-pair frequencies of every variant
// (plain, linear, per-pair factors, YaRN from the correction-dimension formula), the cos/sin
// tables, and the rotation of both pairings, including heads only partly rotated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "model/rope.h"

namespace vela {
namespace {

// base^(-2i / n_rot) in double: the unscaled frequency of pair i.
double plain_freq(double base, int32_t i, int32_t n_rot) {
  return std::pow(base, -2.0 * i / double(n_rot));
}

TEST(RopeFrequencies, PlainIsBasePower) {
  RopeConfig rope;
  rope.freq_base = 10000.0f;
  rope.attn_factor = 1.0f;
  const int32_t n_rot = 128;
  const RopeFrequencies f = rope_frequencies(rope, n_rot, {});
  ASSERT_EQ(f.freqs.size(), size_t(n_rot / 2));
  EXPECT_EQ(f.mscale, 1.0f);
  // Exact: the power is computed in double (error ~1e-16 relative), so its float rounding is the
  // correctly rounded value of base^(-2i/n_rot).
  for (int32_t i = 0; i < n_rot / 2; ++i)
    EXPECT_EQ(f.freqs[size_t(i)], float(plain_freq(10000.0, i, n_rot))) << "pair " << i;
  EXPECT_EQ(f.freqs[0], 1.0f);  // pair 0 turns one radian per position
}

TEST(RopeFrequencies, LinearScalesEveryPair) {
  RopeConfig plain;
  plain.freq_base = 500000.0f;
  RopeConfig linear = plain;
  linear.scaling = RopeScaling::kLinear;
  linear.freq_scale = 0.25f;
  const int32_t n_rot = 64;
  const RopeFrequencies p = rope_frequencies(plain, n_rot, {});
  const RopeFrequencies l = rope_frequencies(linear, n_rot, {});
  ASSERT_EQ(l.freqs.size(), size_t(n_rot / 2));
  EXPECT_EQ(l.mscale, 1.0f);  // linear scaling leaves the magnitude alone
  // Exact: a quarter is a power of two, so scaling commutes with the float rounding.
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    EXPECT_EQ(l.freqs[size_t(i)], float(plain_freq(500000.0, i, n_rot) * 0.25)) << "pair " << i;
    EXPECT_EQ(l.freqs[size_t(i)], p.freqs[size_t(i)] * 0.25f) << "pair " << i;
  }
}

// yarn_ext_factor 0 turns the ramp off: every pair interpolated, as linear scaling, and the
// magnitude left alone (ggml's rope_yarn with ext_factor 0).
TEST(RopeFrequencies, YarnWithoutExtrapolationInterpolatesEveryPair) {
  RopeConfig yarn;
  yarn.freq_base = 1e6f;
  yarn.scaling = RopeScaling::kYarn;
  yarn.freq_scale = 0.25f;
  yarn.original_context = 64;
  yarn.yarn_ext_factor = 0.0f;
  const int32_t n_rot = 64;
  const RopeFrequencies f = rope_frequencies(yarn, n_rot, {});
  EXPECT_EQ(f.mscale, 1.0f);
  // Exact, as for linear scaling: a quarter is a power of two.
  for (int32_t i = 0; i < n_rot / 2; ++i)
    EXPECT_EQ(f.freqs[size_t(i)], float(plain_freq(1e6, i, n_rot) * 0.25)) << "pair " << i;
}

TEST(RopeFrequencies, FactorsDivideEachPair) {
  const int32_t n_rot = 16;
  // Llama-3.1 rope_freqs style: 1 for the fast pairs, up to the scaling factor for the slow ones,
  // with non-powers of two so that the division really rounds.
  const std::vector<float> factors = {1.0f, 1.0f, 1.0f, 1.5f, 2.0f, 3.7f, 7.9f, 8.0f};
  for (RopeScaling scaling : {RopeScaling::kNone, RopeScaling::kLongRope}) {
    SCOPED_TRACE(scaling == RopeScaling::kNone ? "none" : "longrope");
    RopeConfig rope;
    rope.freq_base = 10000.0f;
    rope.scaling = scaling;
    rope.attn_factor = 1.1902f;  // LongRoPE's magnitude is the file's attention factor as is
    const RopeFrequencies f = rope_frequencies(rope, n_rot, factors);
    ASSERT_EQ(f.freqs.size(), factors.size());
    EXPECT_EQ(f.mscale, 1.1902f);
    // Exact: the double quotient (error ~1e-16) rounds to the correctly rounded float.
    for (int32_t i = 0; i < n_rot / 2; ++i)
      EXPECT_EQ(f.freqs[size_t(i)], float(plain_freq(10000.0, i, n_rot) / factors[size_t(i)]))
          << "pair " << i;
  }
}

// YaRN from its definition: the fractional pair that makes n_turns full turns over orig_ctx
// positions; pairs up to `low` keep their frequency, pairs from `high` on are interpolated.
struct YarnReference {
  double low, high;
  std::vector<double> freqs;
  double mscale;
};

YarnReference yarn_reference(const RopeConfig& r, int32_t n_rot) {
  const double base = r.freq_base, ctx = r.original_context;
  const auto corr_dim = [&](double beta) {
    return n_rot * std::log(ctx / (beta * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
  };
  YarnReference y;
  y.low = std::max(0.0, std::floor(corr_dim(r.yarn_beta_fast)));
  y.high = std::min(double(n_rot - 1), std::ceil(corr_dim(r.yarn_beta_slow)));
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    const double t = std::clamp((i - y.low) / std::max(0.001, y.high - y.low), 0.0, 1.0);
    const double ramp = (1.0 - t) * r.yarn_ext_factor;
    y.freqs.push_back(plain_freq(base, i, n_rot) * (r.freq_scale * (1.0 - ramp) + ramp));
  }
  y.mscale = r.attn_factor * (1.0 + 0.1 * std::log(1.0 / r.freq_scale));
  return y;
}

TEST(RopeFrequencies, YarnBlendsAlongTheRamp) {
  struct Case {
    float base;
    int32_t n_rot, original_context;
    double want_low, want_high;  // worked out by hand from corr_dim
  };
  // base 1e6, 64 dims, 64 positions: corr_dim(32) = -2.65 -> low 0, corr_dim(1) = 5.38 -> high 6.
  // base 1e4, 128 dims, 4096 positions: corr_dim(32) = 20.9 -> low 20, corr_dim(1) = 45.0 -> 46,
  // so that some pairs lie strictly below the ramp too.
  for (const Case& c : {Case{1e6f, 64, 64, 0, 6}, Case{1e4f, 128, 4096, 20, 46}}) {
    SCOPED_TRACE("n_rot " + std::to_string(c.n_rot));
    RopeConfig rope;
    rope.freq_base = c.base;
    rope.scaling = RopeScaling::kYarn;
    rope.freq_scale = 0.25f;
    rope.original_context = c.original_context;
    rope.yarn_beta_fast = 32.0f;
    rope.yarn_beta_slow = 1.0f;
    rope.yarn_ext_factor = 1.0f;
    rope.attn_factor = 1.0f;
    const RopeFrequencies f = rope_frequencies(rope, c.n_rot, {});
    const YarnReference want = yarn_reference(rope, c.n_rot);
    ASSERT_EQ(want.low, c.want_low);
    ASSERT_EQ(want.high, c.want_high);
    ASSERT_EQ(f.freqs.size(), size_t(c.n_rot / 2));
    // 1 + 0.1 ln 4 = 1.1386; within 1 float ulp (1.2e-7) of the double value.
    EXPECT_NEAR(f.mscale, 1.0 + 0.1 * std::log(4.0), 1.2e-7);
    EXPECT_NEAR(f.mscale, want.mscale, 1.2e-7);
    for (int32_t i = 0; i < c.n_rot / 2; ++i) {
      const float got = f.freqs[size_t(i)];
      const double plain = plain_freq(c.base, i, c.n_rot);
      // The same double formula, evaluated in another order: within 2 ulp after float rounding.
      EXPECT_NEAR(got, want.freqs[size_t(i)], 2.4e-7 * want.freqs[size_t(i)]) << "pair " << i;
      if (i <= want.low) {
        EXPECT_EQ(got, float(plain)) << "pair " << i << " extrapolates: original frequency";
      } else if (i >= want.high) {
        EXPECT_EQ(got, float(plain * 0.25)) << "pair " << i << " interpolates: a quarter";
      } else {
        EXPECT_LT(got, float(plain)) << "pair " << i << " on the ramp";
        EXPECT_GT(got, float(plain * 0.25)) << "pair " << i << " on the ramp";
      }
    }
  }
}

TEST(RopeFrequencies, YarnAttnFactorMultipliesMscale) {
  RopeConfig rope;
  rope.freq_base = 1e6f;
  rope.scaling = RopeScaling::kYarn;
  rope.freq_scale = 0.125f;
  rope.original_context = 4096;
  rope.attn_factor = 0.5f;
  const RopeFrequencies f = rope_frequencies(rope, 64, {});
  // 0.5 (1 + 0.1 ln 8) = 0.60397; within 1 float ulp (6e-8 at this size).
  EXPECT_NEAR(f.mscale, 0.5 * (1.0 + 0.1 * std::log(8.0)), 6e-8);
}

TEST(RopeTables, CosSinOfPositionTimesFrequency) {
  const std::vector<float> freqs = {1.0f, 0.31f, 0.0178f, 1e-4f};
  const int32_t n_rot = int32_t(freqs.size()) * 2;
  const std::vector<int32_t> positions = {0, 1, 7, 1000, 131071};
  for (float mscale : {1.0f, 1.1386f}) {
    std::vector<float> cs(positions.size() * freqs.size() * 2, -9.0f);
    rope_tables(positions.data(), int64_t(positions.size()), freqs.data(), n_rot, mscale,
                cs.data());
    for (size_t t = 0; t < positions.size(); ++t)
      for (size_t i = 0; i < freqs.size(); ++i) {
        // theta in double from the float frequency: at position 131071 theta ~ 1.3e5 radians, so a
        // float theta would already be off by ~4e-3; double keeps cos/sin to float rounding.
        const double theta = double(positions[t]) * double(freqs[i]);
        const size_t k = (t * freqs.size() + i) * 2;
        // 2 ulp of a value of magnitude <= 1.14 (the product rounds once, then the float once).
        EXPECT_NEAR(cs[k], std::cos(theta) * mscale, 2.5e-7)
            << "pos " << positions[t] << " i " << i;
        EXPECT_NEAR(cs[k + 1], std::sin(theta) * mscale, 2.5e-7)
            << "pos " << positions[t] << " i " << i;
      }
  }
}

// Rotates pairs (a, b) of the first n_rot dims of each head by pos * freqs[i], in double.
std::vector<double> rotate_reference(const std::vector<float>& x, const std::vector<int32_t>& pos,
                                     int32_t n_heads, int32_t head_dim, int32_t n_rot,
                                     RopeStyle style, const std::vector<float>& freqs,
                                     double mscale) {
  std::vector<double> out(x.begin(), x.end());
  const int32_t half = n_rot / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int32_t h = 0; h < n_heads; ++h) {
      double* v = out.data() + (int64_t(t) * n_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const int32_t a = style == RopeStyle::kNormal ? 2 * i : i;
        const int32_t b = style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
        const double theta = double(pos[t]) * double(freqs[size_t(i)]);
        const double c = std::cos(theta) * mscale, s = std::sin(theta) * mscale;
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  return out;
}

TEST(RopeApply, RotatesPairsOfBothStyles) {
  struct Case {
    RopeStyle style;
    int32_t head_dim, n_rot;
  };
  const Case cases[] = {{RopeStyle::kNormal, 16, 16},
                        {RopeStyle::kNeox, 16, 16},
                        {RopeStyle::kNormal, 24, 8},  // partial rotation: dims 8.. untouched
                        {RopeStyle::kNeox, 24, 8}};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<int32_t> positions = {0, 3, 250};
  const int32_t n_heads = 3;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.style == RopeStyle::kNormal ? "normal" : "neox") + " head_dim " +
                 std::to_string(c.head_dim) + " n_rot " + std::to_string(c.n_rot));
    RopeConfig rope;
    rope.freq_base = 10000.0f;
    const RopeFrequencies f = rope_frequencies(rope, c.n_rot, {});
    const float mscale = 1.25f;  // not 1, so that a missing magnitude would show
    const int64_t n_tokens = int64_t(positions.size());
    std::vector<float> cs(size_t(n_tokens * c.n_rot));
    rope_tables(positions.data(), n_tokens, f.freqs.data(), c.n_rot, mscale, cs.data());
    std::vector<float> x(size_t(n_tokens * n_heads * c.head_dim));
    for (float& v : x) v = normal(rng);
    const std::vector<double> want =
        rotate_reference(x, positions, n_heads, c.head_dim, c.n_rot, c.style, f.freqs, mscale);
    std::vector<float> got = x;
    rope_apply(got.data(), n_tokens, n_heads, c.head_dim, c.n_rot, c.style, cs.data());
    for (size_t j = 0; j < got.size(); ++j) {
      const int32_t d = int32_t(j % size_t(c.head_dim));
      if (d >= c.n_rot) {
        ASSERT_EQ(got[j], x[j]) << "dim " << d << " is past n_rot: untouched";
        continue;
      }
      // Inputs ~N(0,1) (|x| < 6), cos/sin rounded to float (6e-8 each) and two float products
      // and a sum: an absolute error of a few 1e-7 per |x| of the pair; 2e-6 leaves 3x margin.
      ASSERT_NEAR(got[j], want[j], 2e-6) << "element " << j << " dim " << d;
    }
    // Position 0 is the identity rotation (cos 1, sin 0), up to mscale.
    for (int32_t j = 0; j < n_heads * c.head_dim; ++j) {
      const int32_t d = j % c.head_dim;
      EXPECT_EQ(got[size_t(j)], d < c.n_rot ? x[size_t(j)] * mscale : x[size_t(j)]);
    }
  }
}

TEST(RopeApply, PairingDiffersBetweenStyles) {
  // One head of 4 dims, a quarter turn on pair 0 only (pair 1's frequency is 0): kNormal turns
  // dims (0, 1), kNeox turns dims (0, 2).
  const float cs[4] = {0.0f, 1.0f, 1.0f, 0.0f};  // pair 0: cos 0, sin 1; pair 1: identity
  float normal[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float neox[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  rope_apply(normal, 1, 1, 4, 4, RopeStyle::kNormal, cs);
  rope_apply(neox, 1, 1, 4, 4, RopeStyle::kNeox, cs);
  // (x0, x1) -> (x0 c - x1 s, x0 s + x1 c) = (-x1, x0).
  EXPECT_EQ(std::vector<float>(normal, normal + 4), (std::vector<float>{-2.0f, 1.0f, 3.0f, 4.0f}));
  EXPECT_EQ(std::vector<float>(neox, neox + 4), (std::vector<float>{-3.0f, 2.0f, 1.0f, 4.0f}));
}

}  // namespace
}  // namespace vela

// Quantizers of IQ4_NL, IQ4_XS and MXFP4 (quant/quantize_nonlinear4.h): round trips of random
// rows within measured error bounds, no scale beating the IQ4 scale search, the importance doing
// its job, MXFP4 following ggml's exponent and rounding rule, degenerate and extreme rows giving
// finite blocks, and re-quantizing decoded rows being stable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks_nonlinear4.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"
#include "quant/quantize_nonlinear4.h"
#include "quant_test_rows.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr int64_t kCols = 2048;  // row length of the random tests
constexpr int kRows = 24;

const GgmlType kTypes[] = {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

using test::accumulate;
using test::name_of;
using test::quantize;
using test::random_importance;
using test::random_row;
using test::round_trip;
using test::row_bytes;

// Relative RMS error bounds, a little above what these quantizers measure on these rows (printed
// by RandomRowsWithinRmsBound: IQ4_NL 0.0739 / 0.1225 / 0.0818, IQ4_XS 0.0744 / 0.1238 /
// 0.0822, MXFP4 0.1149 / 0.1719 / 0.1134 for normal / outliers / with importance).
// Reasoning for their size: 16 levels fitted to a 32-element block of normal data leave about
// 0.08 of the signal as error (IQ4_XS a little more: its 6-bit sub-block scales are coarser
// than fp16); MXFP4's power-of-two scale and its 8 magnitudes 0 .. 6, sparse at the top, about
// 0.12. An outlier stretches its block's scale, so the bulk of that block gets coarser. With an
// importance vector the plain (unweighted) error grows: the fit spends its accuracy on the
// important columns.
struct Bounds {
  double plain, outliers, weighted;
};
Bounds rms_bounds(GgmlType type) {
  switch (type) {
    case GgmlType::IQ4_NL:
      return {0.078, 0.128, 0.086};
    case GgmlType::IQ4_XS:
      return {0.079, 0.130, 0.087};
    case GgmlType::MXFP4:
      return {0.120, 0.180, 0.120};
    default:
      return {0, 0, 0};
  }
}

TEST(Nonlinear4Quantize, EntryPoints) {
  for (GgmlType type : kTypes) {
    EXPECT_TRUE(can_quantize(type)) << name_of(type);
    EXPECT_TRUE(can_quantize_weighted(type)) << name_of(type);
    EXPECT_FALSE(needs_importance(type)) << name_of(type);
  }
  // quantize_row() is the weighted quantizer with the default weighting, and an importance of
  // all zeros (no information) falls back to that default.
  std::mt19937 rng(7);
  const std::vector<float> x = random_row(rng, true, kCols);
  const std::vector<float> zeros(kCols, 0.0f);
  for (GgmlType type : kTypes) {
    std::vector<uint8_t> a(row_bytes(type, kCols));
    quantize_row(type, x.data(), a.data(), kCols);
    EXPECT_EQ(a, quantize(type, x, nullptr)) << name_of(type);
    EXPECT_EQ(a, quantize(type, x, zeros.data())) << name_of(type);
  }
}

TEST(Nonlinear4Quantize, RandomRowsWithinRmsBound) {
  for (GgmlType type : kTypes) {
    std::mt19937 rng(1234);
    double err[3] = {}, sig[3] = {};
    for (int r = 0; r < kRows; ++r) {
      const std::vector<float> x = random_row(rng, false, kCols);
      const std::vector<float> xo = random_row(rng, true, kCols);
      const std::vector<float> imp = random_importance(rng, kCols);
      accumulate(x, round_trip(type, x, nullptr), nullptr, &err[0], &sig[0]);
      accumulate(xo, round_trip(type, xo, nullptr), nullptr, &err[1], &sig[1]);
      accumulate(x, round_trip(type, x, imp.data()), nullptr, &err[2], &sig[2]);
    }
    const Bounds bound = rms_bounds(type);
    const double plain = std::sqrt(err[0] / sig[0]);
    const double outliers = std::sqrt(err[1] / sig[1]);
    const double weighted = std::sqrt(err[2] / sig[2]);
    std::printf("%-6s relative RMS: normal %.4f, with outliers %.4f, with importance %.4f\n",
                name_of(type).c_str(), plain, outliers, weighted);
    EXPECT_LE(plain, bound.plain) << name_of(type);
    EXPECT_LE(outliers, bound.outliers) << name_of(type);
    EXPECT_LE(weighted, bound.weighted) << name_of(type);
  }
}

// x ~= s * level[q] error of one 32-element block for the scale s with nearest levels, weighted
// by w (computed here independently of the quantizer).
double iq4_block_error(const float* x, const float* w, double s) {
  double err = 0;
  for (int i = 0; i < 32; ++i) {
    double best = 1e300;
    for (int8_t level : kIQ4Levels) best = std::min(best, std::fabs(x[i] - s * level));
    err += w[i] * best * best;
  }
  return err;
}

// The IQ4_NL scale search finds the best scale: no scale of a dense grid (both signs, the
// largest |x| mapped anywhere from level 40 to 200) gives a lower weighted error, beyond the
// fp16 rounding of the stored scale. Weights as the quantizer's: imp * sqrt(sigma2 + x^2), imp
// all ones without an importance vector.
TEST(Nonlinear4Quantize, Iq4NlScaleBeatsDenseGrid) {
  std::mt19937 rng(11);
  int worse = 0;
  double ours_total = 0, grid_total = 0;
  for (int b = 0; b < 200; ++b) {
    const std::vector<float> x = random_row(rng, b % 2 == 1, 32);
    const std::vector<float> imp = random_importance(rng, 32);
    const bool with_importance = b % 4 >= 2;
    float amax = 0, sum_sq = 0;
    for (float v : x) {
      amax = std::max(amax, std::fabs(v));
      sum_sq += v * v;
    }
    std::vector<float> w(32);
    const float imp_max = *std::max_element(imp.begin(), imp.end());
    for (int i = 0; i < 32; ++i) {
      const float xi = x[size_t(i)];
      w[size_t(i)] = (with_importance ? imp[size_t(i)] / imp_max : 1.0f) *
                     std::sqrt(2 * sum_sq / 32 + xi * xi);
    }
    const std::vector<float> y =
        round_trip(GgmlType::IQ4_NL, x, with_importance ? imp.data() : nullptr);
    double ours = 0;
    for (int i = 0; i < 32; ++i)
      ours +=
          w[size_t(i)] * double(x[size_t(i)] - y[size_t(i)]) * double(x[size_t(i)] - y[size_t(i)]);
    double grid = 1e300;
    for (int k = 0; k <= 8000; ++k) {
      const double top = 40.0 + 160.0 * k / 8000;
      for (const double sign : {1.0, -1.0}) {
        grid = std::min(grid, iq4_block_error(x.data(), w.data(), sign * amax / top));
      }
    }
    ours_total += ours;
    grid_total += grid;
    if (ours > grid * (1 + 2e-3)) {
      ++worse;
      std::printf("block %d%s: ours %.6g, grid %.6g\n", b, with_importance ? " (importance)" : "",
                  ours, grid);
    }
  }
  std::printf("IQ4_NL weighted error over 200 blocks: ours %.6g, best of the dense grid %.6g\n",
              ours_total, grid_total);
  EXPECT_EQ(worse, 0);
  EXPECT_LE(ours_total, grid_total * (1 + 1e-4));
}

// The importance-weighted error sum imp (x - x')^2 is what an importance matrix asks the
// quantizer to lower: it must be clearly lower when the quantizer is given the importance than
// when it is not, on the same rows. MXFP4 can only move its power-of-two exponent, so it gains
// least. Bounds a little above the measured ratios (normal rows / with outliers): IQ4_NL 0.664 /
// 0.817, IQ4_XS 0.672 / 0.839, MXFP4 0.941 / 0.877.
double importance_ratio_bound(GgmlType type, bool outliers) {
  switch (type) {
    case GgmlType::IQ4_NL:
      return outliers ? 0.86 : 0.70;
    case GgmlType::IQ4_XS:
      return outliers ? 0.87 : 0.71;
    case GgmlType::MXFP4:
      return outliers ? 0.91 : 0.96;
    default:
      return 0.0;
  }
}

TEST(Nonlinear4Quantize, ImportanceLowersWeightedError) {
  for (GgmlType type : kTypes) {
    for (const bool outliers : {false, true}) {
      std::mt19937 rng(99);
      double with = 0, without = 0, sig_with = 0, sig_without = 0;
      for (int r = 0; r < kRows; ++r) {
        const std::vector<float> x = random_row(rng, outliers, kCols);
        const std::vector<float> imp = random_importance(rng, kCols);
        accumulate(x, round_trip(type, x, imp.data()), imp.data(), &with, &sig_with);
        accumulate(x, round_trip(type, x, nullptr), imp.data(), &without, &sig_without);
      }
      const double ratio = with / without;
      std::printf("%-6s%s importance-weighted error with / without importance: %.3f\n",
                  name_of(type).c_str(), outliers ? " (outliers)" : "", ratio);
      EXPECT_LT(ratio, importance_ratio_bound(type, outliers)) << name_of(type);
    }
  }
}

// MXFP4 without importance is ggml's rule: the exponent e = floor(log2(amax)) - 2 + 127 and
// nearest e2m1 rounding with ties toward the smaller magnitude, values past 6 units clipped.
TEST(Nonlinear4Quantize, Mxfp4FollowsReferenceRule) {
  // amax 6: e = 2 - 2 + 127 = 127, one e2m1 unit is 1 (the half-scale 0.5 times the doubled
  // levels), so the e2m1 values are exact.
  std::vector<float> x(32, 0.0f);
  const float values[] = {6,      4,      3,     2,    1.5f,  1,     0.5f,   0,
                          -0.5f,  -1,     -1.5f, -2,   -3,    -4,    -6,     1.25f,
                          -1.25f, 2.5f,   -2.5f, 3.5f, 5,     -5,    0.25f,  -0.25f,
                          0.26f,  -0.26f, 4.9f,  5.1f, -0.0f, 0.75f, -1.75f, 5.5f};
  std::copy(std::begin(values), std::end(values), x.begin());
  const std::vector<uint8_t> q = quantize(GgmlType::MXFP4, x, nullptr);
  BlockMXFP4 b;
  std::memcpy(&b, q.data(), sizeof(b));
  EXPECT_EQ(b.e, 127);
  const float expect[] = {6,  4,  3,    2,     1.5f, 1,  0.5f, 0,    -0.5f, -1, -1.5f,
                          -2, -3, -4,   -6,    1,    -1, 2,    -2,   3,     4,  -4,
                          0,  0,  0.5f, -0.5f, 4,    6,  0,    0.5f, -1.5f, 6};
  std::vector<float> y(32);
  dequantize_row(GgmlType::MXFP4, q.data(), y.data(), 32);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(y[size_t(i)], expect[i]) << "element " << i << " = " << x[size_t(i)];
  // No -0 code: negative values that round to 0 take code 0.
  const uint8_t code_023 = uint8_t(b.qs[23 - 16] >> 4);
  EXPECT_EQ(code_023, 0);
  // Values past 6 units clip: amax 7.9 keeps e = 127 and decodes to 6; amax 8 moves to e = 128.
  x.assign(32, 1.0f);
  x[3] = 7.9f;
  std::memcpy(&b, quantize(GgmlType::MXFP4, x, nullptr).data(), sizeof(b));
  EXPECT_EQ(b.e, 127);
  x[3] = 8.0f;
  std::memcpy(&b, quantize(GgmlType::MXFP4, x, nullptr).data(), sizeof(b));
  EXPECT_EQ(b.e, 128);
  // With an importance vector that puts the weight on the clipped 7.9, the exponent above (its
  // largest value 12 units, e2m1 8 among them) lowers that error from 1.9 to 0.1 at no cost
  // for the 1s.
  x[3] = 7.9f;
  std::vector<float> imp(32, 1.0f);
  imp[3] = 1000.0f;
  std::memcpy(&b, quantize(GgmlType::MXFP4, x, imp.data()).data(), sizeof(b));
  EXPECT_EQ(b.e, 128);
}

// Rows with nothing to quantize or with extreme values still give finite, defined blocks.
TEST(Nonlinear4Quantize, DegenerateAndExtremeRowsGiveFiniteBlocks) {
  const int64_t n = 2 * kQK4_XS;
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(n, 0.0f));  // zeros
  {
    std::vector<float> x(n, 0.0f);  // one huge value among zeros
    x[37] = 1e30f;
    rows.push_back(x);
  }
  {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    x[300] = -3e38f;  // one huge value among normal ones
    rows.push_back(x);
  }
  {
    std::vector<float> x(n);  // the largest and smallest finite floats, both signs
    for (int64_t i = 0; i < n; ++i) {
      const float mags[] = {FLT_MAX, FLT_MIN, 1e-45f, 0.0f, 1.0f};
      x[size_t(i)] = mags[i % 5] * (i % 2 ? -1.0f : 1.0f);
    }
    rows.push_back(x);
  }
  rows.push_back(std::vector<float>(n, 1e-42f));  // subnormal constant
  rows.push_back(std::vector<float>(n, -7.5f));   // negative constant
  {
    std::vector<float> x(n, 1e-3f);  // one tiny sub-block next to a huge one
    for (int i = 0; i < 32; ++i) x[size_t(i)] = 1e4f * float(i % 7 - 3);
    rows.push_back(x);
  }
  {
    std::vector<float> x(n, 0.5f);  // Inf and NaN (not meaningful weights, but defined output)
    x[3] = INFINITY;
    x[70] = -INFINITY;
    x[200] = NAN;
    rows.push_back(x);
  }
  for (GgmlType type : kTypes) {
    for (size_t r = 0; r < rows.size(); ++r) {
      for (const bool with_importance : {false, true}) {
        std::vector<float> imp(size_t(n), 0.0f);
        imp[37] = 1e30f;  // mostly zero importance, one huge entry
        const std::vector<float> y =
            round_trip(type, rows[r], with_importance ? imp.data() : nullptr);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(y[size_t(i)]))
              << name_of(type) << " row " << r << " element " << i;
        }
        if (r == 0) {
          for (float v : y) ASSERT_EQ(v, 0.0f) << name_of(type);
        }
        // A constant is one level times the scale (with the importance, the blocks without any
        // may be sacrificed to the one with it).
        if (r == 5 && type != GgmlType::MXFP4 && !with_importance) {
          for (float v : y) ASSERT_NEAR(v, -7.5f, 7.5f * 1e-3f) << name_of(type);
        }
      }
    }
  }
}

// Values the format can hold exactly after one round come back unchanged from a second one.
// Measured: no change at all for any of the three types (the IQ4 sweep's window holds the exact
// scale of a decoded block, and MXFP4's exponent rule maps a decoded block onto itself); the
// bound leaves room for rounding differences between compilers only.
constexpr double kDriftBound = 1e-6;

TEST(Nonlinear4Quantize, RequantizingDecodedRowsIsStable) {
  for (GgmlType type : kTypes) {
    for (const bool with_importance : {false, true}) {
      std::mt19937 rng(2024);
      double drift = 0, first = 0, sig = 0;
      for (int r = 0; r < kRows; ++r) {
        const std::vector<float> x = random_row(rng, r % 2 == 1, kCols);
        const std::vector<float> imp = random_importance(rng, kCols);
        const float* w = with_importance ? imp.data() : nullptr;
        const std::vector<float> y1 = round_trip(type, x, w);
        const std::vector<float> y2 = round_trip(type, y1, w);
        accumulate(y1, y2, nullptr, &drift, &sig);
        double unused = 0;
        accumulate(x, y1, nullptr, &first, &unused);
      }
      const double rel_drift = std::sqrt(drift / sig), rel_first = std::sqrt(first / sig);
      std::printf("%-6s%s second round changes %.2e of the signal (first round's error %.3f)\n",
                  name_of(type).c_str(), with_importance ? " (importance)" : "", rel_drift,
                  rel_first);
      EXPECT_LE(rel_drift, kDriftBound) << name_of(type);
    }
  }
}

// Speed of one 2048-wide row (printed; the bound only catches a pathological slowdown).
TEST(Nonlinear4Quantize, RowsPerSecond) {
  std::mt19937 rng(3);
  const std::vector<float> x = random_row(rng, true, kCols);
  const std::vector<float> imp = random_importance(rng, kCols);
  for (GgmlType type : kTypes) {
    std::vector<uint8_t> q(row_bytes(type, kCols));
    for (const bool with_importance : {false, true}) {
      const int rows = 400;
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < rows; ++r) {
        quantize_row_weighted(type, x.data(), q.data(), kCols,
                              with_importance ? imp.data() : nullptr);
      }
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%-6s%s %.0f rows/s of %lld (one thread)\n", name_of(type).c_str(),
                  with_importance ? " (importance)" : "", rows / s, (long long)kCols);
      EXPECT_GT(rows / s, 100.0) << name_of(type);
    }
  }
}

}  // namespace
}  // namespace vela

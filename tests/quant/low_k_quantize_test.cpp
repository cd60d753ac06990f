// Quantizers of Q2_K, Q3_K, TQ1_0 and TQ2_0 (quant/quantize_low_k.h): round trips of random
// rows within measured error bounds, the importance doing its job, degenerate and extreme rows
// giving finite blocks, and re-quantizing decoded rows being stable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "quant/blocks_low_k.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"
#include "quant/quantize_low_k.h"
#include "quant_test_rows.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr int64_t kCols = 2048;  // row length of the random tests
constexpr int kRows = 24;

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0, GgmlType::TQ2_0};

using test::accumulate;
using test::name_of;
using test::random_importance;
using test::random_row;
using test::round_trip;
using test::row_bytes;

// Relative RMS error bounds, about 4% above what this quantizer measures on these rows (printed
// by RandomRowsWithinRmsBound; measured: normal / with outliers / with importance). Their size:
// a 16-element sub-block of normal data spans about +-2 sigma, and Q2_K's 4 affine levels leave
// ~0.27 of the signal as error, Q3_K's 8 symmetric levels ~0.15 (6-bit sub-block scales add
// little, Q2_K's 4-bit ones some). A ternary block with one scale per 256 keeps ~0.45: the best
// single threshold for a Gaussian (ggml's amax-scaled reference leaves ~0.81). Outliers stretch
// the scales of the sub-blocks holding them (Q3_K, and the ternary types whose one scale serves
// 256 weights, lose; Q2_K's error falls, as its outliers carry much of the signal and sit on
// exact levels). With an importance vector the plain (unweighted) error grows: the fit spends
// its accuracy on the important columns.
struct Bounds {
  double plain, outliers, weighted;
};
Bounds rms_bounds(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {0.279, 0.256, 0.312};  // measured 0.2682, 0.2459, 0.2995
    case GgmlType::Q3_K:
      return {0.152, 0.190, 0.172};  // measured 0.1461, 0.1826, 0.1649
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
      return {0.467, 0.612, 0.475};  // measured 0.4490, 0.5884, 0.4566
    default:
      return {0, 0, 0};
  }
}

// Upper bounds of the importance-weighted error with the importance over that without it (rows
// without and with outliers), a little above the measured values; ignoring the importance would
// give 1. The ternary types gain least on plain rows: one scale per 256 weights leaves little to
// trade.
std::pair<double, double> importance_gain_bound(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {0.60, 0.72};  // measured 0.564, 0.678
    case GgmlType::Q3_K:
      return {0.71, 0.90};  // measured 0.669, 0.861
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
      return {0.975, 0.82};  // measured 0.958, 0.781
    default:
      return {0, 0};
  }
}

TEST(LowKQuantize, EntryPoints) {
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
    const size_t bytes = row_bytes(type, kCols);
    std::vector<uint8_t> a(bytes), b(bytes), c(bytes);
    quantize_row(type, x.data(), a.data(), kCols);
    quantize_row_weighted(type, x.data(), b.data(), kCols, nullptr);
    quantize_row_weighted(type, x.data(), c.data(), kCols, zeros.data());
    EXPECT_EQ(a, b) << name_of(type);
    EXPECT_EQ(a, c) << name_of(type);
  }
}

TEST(LowKQuantize, RandomRowsWithinRmsBound) {
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

// The importance-weighted error sum imp (x - x')^2 is what an importance matrix asks the
// quantizer to lower: it must be clearly lower when the quantizer is given the importance than
// when it is not, on the same rows.
TEST(LowKQuantize, ImportanceLowersWeightedError) {
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
      const auto bound = importance_gain_bound(type);
      EXPECT_LT(ratio, outliers ? bound.second : bound.first) << name_of(type);
    }
  }
}

// Rows with nothing to quantize or with extreme values still give finite, defined blocks: a
// value beyond what fp16 super-scales can reach saturates (same sign, largest magnitude of its
// block) instead of becoming inf or NaN.
TEST(LowKQuantize, DegenerateAndExtremeRowsGiveFiniteBlocks) {
  const int64_t n = 2 * kQK_K;
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(n, 0.0f));  // 0: zeros
  {
    std::vector<float> x(n, 0.0f);  // 1: one huge value among zeros
    x[37] = 1e30f;
    rows.push_back(x);
  }
  {
    std::mt19937 rng(5);  // 2: one huge negative value among normal ones
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    x[300] = -3e38f;
    rows.push_back(x);
  }
  {
    std::vector<float> x(n);  // 3: the largest and smallest finite floats, both signs
    const float mags[] = {FLT_MAX, FLT_MIN, 1e-45f, 0.0f, 1.0f};
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = mags[i % 5] * (i % 2 ? -1.0f : 1.0f);
    rows.push_back(x);
  }
  rows.push_back(std::vector<float>(n, 1e-42f));  // 4: subnormal constant
  rows.push_back(std::vector<float>(n, -7.5f));   // 5: negative constant
  std::vector<float> imp(size_t(n), 0.0f);
  imp[37] = 1e30f;  // mostly zero importance, one huge entry
  for (GgmlType type : kTypes) {
    for (size_t r = 0; r < rows.size(); ++r) {
      for (const bool with_importance : {false, true}) {
        const std::vector<float> y =
            round_trip(type, rows[r], with_importance ? imp.data() : nullptr);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(y[size_t(i)]))
              << name_of(type) << " row " << r << " element " << i;
        }
        if (r == 0) {
          for (float v : y) ASSERT_EQ(v, 0.0f) << name_of(type);
        }
        if (r == 1 || r == 2) {
          const size_t at = r == 1 ? 37 : 300;
          const float sign = r == 1 ? 1.0f : -1.0f;
          EXPECT_GT(sign * y[at], 1e4f) << name_of(type) << " row " << r;
          for (size_t i = kQK_K * (at / kQK_K); i < kQK_K * (at / kQK_K + 1); ++i) {
            EXPECT_LE(std::fabs(y[i]), std::fabs(y[at])) << name_of(type) << " row " << r;
          }
        }
      }
    }
  }
}

// Large values that fp16 super-scales can still reach (beyond fp16's own range for the K types,
// whose values are d times a sub-block scale times a level) keep their size.
TEST(LowKQuantize, LargeRepresentableValuesKeepTheirSize) {
  for (GgmlType type : kTypes) {
    const bool ternary = type == GgmlType::TQ1_0 || type == GgmlType::TQ2_0;
    const float big = ternary ? 3.0e4f : 3.0e5f;  // ternary values are +-d, at most 65504
    std::vector<float> x(kQK_K, 0.0f);
    x[10] = big;
    x[200] = -big / 3;
    const std::vector<float> y = round_trip(type, x, nullptr);
    EXPECT_NEAR(y[10], big, big * 0.01f) << name_of(type);
    if (!ternary) {
      EXPECT_NEAR(y[200], -big / 3, big / 3 * 0.01f) << name_of(type);
    }
  }
}

// Values the format holds exactly after one round come back unchanged from a second one. For
// Q3_K and the ternary types this holds for every block measured; Q2_K's affine sub-blocks with
// few distinct values (a lone outlier beside a flat run) fit several grids, and the search may
// settle on another (d, dmin) for the block: nearly every block of plain rows comes back
// exactly, and the change over rows with outliers stays small (measured 0.0074 of the signal,
// against a first-round error of 0.25).
TEST(LowKQuantize, RequantizingDecodedRowsIsStable) {
  for (GgmlType type : kTypes) {
    std::mt19937 rng(2024);
    double drift = 0, first = 0, sig = 0;
    int blocks = 0, changed_plain = 0;
    for (int r = 0; r < kRows; ++r) {
      const bool outliers = r % 2 == 1;
      const std::vector<float> x = random_row(rng, outliers, kCols);
      const std::vector<float> y1 = round_trip(type, x, nullptr);
      const std::vector<float> y2 = round_trip(type, y1, nullptr);
      accumulate(y1, y2, nullptr, &drift, &sig);
      double unused = 0;
      accumulate(x, y1, nullptr, &first, &unused);
      for (int64_t b = 0; !outliers && b < kCols / kQK_K; ++b, ++blocks) {
        changed_plain += !std::equal(y1.begin() + b * kQK_K, y1.begin() + (b + 1) * kQK_K,
                                     y2.begin() + b * kQK_K);
      }
    }
    const double rel_drift = std::sqrt(drift / sig), rel_first = std::sqrt(first / sig);
    std::printf(
        "%-6s second round changes %.2e of the signal (first round's error %.3f), "
        "%d of %d plain blocks\n",
        name_of(type).c_str(), rel_drift, rel_first, changed_plain, blocks);
    if (type == GgmlType::Q2_K) {
      EXPECT_LE(rel_drift, 0.015);
      EXPECT_LE(changed_plain, blocks / 50);
    } else {
      EXPECT_EQ(rel_drift, 0.0) << name_of(type);
    }
  }
}

// Weights that already are ternary (as BitNet-style checkpoints store them: -a, 0, +a per
// block) come back exactly from both ternary types, with or without an importance.
TEST(LowKQuantize, TernaryWeightsRoundTripExactly) {
  std::mt19937 rng(11);
  const std::vector<float> imp = random_importance(rng, kCols);
  for (GgmlType type : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    std::vector<float> x(kCols);
    for (int64_t b = 0; b < kCols / kQK_K; ++b) {
      const float a = fp16_to_fp32(fp32_to_fp16(0.001f * float(1 + rng() % 1000)));
      for (int64_t i = 0; i < kQK_K; ++i) x[size_t(b * kQK_K + i)] = a * float(int(rng() % 3) - 1);
    }
    EXPECT_EQ(round_trip(type, x, nullptr), x) << name_of(type);
    EXPECT_EQ(round_trip(type, x, imp.data()), x) << name_of(type);
  }
}

// TQ1_0 and TQ2_0 make the same choice from the same row, so they must decode alike: this pins
// TQ1_0's base-3 packing to TQ2_0's plain 2-bit one.
TEST(LowKQuantize, TernaryTypesDecodeAlike) {
  std::mt19937 rng(3);
  for (int r = 0; r < 8; ++r) {
    const std::vector<float> x = random_row(rng, r % 2 == 1, kCols);
    const std::vector<float> imp = random_importance(rng, kCols);
    EXPECT_EQ(round_trip(GgmlType::TQ1_0, x, nullptr), round_trip(GgmlType::TQ2_0, x, nullptr));
    EXPECT_EQ(round_trip(GgmlType::TQ1_0, x, imp.data()),
              round_trip(GgmlType::TQ2_0, x, imp.data()));
  }
}

}  // namespace
}  // namespace vela

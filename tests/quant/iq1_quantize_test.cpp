// Quantizers of IQ1_S and IQ1_M (quant/quantize_iq1.h): the codebook search is exact, round
// trips of random rows stay within measured error bounds, the importance does its job,
// degenerate and extreme rows give finite blocks, and re-quantizing decoded rows is stable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks_iq1.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "quant/iq1_grid.h"
#include "quant/iq1_grid_search.h"
#include "quant/quantize.h"
#include "quant/quantize_iq1.h"
#include "quant_test_rows.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr int64_t kCols = 2048;  // row length of the random tests
constexpr int kRows = 24;

const GgmlType kTypes[] = {GgmlType::IQ1_S, GgmlType::IQ1_M};

using test::accumulate;
using test::name_of;
using test::quantize;
using test::random_importance;
using test::random_row;
using test::round_trip;
using test::row_bytes;

TEST(Iq1Quantize, EntryPoints) {
  for (GgmlType type : kTypes) {
    EXPECT_TRUE(can_quantize(type)) << name_of(type);
    EXPECT_TRUE(can_quantize_weighted(type)) << name_of(type);
    EXPECT_TRUE(needs_importance(type)) << name_of(type);
  }
  // quantize_row() is the weighted quantizer with the default weighting, and an importance of
  // all zeros (no information) falls back to that default; an importance of all ones is the
  // default weighting too.
  std::mt19937 rng(7);
  const std::vector<float> x = random_row(rng, true, kCols);
  const std::vector<float> zeros(kCols, 0.0f), ones(kCols, 1.0f);
  for (GgmlType type : kTypes) {
    std::vector<uint8_t> a(row_bytes(type, kCols));
    quantize_row(type, x.data(), a.data(), kCols);
    EXPECT_EQ(a, quantize(type, x, nullptr)) << name_of(type);
    EXPECT_EQ(a, quantize(type, x, zeros.data())) << name_of(type);
    EXPECT_EQ(a, quantize(type, x, ones.data())) << name_of(type);
  }
}

// The codebook search returns the cheapest of all 2048 entries, for random costs and for the
// costs the quantizer builds (a group of weighted values at some scale and shift).
TEST(Iq1Quantize, CodebookSearchIsExact) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int off_codebook = 0;
  for (int t = 0; t < 20000; ++t) {
    float cost[8][3];
    if (t % 2 == 0) {
      for (auto& c : cost)
        for (float& v : c) v = uniform(rng);
    } else {
      const float scale = 0.5f + uniform(rng), delta = t % 4 == 1 ? kIq1Delta : -kIq1Delta;
      for (auto& c : cost) {
        const float x = normal(rng), w = 0.1f + uniform(rng);
        for (int v = 0; v < 3; ++v)
          c[v] = w * (x - scale * (float(v - 1) + delta)) * (x - scale * (float(v - 1) + delta));
      }
    }
    float brute = FLT_MAX;
    for (int e = 0; e < kIq1GridSize; ++e) {
      float c = 0;
      for (int j = 0; j < 8; ++j) c += cost[j][iq1_grid_value(uint32_t(e), j) + 1];
      brute = std::min(brute, c);
    }
    uint16_t index = 0xFFFF;
    const float found = iq1_detail::nearest_entry(cost, &index);
    ASSERT_LT(index, kIq1GridSize);
    float check = 0;
    for (int j = 0; j < 8; ++j) check += cost[j][iq1_grid_value(index, j) + 1];
    EXPECT_NEAR(found, check, 1e-5f * (1 + check)) << t;
    EXPECT_NEAR(found, brute, 1e-5f * (1 + brute)) << t;
    // How often the element-wise best point is not an entry (the pruned scan's case).
    int point_cost_is_found = 1;
    for (int j = 0; j < 8; ++j) {
      const float m = std::min({cost[j][0], cost[j][1], cost[j][2]});
      if (cost[j][iq1_grid_value(index, j) + 1] != m) point_cost_is_found = 0;
    }
    off_codebook += 1 - point_cost_is_found;
  }
  std::printf("element-wise best point outside the codebook in %d of 20000 cases\n", off_codebook);
  EXPECT_GT(off_codebook, 1000);  // the scan was exercised
}

// Relative RMS error bounds, about 1.5% above what this quantizer measures on these rows
// (printed by RandomRowsWithinRmsBound: IQ1_S 0.4520 / 0.6064 / 0.5112, IQ1_M 0.4192 / 0.4455 /
// 0.4880). Their size: the best 3-level quantizer of a Gaussian leaves sqrt(0.190) = 0.436 of
// the signal as error; scales fitted to each 32 (IQ1_S) or 16 (IQ1_M) elements and the +-1/8
// shifts win a little back, the codebook (2048 of the 6561 ternary patterns of 8) costs a little
// more. Outliers carrying
// ~70% of the energy stretch the scale of the sub-block holding them, coarsening its other
// elements, which hurts IQ1_S's 32-element sub-blocks most. With an importance vector the plain
// (unweighted) error grows: the fit spends its accuracy on the important columns.
struct Bounds {
  double plain, outliers, weighted;
};
Bounds rms_bounds(GgmlType type) {
  switch (type) {
    case GgmlType::IQ1_S:
      return {0.459, 0.615, 0.519};
    case GgmlType::IQ1_M:
      return {0.426, 0.452, 0.495};
    default:
      return {0, 0, 0};
  }
}

TEST(Iq1Quantize, RandomRowsWithinRmsBound) {
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
TEST(Iq1Quantize, ImportanceLowersWeightedError) {
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
      // Measured: IQ1_S 0.646 / 0.656 (outliers), IQ1_M 0.538 / 0.657.
      EXPECT_LT(ratio, 0.75) << name_of(type);
    }
  }
}

// Rows with nothing to quantize or with extreme values still give finite, defined blocks.
TEST(Iq1Quantize, DegenerateAndExtremeRowsGiveFiniteBlocks) {
  const int64_t n = 2 * kQK_K;
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
    std::vector<float> x(n, 0.5f);  // non-finite inputs are clamped, not propagated
    x[3] = NAN;
    x[260] = INFINITY;
    x[261] = -INFINITY;
    rows.push_back(x);
  }
  for (GgmlType type : kTypes) {
    for (size_t r = 0; r < rows.size(); ++r) {
      for (const bool with_importance : {false, true}) {
        std::vector<float> imp(size_t(n), 0.0f);
        imp[37] = 1e30f;  // mostly zero importance, one huge entry
        const std::vector<uint8_t> q =
            quantize(type, rows[r], with_importance ? imp.data() : nullptr);
        // The super-scales are finite fp16 values >= 0.
        for (int64_t b = 0; b < n / kQK_K; ++b) {
          uint16_t d;
          if (type == GgmlType::IQ1_S) {
            BlockIQ1_S blk;
            std::memcpy(&blk, q.data() + b * sizeof(blk), sizeof(blk));
            d = blk.d;
          } else {
            BlockIQ1_M blk;
            std::memcpy(&blk, q.data() + b * sizeof(blk), sizeof(blk));
            d = iq1m_scale_bits(blk);
          }
          const float df = fp16_to_fp32(d);
          ASSERT_TRUE(std::isfinite(df) && df >= 0) << name_of(type) << " row " << r;
        }
        std::vector<float> y(static_cast<size_t>(n));
        dequantize_row(type, q.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(y[size_t(i)]))
              << name_of(type) << " row " << r << " element " << i;
        }
        if (r == 0) {
          for (float v : y) ASSERT_EQ(v, 0.0f) << name_of(type);
        }
      }
    }
  }
}

// Values the format can hold exactly after one round come back unchanged from a second one.
TEST(Iq1Quantize, RequantizingDecodedRowsIsStable) {
  for (GgmlType type : kTypes) {
    std::mt19937 rng(2024);
    double drift = 0, first = 0, sig = 0;
    for (int r = 0; r < kRows; ++r) {
      const std::vector<float> x = random_row(rng, r % 2 == 1, kCols);
      const std::vector<float> imp = random_importance(rng, kCols);
      const std::vector<float> y1 = round_trip(type, x, r % 3 == 0 ? imp.data() : nullptr);
      const std::vector<float> y2 = round_trip(type, y1, r % 3 == 1 ? imp.data() : nullptr);
      accumulate(y1, y2, nullptr, &drift, &sig);
      double unused = 0;
      accumulate(x, y1, nullptr, &first, &unused);
    }
    const double rel_drift = std::sqrt(drift / sig), rel_first = std::sqrt(first / sig);
    std::printf("%-6s second round changes %.2e of the signal (first round's error %.3f)\n",
                name_of(type).c_str(), rel_drift, rel_first);
    // A decoded row is a point of the format, which the fit finds again exactly (measured 0).
    EXPECT_LE(rel_drift, 1e-6) << name_of(type);
  }
}

// Throughput of one thread on 2048-wide rows, in processor time so that a busy machine does not
// distort it (printed, not checked: sanitizer builds are slow).
TEST(Iq1Quantize, Speed) {
  std::mt19937 rng(17);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 32; ++r) rows.push_back(random_row(rng, r % 2 == 1, kCols));
  const std::vector<float> imp = random_importance(rng, kCols);
  for (GgmlType type : kTypes) {
    std::vector<uint8_t> q(row_bytes(type, kCols));
    const std::clock_t start = std::clock();
    for (const auto& x : rows) quantize_row_weighted(type, x.data(), q.data(), kCols, imp.data());
    const double s = double(std::clock() - start) / CLOCKS_PER_SEC;
    std::printf("%-6s %.0f rows/s (2048 wide, one thread)\n", name_of(type).c_str(),
                double(rows.size()) / std::max(s, 1e-9));
  }
}

}  // namespace
}  // namespace vela

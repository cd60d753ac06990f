// Quantizers of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (quant/quantize_iq23.h): the codebook
// search is exact, round trips of random rows stay within measured error bounds, the importance
// does its job, degenerate and extreme rows give finite blocks, and re-quantizing decoded rows is
// stable.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks_iq23.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "quant/iq23_grid_search.h"
#include "quant/quantize.h"
#include "quant/quantize_iq23.h"
#include "quant_test_rows.h"
#include "util/half.h"

namespace vela {
namespace {

constexpr int64_t kCols = 2048;  // row length of the random tests
constexpr int kRows = 16;

const GgmlType kTypes[] = {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                           GgmlType::IQ3_S};

using test::accumulate;
using test::name_of;
using test::quantize;
using test::random_importance;
using test::random_row;
using test::round_trip;
using test::row_bytes;

TEST(Iq23Quantize, EntryPoints) {
  for (GgmlType type : kTypes) {
    EXPECT_TRUE(can_quantize(type)) << name_of(type);
    EXPECT_TRUE(can_quantize_weighted(type)) << name_of(type);
  }
  // As the reference tool has it: the 2-bit types are refused without an importance matrix, the
  // 3-bit ones are not.
  EXPECT_TRUE(needs_importance(GgmlType::IQ2_XXS));
  EXPECT_TRUE(needs_importance(GgmlType::IQ2_XS));
  EXPECT_TRUE(needs_importance(GgmlType::IQ2_S));
  EXPECT_FALSE(needs_importance(GgmlType::IQ3_XXS));
  EXPECT_FALSE(needs_importance(GgmlType::IQ3_S));
  // quantize_row() is the weighted quantizer with the default weighting; an importance of all
  // zeros (no information) falls back to it, and one of all ones is that weighting.
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

// The codebook search returns the cheapest of all entries, for random costs and for the costs
// the quantizer builds (weighted squared distances of magnitudes to a scaled level).
TEST(Iq23Quantize, CodebookSearchIsExact) {
  using iq23_detail::Codebook;
  using iq23_detail::Grid;
  for (const Grid grid : {Grid::kIq2Xxs, Grid::kIq2Xs, Grid::kIq2S, Grid::kIq3Xxs, Grid::kIq3S}) {
    const Codebook& book = iq23_detail::codebook(grid);
    ASSERT_TRUE((book.len() == 8 && book.levels() == 3) || (book.len() == 4 && book.levels() == 8));
    std::mt19937 rng(11 + int(grid));
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    int off_codebook = 0;
    for (int t = 0; t < 10000; ++t) {
      float cost[8][iq23_detail::kMaxLevels];
      const float scale = (0.5f + uniform(rng)) / book.magnitude(book.levels() - 1);
      for (int j = 0; j < book.len(); ++j) {
        const float a = uniform(rng), w = 0.1f + uniform(rng);
        for (int v = 0; v < book.levels(); ++v) {
          const float r = a - scale * book.magnitude(v);
          cost[j][v] = t % 2 == 0 ? uniform(rng) : w * r * r;
        }
      }
      float brute = FLT_MAX;
      for (int e = 0; e < book.size(); ++e) {
        float c = 0;
        for (int j = 0; j < book.len(); ++j) c += cost[j][book.level_of(e, j)];
        brute = std::min(brute, c);
      }
      int index = -1;
      const float found = book.nearest(cost, &index);
      ASSERT_GE(index, 0);
      ASSERT_LT(index, book.size());
      float check = 0;
      bool element_wise_best = true;
      for (int j = 0; j < book.len(); ++j) {
        check += cost[j][book.level_of(index, j)];
        const float m = *std::min_element(cost[j], cost[j] + book.levels());
        if (cost[j][book.level_of(index, j)] != m) element_wise_best = false;
      }
      EXPECT_NEAR(found, check, 1e-5f * (1 + check)) << int(grid) << " " << t;
      EXPECT_NEAR(found, brute, 1e-5f * (1 + brute)) << int(grid) << " " << t;
      off_codebook += element_wise_best ? 0 : 1;
    }
    std::printf("grid %d: element-wise best point outside the codebook in %d of 10000 cases\n",
                int(grid), off_codebook);
    EXPECT_GT(off_codebook, 1000);  // the pruned scan was exercised
  }
}

// Relative RMS error bounds, about 1.5% above what this quantizer measures on these rows
// (printed by RandomRowsWithinRmsBound; measured values beside each, as normal / with outliers /
// with importance). Their size: the best
// 3-level magnitude quantizer of a Gaussian (IQ2's 8 elements share one of 256 to 1024 of the
// 3^8 magnitude patterns) leaves about 0.3 of the signal as error, the 8-level IQ3 ones about
// 0.15 to 0.2; 7 sign bits (IQ2_XXS, IQ2_XS, IQ3_XXS) cost one sign in two groups, scales per 16
// elements (IQ2_XS, IQ2_S) win some back. Outliers carrying most of the energy stretch the
// scale of the unit holding them, coarsening its other elements. With an importance vector the
// plain (unweighted) error grows: the fit spends its accuracy on the important columns.
struct Bounds {
  double plain, outliers, weighted;
};
Bounds rms_bounds(GgmlType type) {
  switch (type) {
    case GgmlType::IQ2_XXS:
      return {0.338, 0.655, 0.428};  // measured 0.3321 / 0.6454 / 0.4215
    case GgmlType::IQ2_XS:
      return {0.293, 0.489, 0.386};  // measured 0.2884 / 0.4814 / 0.3800
    case GgmlType::IQ2_S:
      return {0.245, 0.471, 0.305};  // measured 0.2409 / 0.4634 / 0.3001
    case GgmlType::IQ3_XXS:
      return {0.180, 0.256, 0.261};  // measured 0.1773 / 0.2518 / 0.2571
    case GgmlType::IQ3_S:
      return {0.132, 0.215, 0.174};  // measured 0.1298 / 0.2111 / 0.1712
    default:
      return {0, 0, 0};
  }
}

TEST(Iq23Quantize, RandomRowsWithinRmsBound) {
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
    std::printf("%-8s relative RMS: normal %.4f, with outliers %.4f, with importance %.4f\n",
                name_of(type).c_str(), plain, outliers, weighted);
    EXPECT_LE(plain, bound.plain) << name_of(type);
    EXPECT_LE(outliers, bound.outliers) << name_of(type);
    EXPECT_LE(weighted, bound.weighted) << name_of(type);
  }
}

// The importance-weighted error sum imp (x - x')^2 is what an importance matrix asks the
// quantizer to lower: it must be clearly lower when the quantizer is given the importance than
// when it is not, on the same rows.
TEST(Iq23Quantize, ImportanceLowersWeightedError) {
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
      std::printf("%-8s%s importance-weighted error with / without importance: %.3f\n",
                  name_of(type).c_str(), outliers ? " (outliers)" : "", ratio);
      // Measured 0.42 (IQ3_XXS) to 0.58 (IQ2_S) on normal rows, 0.63 (IQ2_XXS) to 0.78 (IQ3_S)
      // with outliers, which take much of the weight either way.
      EXPECT_LT(ratio, outliers ? 0.85 : 0.65) << name_of(type);
    }
  }
}

// The super-scale of block b of a quantized row (each type's d is its first field).
float block_scale(GgmlType type, const std::vector<uint8_t>& q, int64_t b) {
  const size_t size = row_bytes(type, kQK_K);
  uint16_t d;
  std::memcpy(&d, q.data() + size_t(b) * size, sizeof(d));
  return fp16_to_fp32(d);
}

// The largest magnitude a type decodes: d = 65504 (fp16's largest finite value), multiplier 31
// and the codebook's largest byte, times the type's fixed factor.
float largest_magnitude(GgmlType type) {
  switch (type) {
    case GgmlType::IQ3_XXS:
      return 65504.0f * 31 * 62 / 4;
    case GgmlType::IQ3_S:
      return 65504.0f * 31 * 15;
    default:  // the IQ2 types
      return 65504.0f * 31 * 43 / 8;
  }
}

// Rows with nothing to quantize or with extreme values still give finite, defined blocks.
TEST(Iq23Quantize, DegenerateAndExtremeRowsGiveFiniteBlocks) {
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
        for (int64_t b = 0; b < n / kQK_K; ++b) {
          const float d = block_scale(type, q, b);
          ASSERT_TRUE(std::isfinite(d) && d >= 0) << name_of(type) << " row " << r;
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
        if (r == 1) {
          // The huge value saturates near the largest magnitude the type decodes (its 31 zero
          // neighbours, which no entry can give 0, pull the fitted scale a little lower:
          // measured 0.936 of it for IQ2_XXS, 0.99 for the IQ3 types).
          EXPECT_GE(y[37], 0.9f * largest_magnitude(type)) << name_of(type);
          EXPECT_LE(y[37], largest_magnitude(type)) << name_of(type);
        }
        if (r == 5 && !with_importance) {  // a constant comes back as itself, to fp16's precision
          for (float v : y) ASSERT_NEAR(v, -7.5f, 1e-3f) << name_of(type);
        }
      }
    }
  }
}

// Values the format can hold exactly after one round come back unchanged from a second one.
TEST(Iq23Quantize, RequantizingDecodedRowsIsStable) {
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
    std::printf("%-8s second round changes %.2e of the signal (first round's error %.3f)\n",
                name_of(type).c_str(), rel_drift, rel_first);
    // A decoded row is a point of the format, which the fit finds again exactly (measured 0).
    EXPECT_LE(rel_drift, 1e-6) << name_of(type);
  }
}

// Throughput of one thread on 2048-wide rows, in processor time so that a busy machine does not
// distort it (printed, not checked: sanitizer builds are slow).
TEST(Iq23Quantize, Speed) {
  std::mt19937 rng(17);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 32; ++r) rows.push_back(random_row(rng, r % 2 == 1, kCols));
  const std::vector<float> imp = random_importance(rng, kCols);
  for (GgmlType type : kTypes) {
    std::vector<uint8_t> q(row_bytes(type, kCols));
    const std::clock_t start = std::clock();
    for (const auto& x : rows) quantize_row_weighted(type, x.data(), q.data(), kCols, imp.data());
    const double s = double(std::clock() - start) / CLOCKS_PER_SEC;
    std::printf("%-8s %.0f rows/s (2048 wide, one thread)\n", name_of(type).c_str(),
                double(rows.size()) / std::max(s, 1e-9));
  }
}

}  // namespace
}  // namespace vela

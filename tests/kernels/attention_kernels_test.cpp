// The attention row kernels (kernels/attention_kernels.h) of every level this CPU can run
// against the scalar reference, for every KV row type and several head dims (whole and partial
// SIMD steps and q8_0 blocks). Stored values convert exactly to f32 in every table, so tables
// differ only in how they round sums:
// - dot: |simd - ref| <= n * 2^-23 * sum_i |q_i k_i| (each side's float sum of n terms is within
//   (n - 1) * 2^-24 * sum |terms| of the exact one), and the reference is within half that of a
//   double-precision sum of the decoded values;
// - axpy, repeated over a few rows: |simd - ref| <= rows * 2^-22 * sum over rows of |acc| + |w v|
//   (each step rounds at most twice, relative to the magnitudes it adds).
// Each row lives in a vector of exactly its bytes, so a kernel reading past it shows under ASan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/cpu_features.h"
#include "util/half.h"

namespace vela::kernels {
namespace {

constexpr double kEps = 1.0 / 8388608.0;  // 2^-23, float's machine epsilon
const int kLengths[] = {3, 16, 32, 45, 64, 80, 100, 128};
const AttnRowType kTypes[] = {AttnRowType::kF32, AttnRowType::kF16, AttnRowType::kBF16,
                              AttnRowType::kQ8_0};

const char* type_name(AttnRowType t) {
  switch (t) {
    case AttnRowType::kF32:
      return "f32";
    case AttnRowType::kF16:
      return "f16";
    case AttnRowType::kBF16:
      return "bf16";
    case AttnRowType::kQ8_0:
      return "q8_0";
  }
  return "?";
}

// A stored row of x ([n]) in `type` (the layout of kernels/attention_kernels.h), with its exact
// decoded values in `decoded` ([n]).
std::vector<uint8_t> encode(AttnRowType type, const std::vector<float>& x,
                            std::vector<float>& decoded) {
  const int n = int(x.size());
  decoded.resize(x.size());
  std::vector<uint8_t> row;
  switch (type) {
    case AttnRowType::kF32:
      row.resize(size_t(n) * 4);
      std::memcpy(row.data(), x.data(), row.size());
      decoded = x;
      break;
    case AttnRowType::kF16:
    case AttnRowType::kBF16: {
      row.resize(size_t(n) * 2);
      for (int i = 0; i < n; ++i) {
        const uint16_t h =
            type == AttnRowType::kF16 ? fp32_to_fp16(x[size_t(i)]) : fp32_to_bf16(x[size_t(i)]);
        std::memcpy(row.data() + size_t(i) * 2, &h, 2);
        decoded[size_t(i)] = type == AttnRowType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      break;
    }
    case AttnRowType::kQ8_0:
      for (int i0 = 0; i0 < n; i0 += 32) {
        const int len = std::min(32, n - i0);
        float amax = 0.0f;
        for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[size_t(i0 + i)]));
        const uint16_t d16 = fp32_to_fp16(amax / 127.0f);
        const float d = fp16_to_fp32(d16);
        const size_t at = row.size();
        row.resize(at + 2 + size_t(len));
        std::memcpy(row.data() + at, &d16, 2);
        for (int i = 0; i < len; ++i) {
          const float v = d != 0.0f ? std::round(x[size_t(i0 + i)] / d) : 0.0f;
          const auto q = static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, v)));
          row[at + 2 + size_t(i)] = static_cast<uint8_t>(q);
          decoded[size_t(i0 + i)] = float(q) * d;
        }
      }
      break;
  }
  return row;
}

std::vector<float> random_vector(std::mt19937& rng, int n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(AttentionKernels, ReferenceDotMatchesDoubleSum) {
  std::mt19937 rng(7);
  const AttentionRowKernels& ref = attention_row_kernels(KernelIsa::kScalar);
  for (AttnRowType type : kTypes)
    for (int n : kLengths) {
      const std::vector<float> q = random_vector(rng, n, 1.0f);
      std::vector<float> k;
      const std::vector<uint8_t> row = encode(type, random_vector(rng, n, 2.0f), k);
      double exact = 0.0, magnitude = 0.0;
      for (int i = 0; i < n; ++i) {
        exact += double(q[size_t(i)]) * double(k[size_t(i)]);
        magnitude += std::fabs(double(q[size_t(i)]) * double(k[size_t(i)]));
      }
      EXPECT_NEAR(ref.dot_for(type)(q.data(), row.data(), n), exact, n * kEps / 2 * magnitude)
          << type_name(type) << " n=" << n;
    }
}

TEST(AttentionKernels, EveryLevelMatchesReference) {
  const AttentionRowKernels& ref = attention_row_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const AttentionRowKernels& kern = attention_row_kernels(isa);
    std::mt19937 rng(11);
    for (AttnRowType type : kTypes)
      for (int n : kLengths) {
        SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " " + type_name(type) +
                     " n=" + std::to_string(n));
        const std::vector<float> q = random_vector(rng, n, 1.0f);
        std::vector<float> k;
        const std::vector<uint8_t> row = encode(type, random_vector(rng, n, 2.0f), k);
        double magnitude = 0.0;
        for (int i = 0; i < n; ++i) magnitude += std::fabs(double(q[size_t(i)]) * k[size_t(i)]);
        const float want = ref.dot_for(type)(q.data(), row.data(), n);
        const float got = kern.dot_for(type)(q.data(), row.data(), n);
        EXPECT_NEAR(got, want, n * kEps * magnitude);

        // axpy over a few V rows with softmax-like weights, on a non-zero start.
        constexpr int kRows = 3;
        std::vector<float> acc_ref = random_vector(rng, n, 0.5f);
        std::vector<float> acc = acc_ref;
        std::vector<double> bound(size_t(n), 0.0);
        for (int r = 0; r < kRows; ++r) {
          const float w = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
          std::vector<float> v;
          const std::vector<uint8_t> vrow = encode(type, random_vector(rng, n, 2.0f), v);
          for (int i = 0; i < n; ++i)
            bound[size_t(i)] += std::fabs(acc_ref[size_t(i)]) + std::fabs(w * v[size_t(i)]);
          ref.axpy_for(type)(w, vrow.data(), acc_ref.data(), n);
          kern.axpy_for(type)(w, vrow.data(), acc.data(), n);
        }
        for (int i = 0; i < n; ++i)
          ASSERT_NEAR(acc[size_t(i)], acc_ref[size_t(i)], kRows * 2 * kEps * bound[size_t(i)])
              << "element " << i;
      }
  }
}

// Small integers times power-of-two scales: no product or sum can round, so every level must
// give the reference's result exactly (catches a wrong element, block scale or tail).
TEST(AttentionKernels, ExactWhereNothingRounds) {
  const AttentionRowKernels& ref = attention_row_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const AttentionRowKernels& kern = attention_row_kernels(isa);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> small(-8, 8);
    for (AttnRowType type : kTypes)
      for (int n : kLengths) {
        SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " " + type_name(type) +
                     " n=" + std::to_string(n));
        std::vector<float> q(static_cast<size_t>(n)), x(static_cast<size_t>(n)), k;
        for (int i = 0; i < n; ++i) {
          q[size_t(i)] = float(small(rng));
          x[size_t(i)] = float(small(rng)) * 0.25f;
        }
        // q8_0: each block's largest value 31.75 gives it the scale 1/4, so values stay exact.
        for (int i0 = 0; i0 < n; i0 += 32) x[size_t(i0)] = i0 % 64 ? -31.75f : 31.75f;
        const std::vector<uint8_t> row = encode(type, x, k);
        EXPECT_EQ(kern.dot_for(type)(q.data(), row.data(), n),
                  ref.dot_for(type)(q.data(), row.data(), n));
        std::vector<float> acc(size_t(n), 1.0f), acc_ref(size_t(n), 1.0f);
        kern.axpy_for(type)(0.5f, row.data(), acc.data(), n);
        ref.axpy_for(type)(0.5f, row.data(), acc_ref.data(), n);
        EXPECT_EQ(acc, acc_ref);
      }
  }
}

// The multi-row kernels give every row exactly what the single-row kernel of the same table
// gives it (a row's attention never depends on how many rows or positions share the call), for
// row counts on both sides of the 4-, 8- and 16-row groupings, position counts on both sides of
// the 16-position vectors, at strides that leave gaps between rows.
TEST(AttentionKernels, MultiRowKernelsBitIdenticalToSingleRow) {
  for (KernelIsa isa : supported_kernel_isas()) {
    const AttentionRowKernels& kern = attention_row_kernels(isa);
    std::mt19937 rng(21);
    for (AttnRowType type : kTypes)
      for (int n : {1, 15, 16, 32, 33, 64, 80, 96, 128, 300, 576, 600})
        for (int kRows : {1, 2, 5, 8, 9, 16, 27, 32})
          for (int n_pos : {1, 3, 16, 17, 40, kAttnMaxPositions}) {
            const int64_t out_stride = n_pos + (kRows % 2 == 0 ? 0 : 7);
            SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " " + type_name(type) +
                         " n=" + std::to_string(n) + " rows=" + std::to_string(kRows) +
                         " positions=" + std::to_string(n_pos));
            const int64_t q_stride = n + 3;
            const std::vector<float> q = random_vector(rng, int(q_stride * kRows), 1.0f);
            std::vector<float> k;
            std::vector<std::vector<uint8_t>> k_rows;
            std::vector<const void*> k_ptrs;
            for (int p = 0; p < n_pos; ++p)
              k_rows.push_back(encode(type, random_vector(rng, n, 2.0f), k));
            for (const auto& row : k_rows) k_ptrs.push_back(row.data());
            std::vector<float> out(size_t(out_stride * kRows), -1.0f);
            kern.dot_rows_for(type)(q.data(), q_stride, kRows, k_ptrs.data(), n_pos, n, 0.125f,
                                    out.data(), out_stride);
            for (int r = 0; r < kRows; ++r)
              for (int64_t p = 0; p < out_stride; ++p) {
                const float got = out[size_t(r * out_stride + p)];
                if (p >= n_pos) {
                  ASSERT_EQ(got, -1.0f) << "wrote past the positions: row " << r << " " << p;
                  continue;
                }
                const float one =
                    kern.dot_for(type)(q.data() + r * q_stride, k_ptrs[size_t(p)], n) * 0.125f;
                ASSERT_EQ(std::memcmp(&one, &got, 4), 0) << "row " << r << " position " << p;
              }
            if (n_pos != 1) continue;  // the V side below once per row count
            // Positions 0..n_pos-1 each have their own stored row; row r's weights sit
            // w_stride apart with the positions' weights next to each other.
            std::vector<std::vector<uint8_t>> v_rows;
            for (int p = 0; p < kAttnMaxPositions; ++p)
              v_rows.push_back(encode(type, random_vector(rng, n, 2.0f), k));
            const void* v_ptrs[kAttnMaxPositions];
            for (size_t p = 0; p < v_rows.size(); ++p) v_ptrs[p] = v_rows[p].data();
            constexpr int64_t kWStride = kAttnMaxPositions + 2;
            const std::vector<float> w = random_vector(rng, int(kRows * kWStride), 1.0f);
            for (int n_v : {1, 2, 3, 4, 5, 16, 17, kAttnMaxPositions}) {
              std::vector<float> acc = random_vector(rng, int(q_stride * kRows), 0.5f);
              std::vector<float> acc_one = acc;
              kern.axpy_rows_for(type)(w.data(), kWStride, kRows, v_ptrs, n_v, acc.data(), q_stride,
                                       n);
              for (int p = 0; p < n_v; ++p)
                for (int r = 0; r < kRows; ++r)
                  kern.axpy_for(type)(w[size_t(r * kWStride + p)], v_ptrs[p],
                                      acc_one.data() + r * q_stride, n);
              ASSERT_EQ(std::memcmp(acc.data(), acc_one.data(), acc.size() * 4), 0)
                  << n_v << " positions";
            }
          }
  }
}

// Softmax of every level against the reference (std::exp, double sum): the SIMD exp is within a
// few ulp, so probabilities agree to 1e-6 relative; with f16 rounding, within one f16 step
// (2^-11 relative) where a value sits next to a rounding boundary. Probabilities sum to 1.
TEST(AttentionKernels, SoftmaxMatchesReference) {
  const AttentionRowKernels& ref = attention_row_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const AttentionRowKernels& kern = attention_row_kernels(isa);
    std::mt19937 rng(5);
    for (int n : {1, 2, 15, 16, 17, 100, 1000})
      for (bool round_f16 : {false, true}) {
        SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " n=" + std::to_string(n) +
                     (round_f16 ? " f16" : ""));
        std::vector<float> x = random_vector(rng, n, 8.0f);
        if (n > 3) x[3] = -200.0f;  // underflows to ~0 in both
        std::vector<float> want = x;
        ref.softmax(want.data(), n, round_f16);
        kern.softmax(x.data(), n, round_f16);
        double sum = 0;
        for (int j = 0; j < n; ++j) {
          // (f16 subnormals, below 2^-14, step by 2^-24 absolute.)
          const double tol = round_f16 ? std::fabs(want[size_t(j)]) / 1024 + 0x1p-24
                                       : 2e-6 * std::fabs(want[size_t(j)]) + 1e-30;
          ASSERT_NEAR(x[size_t(j)], want[size_t(j)], tol) << "position " << j;
          sum += x[size_t(j)];
        }
        EXPECT_NEAR(sum, 1.0, round_f16 ? 1e-3 : 1e-5);
      }
  }
}

// The online softmax's step of every level against the reference: the same running maximum
// (exact), each exp within 2e-6 relative (the softmax's bound), the sum within 1e-6 relative;
// positions far below the maximum underflow to 0 in both, a running maximum above the block's
// stays, and every tail length is covered.
TEST(AttentionKernels, SoftmaxStepMatchesReference) {
  const AttentionRowKernels& ref = attention_row_kernels(KernelIsa::kScalar);
  for (KernelIsa isa : supported_kernel_isas()) {
    const AttentionRowKernels& kern = attention_row_kernels(isa);
    std::mt19937 rng(7);
    for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 64, 100, 1000})
      for (float start : {-INFINITY, 0.0f, 50.0f}) {
        SCOPED_TRACE(std::string(kernel_isa_name(isa)) + " n=" + std::to_string(n) +
                     " running max " + std::to_string(start));
        std::vector<float> x = random_vector(rng, n, 8.0f);
        if (n > 3) x[3] = -200.0f;
        if (n > 9) x[n - 1] = 9.5f;  // the block's maximum in a tail
        std::vector<float> want = x;
        float want_max = start, got_max = start;
        const double want_sum = ref.softmax_step(want.data(), n, &want_max);
        const double sum = kern.softmax_step(x.data(), n, &got_max);
        ASSERT_EQ(got_max, want_max);
        if (start == 50.0f) EXPECT_EQ(got_max, 50.0f);
        for (int j = 0; j < n; ++j)
          ASSERT_NEAR(x[size_t(j)], want[size_t(j)], 2e-6 * std::fabs(want[size_t(j)]) + 1e-30)
              << "position " << j;
        EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
        EXPECT_GT(want_sum, 0.0);
      }
  }
}

// The query rounding of the f16 contract: every level equals the reference bit for bit, over
// ordinary values, f16 subnormals, values past the f16 range, exact ties and every tail length.
TEST(AttentionKernels, RoundF16BitIdenticalToReference) {
  const AttentionRowKernels& ref = attention_row_kernels(KernelIsa::kScalar);
  std::mt19937 rng(9);
  std::vector<float> x = random_vector(rng, 200, 3.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            1e-8f,
                            -3e-6f,
                            6.1e-5f,
                            65504.0f,
                            65520.0f,
                            1e6f,
                            -1e6f,
                            1.0f + 1.0f / 2048,
                            1.0f + 3.0f / 2048,
                            2049.0f,
                            2051.0f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 7] = specials[i];
  for (KernelIsa isa : supported_kernel_isas()) {
    const AttentionRowKernels& kern = attention_row_kernels(isa);
    for (int n : {1, 7, 8, 9, 15, 16, 17, 64, 200}) {
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 1, -7.0f);
      ref.round_f16(x.data(), want.data(), n);
      kern.round_f16(x.data(), got.data(), n);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), size_t(n) * 4), 0)
          << kernel_isa_name(isa) << " n=" << n;
      ASSERT_EQ(got[size_t(n)], -7.0f) << "wrote past the row";
    }
  }
}

TEST(AttentionKernels, SelectedTableIsTheSelectedLevels) {
  EXPECT_EQ(&attention_row_kernels(), &attention_row_kernels(selected_kernel_isa()));
}

}  // namespace
}  // namespace vela::kernels

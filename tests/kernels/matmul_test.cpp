// matmul equals a naive float reference, row ranges compose, and the scratch is reused.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dot_reference.h"
#include "kernels/type_traits.h"

namespace vela {
namespace {

constexpr int64_t kRows = 37;  // not a multiple of the row tile: exercises the remainder
constexpr int64_t kCols = 512;
constexpr int64_t kTokens = 5;

struct Problem {
  std::vector<uint8_t> w;  // [kRows, kCols] in the weight type
  std::vector<float> x;    // [kTokens, kCols]
};

Problem make_problem(GgmlType w_type, uint32_t seed) {
  Problem p;
  const auto w = test::normal_values(kRows * kCols, 0.02f, seed);
  p.w = test::encode(w_type, w);
  p.x = test::normal_values(kTokens * kCols, 1.0f, seed + 1);
  return p;
}

class Matmul : public testing::TestWithParam<GgmlType> {};

TEST_P(Matmul, EqualsNaiveFloatReference) {
  const GgmlType w_type = GetParam();
  const Problem p = make_problem(w_type, 42);
  const size_t w_row_bytes = p.w.size() / kRows;
  std::vector<float> y(kTokens * kRows, -1.0f);  // [kTokens, kRows]
  MatmulScratch scratch;
  matmul(w_type, p.w.data(), kRows, kCols, p.x.data(), kTokens, y.data(), scratch);

  // Naive reference: decode each weight row, convert each activation row to vec_dot_type the
  // same way (so both sides see identical operands), and dot them in double.
  const TypeTraits* traits = type_traits(w_type);
  const auto act_info = *ggml_type_info(uint32_t(traits->vec_dot_type));
  std::vector<uint8_t> act(size_t(row_bytes(act_info, kCols)));
  double unquantized_err2 = 0, sig2 = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    traits->from_float(p.x.data() + t * kCols, act.data(), kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      const uint8_t* w_row = p.w.data() + size_t(r) * w_row_bytes;
      const auto ref = test::dot_reference(w_type, w_row, act.data(), kCols);
      const float got = y[size_t(t * kRows + r)];
      ASSERT_NEAR(got, ref.value, ref.tolerance) << "token " << t << " row " << r;
      // Against the unquantized activations too, to catch a mismatched pairing of operands.
      const auto w_dec = test::decode(w_type, w_row, kCols);
      double exact = 0;
      for (int64_t c = 0; c < kCols; ++c)
        exact += double(w_dec[size_t(c)]) * p.x[size_t(t * kCols + c)];
      unquantized_err2 += (got - exact) * (got - exact);
      sig2 += exact * exact;
    }
  }
  // Activation quantization error alone: Q8 types keep ~1% relative error, bf16 ~0.3%.
  EXPECT_LT(std::sqrt(unquantized_err2 / sig2), 0.02) << ggml_type_name(uint32_t(w_type));
}

TEST_P(Matmul, RowRangesComposeToFullResult) {
  const GgmlType w_type = GetParam();
  const Problem p = make_problem(w_type, 7);
  MatmulScratch scratch;
  std::vector<float> full(kTokens * kRows), split(kTokens * kRows, -1.0f);
  matmul(w_type, p.w.data(), kRows, kCols, p.x.data(), kTokens, full.data(), scratch);
  const QuantizedActivations act =
      quantize_activations(w_type, p.x.data(), kCols, kTokens, scratch);
  // Uneven ranges, as a thread pool would hand out.
  const int64_t cuts[] = {0, 5, 6, 23, kRows};
  for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
    matmul_rows(w_type, p.w.data(), kRows, kCols, cuts[i], cuts[i + 1], act, kTokens, split.data());
  }
  EXPECT_EQ(full, split);
}

INSTANTIATE_TEST_SUITE_P(Types, Matmul,
                         testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                         GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                         GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K,
                                         GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const auto& info) { return ggml_type_name(uint32_t(info.param)); });

TEST(MatmulScratch, SizedOnceAndReused) {
  const Problem p = make_problem(GgmlType::Q4_K, 3);
  MatmulScratch scratch;
  EXPECT_EQ(scratch.capacity(), 0u);
  const size_t need = matmul_scratch_bytes(GgmlType::Q4_K, kCols, kTokens);
  EXPECT_EQ(need, size_t(kTokens * (kCols / 256) * 292));
  scratch.reserve(need);
  const uint8_t* buffer = scratch.data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer) % 64, 0u);
  std::vector<float> y(kTokens * kRows);
  matmul(GgmlType::Q4_K, p.w.data(), kRows, kCols, p.x.data(), kTokens, y.data(), scratch);
  matmul(GgmlType::Q4_K, p.w.data(), kRows, kCols, p.x.data(), 1, y.data(), scratch);
  EXPECT_EQ(scratch.data(), buffer);  // no reallocation for equal or smaller batches
  EXPECT_EQ(scratch.capacity(), need);
}

TEST(MatmulScratch, F32ActivationsAreUsedInPlace) {
  EXPECT_EQ(matmul_scratch_bytes(GgmlType::F32, kCols, kTokens), 0u);
  const Problem p = make_problem(GgmlType::F32, 9);
  MatmulScratch scratch;
  const QuantizedActivations act =
      quantize_activations(GgmlType::F32, p.x.data(), kCols, kTokens, scratch);
  EXPECT_EQ(act.data, reinterpret_cast<const uint8_t*>(p.x.data()));
  EXPECT_EQ(act.row_stride, size_t(kCols * 4));
  EXPECT_EQ(scratch.capacity(), 0u);
}

TEST(MatmulDeathTest, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(256), y(4);
  MatmulScratch scratch;
  EXPECT_DEATH(matmul(GgmlType::Q4_0, w.data(), 1, 48, x.data(), 1, y.data(), scratch),
               "multiple of the block size");
  EXPECT_DEATH(matmul(GgmlType::Q8_K, w.data(), 1, 256, x.data(), 1, y.data(), scratch),
               "no dot-product kernel");
}

}  // namespace
}  // namespace vela

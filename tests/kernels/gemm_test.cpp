// TypeTraits::gemm_tile (the register-tiled prompt-processing kernel) against vec_dot: every
// output bit-identical to vec_dot for its (weight row, activation row) pair, over ragged tile
// edges, odd block counts, padded strides and strided outputs; and matmul_rows, which uses it for
// batches, equal bit for bit to one vec_dot per element. Skipped where no table has the kernel.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dot_reference.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/type_traits.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/blocks.h"

namespace vela {
namespace {

using kernels::TraitsTable;
using kernels::avx512::Avx512Extensions;

// The codebook and ternary types decode 16 rows to int8 levels (gemm_int8_levels_avx512.h).
const GgmlType kVnniGemmTypes[] = {GgmlType::Q4_0,   GgmlType::Q8_0,  GgmlType::IQ2_XXS,
                                   GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                                   GgmlType::IQ3_S,  GgmlType::IQ1_S, GgmlType::IQ1_M,
                                   GgmlType::TQ1_0,  GgmlType::TQ2_0};
const GgmlType kFloatGemmTypes[] = {GgmlType::F16, GgmlType::F32, GgmlType::BF16};
const GgmlType kAvx2GemmTypes[] = {GgmlType::F16,     GgmlType::F32,    GgmlType::BF16,
                                   GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
                                   GgmlType::IQ3_XXS, GgmlType::IQ3_S,  GgmlType::IQ1_S,
                                   GgmlType::IQ1_M,   GgmlType::TQ1_0,  GgmlType::TQ2_0};

size_t bytes_of(GgmlType type, int64_t n) {
  return size_t(row_bytes(*ggml_type_info(uint32_t(type)), n));
}

// n rounded up to whole blocks of `type` (32 elements, 256 for the super-block types).
int64_t whole_blocks(GgmlType type, int64_t n) {
  const int64_t block = ggml_type_info(uint32_t(type))->block_size;
  return (n + block - 1) / block * block;
}

bool super_block_type(GgmlType type) {
  return ggml_type_info(uint32_t(type))->block_size == 256;
}

// The AVX-512 table for the given extensions, built directly so the non-VNNI variant is covered
// on a CPU with VNNI.
TraitsTable avx512_table(Avx512Extensions ext) {
  TraitsTable t;
  for (size_t i = 0; i < t.size(); ++i) {
    const TypeTraits* s = type_traits_for(KernelIsa::kScalar, static_cast<GgmlType>(i));
    t[i] = s != nullptr ? *s : TypeTraits{GgmlType::F32, nullptr, nullptr, nullptr};
  }
  kernels::avx512::register_kernels(t, ext);
  return t;
}

// rows x n weights in `type`, each row at `stride` bytes (padding filled with 0xEE); some blocks
// scaled up or zeroed so the per-block scales vary.
std::vector<uint8_t> make_rows(GgmlType type, int64_t rows, int64_t n, size_t stride,
                               uint32_t seed) {
  std::vector<uint8_t> out(stride * size_t(rows), 0xEE);
  for (int64_t r = 0; r < rows; ++r) {
    auto v = test::normal_values(n, 0.02f, seed + uint32_t(r));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] *= (i / 32 % 5 == 3) ? 30.0f : (i / 32 % 7 == 2 ? 0.0f : 1.0f);
    const auto row = test::encode(type, v);
    std::memcpy(&out[size_t(r) * stride], row.data(), row.size());
  }
  return out;
}

// rows x n activations converted to `type`'s vec_dot_type, each at `stride` bytes.
std::vector<uint8_t> make_acts(const TypeTraits& traits, int64_t rows, int64_t n, size_t stride,
                               uint32_t seed) {
  const TypeTraits& act = *type_traits_for(KernelIsa::kScalar, traits.vec_dot_type);
  std::vector<uint8_t> out(stride * size_t(rows), 0xEE);
  for (int64_t r = 0; r < rows; ++r) {
    auto x = test::normal_values(n, 1.0f, seed + uint32_t(r));
    for (size_t i = 5; i < x.size(); i += 97) x[i] *= 40.0f;  // outliers
    act.from_float(x.data(), &out[size_t(r) * stride], n);
  }
  return out;
}

struct GemmCase {
  KernelIsa isa;  // kAvx2 or kAvx512
  GgmlType type;
};

class Gemm : public testing::TestWithParam<GemmCase> {
 protected:
  void SetUp() override {
    if (GetParam().isa == KernelIsa::kAvx2) {
      if (!cpu_features().avx2) GTEST_SKIP() << "CPU without AVX2";
      traits_ = type_traits_for(KernelIsa::kAvx2, type());
    } else {
      if (!cpu_features().avx512 || !cpu_features().avx512_vnni)
        GTEST_SKIP() << "CPU without AVX-512 VNNI";
      if (type() == GgmlType::BF16 && !cpu_features().avx512_bf16)
        GTEST_SKIP() << "CPU without AVX512-BF16 (BF16 has no gemm_tile there)";
      table_ = avx512_table({.vnni = true, .bf16 = cpu_features().avx512_bf16});
      traits_ = &table_[size_t(type())];
    }
    ASSERT_NE(traits_, nullptr);
    ASSERT_NE(traits_->gemm_tile, nullptr);
  }
  static GgmlType type() { return GetParam().type; }
  // gemm_tile over rows x acts with padded strides and out_stride > rows; checks each output
  // against vec_dot bit for bit and that nothing between outputs is written.
  void check(int64_t n, int64_t rows, int64_t acts, uint32_t seed) {
    const GgmlType type = Gemm::type();
    const size_t w_stride = bytes_of(type, n) + 18;
    const size_t a_stride = bytes_of(traits_->vec_dot_type, n) + 36;
    const auto w = make_rows(type, rows, n, w_stride, seed);
    const auto a = make_acts(*traits_, acts, n, a_stride, seed + 1000);
    const int64_t out_stride = rows + 3;
    std::vector<float> out(size_t(acts * out_stride), -3.0f);  // [acts, out_stride]
    traits_->gemm_tile(n, w.data(), w_stride, rows, a.data(), a_stride, acts, out.data(),
                       out_stride);
    for (int64_t t = 0; t < acts; ++t) {
      for (int64_t r = 0; r < out_stride; ++r) {
        const float got = out[size_t(t * out_stride + r)];
        if (r >= rows) {
          ASSERT_EQ(got, -3.0f) << "wrote outside the tile: t=" << t << " r=" << r;
          continue;
        }
        const float expect =
            traits_->vec_dot(n, &w[size_t(r) * w_stride], &a[size_t(t) * a_stride]);
        ASSERT_EQ(got, expect) << "n=" << n << " rows=" << rows << " acts=" << acts << " t=" << t
                               << " r=" << r;
      }
    }
  }
  TraitsTable table_;
  const TypeTraits* traits_ = nullptr;
};

// Block counts around vec_dot's chain and main-loop boundaries (odd counts leave a lone block).
TEST_P(Gemm, BitIdenticalToVecDotForEveryLength) {
  const int64_t block = ggml_type_info(uint32_t(type()))->block_size;
  for (int64_t nb : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 129}) {
    if (super_block_type(type()) && nb > 13) continue;  // as many blocks as 2 of 129 x 32
    check(block * nb, 5, 6, uint32_t(nb));
  }
}

// Every ragged edge of the register tiles (AVX-512 4 x 3, AVX2 2 x 3; the int8-levels kernel's
// 16-row groups and 8-token tiles) on both sides.
TEST_P(Gemm, BitIdenticalForRaggedTiles) {
  const int64_t n = whole_blocks(type(), 96);
  for (int64_t rows = 1; rows <= 9; ++rows)
    for (int64_t acts = 1; acts <= 9; ++acts) check(n, rows, acts, uint32_t(rows * 16 + acts));
  if (super_block_type(type()))
    for (int64_t rows : {15, 16, 17, 31, 33, 48})
      for (int64_t acts : {4, 8, 11, 16, 17}) check(n, rows, acts, uint32_t(rows * 32 + acts));
}

// Float weights take any row length: tails of every size around the 16-lane (BF16: 32) chunks
// and the chain step.
TEST_P(Gemm, BitIdenticalForOddFloatLengths) {
  const GgmlType type = Gemm::type();
  if (type != GgmlType::F16 && type != GgmlType::F32 && type != GgmlType::BF16)
    GTEST_SKIP() << "block types";
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 95, 100})
    check(n, 6, 5, uint32_t(n));
}

// Enough long rows that the kernel splits them into several cached weight blocks.
TEST_P(Gemm, BitIdenticalAcrossWeightBlocks) {
  check(whole_blocks(type(), 4128), 70, 5, 7);
}

// Enough activation rows that a kernel blocking the tokens for its caches (AVX2: ~192 KB of
// them) runs several token blocks, with a ragged last one.
TEST_P(Gemm, BitIdenticalAcrossTokenBlocks) {
  check(2048, 13, 61, 9);
}

// Q8_0's -128 weight and extreme activation quants: the offset form stays exact.
TEST_P(Gemm, ExtremeQuants) {
  const GgmlType type = Gemm::type();
  if (type != GgmlType::Q8_0) GTEST_SKIP();
  constexpr int kBlocks = 7;
  std::vector<BlockQ8_0> w(kBlocks * 2), a(kBlocks * 3);
  for (size_t b = 0; b < w.size(); ++b) {
    w[b].d = 0x3C00;  // 1.0
    for (int j = 0; j < 32; ++j) w[b].qs[j] = int8_t(j % 3 == 0 ? -128 : 127 - j);
  }
  for (size_t b = 0; b < a.size(); ++b) {
    a[b].d = 0x3C00;
    for (int j = 0; j < 32; ++j) a[b].qs[j] = int8_t(j % 2 ? 127 : -127);
  }
  float out[3 * 2];
  traits_->gemm_tile(32 * kBlocks, w.data(), sizeof(BlockQ8_0) * kBlocks, 2,
                     reinterpret_cast<const uint8_t*>(a.data()), sizeof(BlockQ8_0) * kBlocks, 3,
                     out, 2);
  for (int t = 0; t < 3; ++t)
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(out[t * 2 + r],
                traits_->vec_dot(32 * kBlocks, &w[size_t(r) * kBlocks], &a[size_t(t) * kBlocks]));
}

// The super-block types against activation quants at +-127 (Q8_K's range): no int16 or int32
// sum of the int8-levels kernel saturates or wraps.
TEST_P(Gemm, ExtremeActivationQuants) {
  const GgmlType type = Gemm::type();
  if (!super_block_type(type) || traits_->vec_dot_type != GgmlType::Q8_K)
    GTEST_SKIP() << "Q8_K types";
  constexpr int64_t kBlocks = 3, kRows = 18, kActs = 5, kN = 256 * kBlocks;
  const size_t w_stride = bytes_of(type, kN);
  const auto w = make_rows(type, kRows, kN, w_stride, 5);
  std::vector<BlockQ8_K> a(size_t(kActs * kBlocks));
  for (size_t b = 0; b < a.size(); ++b) {
    a[b].d = 1.0f;
    for (int j = 0; j < 256; ++j) {
      const bool negative = b % 3 == 0 ? true : (b % 3 == 1 ? false : (j * 7 + int(b)) % 3 == 0);
      a[b].qs[j] = int8_t(negative ? -127 : 127);
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += a[b].qs[16 * s + j];
      a[b].bsums[s] = int16_t(sum);
    }
  }
  std::vector<float> out(size_t(kActs * kRows));  // [kActs, kRows]
  traits_->gemm_tile(kN, w.data(), w_stride, kRows, reinterpret_cast<const uint8_t*>(a.data()),
                     sizeof(BlockQ8_K) * kBlocks, kActs, out.data(), kRows);
  for (int64_t t = 0; t < kActs; ++t)
    for (int64_t r = 0; r < kRows; ++r)
      ASSERT_EQ(out[size_t(t * kRows + r)],
                traits_->vec_dot(kN, &w[size_t(r) * w_stride], &a[size_t(t * kBlocks)]))
          << "t=" << t << " r=" << r;
}

std::string case_name(const testing::TestParamInfo<GemmCase>& info) {
  return std::string(info.param.isa == KernelIsa::kAvx2 ? "avx2_" : "avx512_") +
         ggml_type_name(uint32_t(info.param.type));
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (GgmlType type : kVnniGemmTypes) cases.push_back({KernelIsa::kAvx512, type});
  for (GgmlType type : kFloatGemmTypes) cases.push_back({KernelIsa::kAvx512, type});
  for (GgmlType type : kAvx2GemmTypes) cases.push_back({KernelIsa::kAvx2, type});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemm, testing::ValuesIn(gemm_cases()), case_name);

// Without VNNI the unsigned-weight form could saturate, so no int8 kernel is installed.
TEST(GemmTable, NoKernelWithoutVnni) {
  if (!cpu_features().avx512) GTEST_SKIP() << "CPU without AVX-512";
  const TraitsTable t = avx512_table({.vnni = false, .bf16 = false});
  for (GgmlType type : kVnniGemmTypes) EXPECT_EQ(t[size_t(type)].gemm_tile, nullptr);
}

// matmul_rows on the active table (gemm_tile for batches where installed) equals one vec_dot per
// element, for batch sizes around the gemm threshold and row ranges that split tiles.
TEST(GemmMatmul, MatmulRowsEqualsVecDotBitForBit) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K,
                        GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::IQ2_XXS,
                        GgmlType::IQ2_S, GgmlType::IQ1_M, GgmlType::TQ1_0}) {
    const TypeTraits& traits = *type_traits(type);
    constexpr int64_t kRows = 37, kCols = 768;
    const size_t w_stride = bytes_of(type, kCols);
    const auto w = make_rows(type, kRows, kCols, w_stride, 11);
    for (int64_t n_tokens : {1, 3, 4, 5, 13}) {
      const auto x = test::normal_values(n_tokens * kCols, 1.0f, 99);  // [n_tokens, kCols]
      MatmulScratch scratch;
      const QuantizedActivations act =
          quantize_activations(type, x.data(), kCols, n_tokens, scratch);
      std::vector<float> y(size_t(n_tokens * kRows), -1.0f);  // [n_tokens, kRows]
      for (int64_t begin : {0, 5, 21})                        // ranges [0, 5), [5, 21), [21, 37)
        matmul_rows(type, w.data(), kRows, kCols, begin,
                    begin == 0   ? 5
                    : begin == 5 ? 21
                                 : kRows,
                    act, n_tokens, y.data());
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < kRows; ++r)
          ASSERT_EQ(y[size_t(t * kRows + r)], traits.vec_dot(kCols, &w[size_t(r) * w_stride],
                                                             act.data + size_t(t) * act.row_stride))
              << ggml_type_name(uint32_t(type)) << " tokens=" << n_tokens << " t=" << t
              << " r=" << r;
    }
  }
}

}  // namespace
}  // namespace vela

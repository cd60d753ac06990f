// The 16-row interleaved int8 kernels (kernels/packed): repacking is lossless; the scalar
// reference is within the float bound of the exact dot product; the AVX-512 VNNI and AMX kernels
// are bit-identical to the reference for every batch size (ragged token tiles, odd block counts,
// padded strides), which is what makes batched decoding equal to one sequence alone; and
// matmul_rows on an interleaved matrix equals the same rows computed one token at a time.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dot_reference.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "kernels/packed/packed_layout.h"
#include "kernels/type_traits.h"
#include "quant/blocks.h"
#include "quant/blocks_low_k.h"
#include "quant/blocks_nonlinear4.h"
#include "util/half.h"

namespace vela {
namespace {

size_t bytes_of(GgmlType type, int64_t n) {
  return size_t(row_bytes(*ggml_type_info(uint32_t(type)), n));
}

// rows x n weights, row-major; some blocks scaled up or zeroed so block scales vary.
std::vector<uint8_t> make_weights(GgmlType type, int64_t rows, int64_t n, uint32_t seed) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    auto v = test::normal_values(n, 0.02f, seed + uint32_t(r));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] *= (i / 32 % 5 == 3) ? 30.0f : (i / 32 % 7 == 2 ? 0.0f : 1.0f);
    const auto row = test::encode(type, v);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

GgmlType act_type(GgmlType w_type) {
  return type_traits_for(KernelIsa::kScalar, w_type)->vec_dot_type;
}

// Elements per block of the packed layout.
int64_t unit(GgmlType type) {
  return interleaved16_block_cols(type);
}

// rows x n activations of w_type's vec_dot_type at `stride` bytes (padding 0xEE), with outliers.
std::vector<uint8_t> make_acts(GgmlType w_type, int64_t rows, int64_t n, size_t stride,
                               uint32_t seed) {
  const TypeTraits& q8 = *type_traits_for(KernelIsa::kScalar, act_type(w_type));
  std::vector<uint8_t> out(stride * size_t(rows), 0xEE);
  for (int64_t r = 0; r < rows; ++r) {
    auto x = test::normal_values(n, 1.0f, seed + uint32_t(r));
    for (size_t i = 5; i < x.size(); i += 97) x[i] *= 40.0f;
    q8.from_float(x.data(), &out[size_t(r) * stride], n);
  }
  return out;
}

std::vector<uint8_t> packed(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t n) {
  std::vector<uint8_t> out(size_t(rows / kPackedRows * interleaved16_group_bytes(type, n)));
  pack_interleaved16(type, w.data(), n, 0, rows, out.data());
  return out;
}

// y: [n_act, y_stride] from `kernel`, unwritten cells left NaN.
std::vector<float> run(PackedGemmFn kernel, const std::vector<uint8_t>& w, int64_t rows, int64_t n,
                       const std::vector<uint8_t>& act, size_t act_stride, int64_t n_act,
                       int64_t y_stride) {
  std::vector<float> y(size_t(n_act * y_stride), std::nanf(""));
  PackedGemmArgs a;
  a.w = w.data();
  a.n_groups = rows / kPackedRows;
  a.n_cols = n;
  a.act = act.data();
  a.act_stride = act_stride;
  a.n_act = n_act;
  a.y = y.data();
  a.y_stride = y_stride;
  kernel(a);
  return y;
}

// A fixed pseudo-random sequence for the raw-block tests (a 32-bit linear congruential
// generator).
struct Lcg {
  uint32_t state;
  uint32_t operator()() { return state = state * 1664525u + 1013904223u; }
};

class PackedGemm : public testing::TestWithParam<GgmlType> {};

TEST_P(PackedGemm, RepackingIsLossless) {
  const GgmlType type = GetParam();
  for (int64_t blocks : {1, 3, 8}) {
    const int64_t n = blocks * unit(type);
    const auto w = make_weights(type, 32, n, 7);
    const auto p = packed(type, w, 32, n);
    std::vector<uint8_t> row(bytes_of(type, n));
    for (int64_t r = 0; r < 32; ++r) {
      unpack_interleaved16_row(type, p.data(), n, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), &w[size_t(r) * row.size()], row.size()), 0) << "row " << r;
    }
  }
}

TEST_P(PackedGemm, ReferenceWithinFloatBoundOfExactDot) {
  const GgmlType type = GetParam();
  const int64_t rows = 32, n = unit(type) * 37, n_act = 3;
  const size_t stride = bytes_of(act_type(type), n);
  const auto w = make_weights(type, rows, n, 11);
  const auto act = make_acts(type, n_act, n, stride, 12);
  const auto y = run(packed_gemm_kernel(PackedKernelKind::kReference, type),
                     packed(type, w, rows, n), rows, n, act, stride, n_act, rows);
  const size_t w_row = bytes_of(type, n);
  for (int64_t t = 0; t < n_act; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const auto ref =
          test::dot_reference(type, &w[size_t(r) * w_row], &act[size_t(t) * stride], n);
      EXPECT_NEAR(y[size_t(t * rows + r)], ref.value, ref.tolerance)
          << "row " << r << " token " << t;
    }
}

// Each SIMD kernel equals the reference bit for bit, for every token count around the tile
// sizes (16-row tiles), odd and even group counts, odd block counts and column chunks (for the
// float types, rows longer than their column blocks), padded activation rows and a wider y.
void expect_bit_identical(PackedGemmFn kernel, GgmlType type) {
  const PackedGemmFn ref = packed_gemm_kernel(PackedKernelKind::kReference, type);
  std::vector<int64_t> widths = {1, 7, 37, 64};
  // The float kernels go through long rows a column block (1024-2048 columns) at a time.
  if (unit(type) <= 2) widths.push_back(2600);
  for (int64_t blocks : widths) {
    const int64_t n = blocks * unit(type);
    // Odd and even group counts: a lone token's kernel walks the groups' halves in pairs.
    const int64_t rows = blocks % 2 != 0 ? 48 : 64;
    const auto w = packed(type, make_weights(type, rows, n, uint32_t(n)), rows, n);
    std::vector<int64_t> n_acts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 15, 16, 17, 31, 33};
    // The float kernels widen F16 blocks once from 128 tokens on.
    if (unit(type) <= 2) n_acts.push_back(130);
    for (int64_t n_act : n_acts) {
      const size_t stride = bytes_of(act_type(type), n) + 8;  // padded, 4-aligned for Q8_K
      const auto act = make_acts(type, n_act, n, stride, uint32_t(n_act));
      const int64_t y_stride = rows + 5;
      const auto want = run(ref, w, rows, n, act, stride, n_act, y_stride);
      const auto got = run(kernel, w, rows, n, act, stride, n_act, y_stride);
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << "wrote outside its outputs at " << i;
          continue;
        }
        uint32_t a, b;
        std::memcpy(&a, &want[i], 4);
        std::memcpy(&b, &got[i], 4);
        ASSERT_EQ(a, b) << "n=" << n << " n_act=" << n_act << " index " << i << ": " << want[i]
                        << " vs " << got[i];
      }
    }
  }
}

void expect_bit_identical(PackedKernelKind kind, GgmlType type) {
  const PackedGemmFn kernel = packed_gemm_kernel(kind, type);
  if (kernel == nullptr) GTEST_SKIP() << "kernel not available on this CPU or for this type";
  expect_bit_identical(kernel, type);
}

TEST_P(PackedGemm, Avx2BitIdenticalToReference) {
  expect_bit_identical(PackedKernelKind::kAvx2, GetParam());
}

TEST_P(PackedGemm, Avx512VnniBitIdenticalToReference) {
  expect_bit_identical(PackedKernelKind::kAvx512, GetParam());
}

TEST_P(PackedGemm, AmxBitIdenticalToReference) {
  expect_bit_identical(PackedKernelKind::kAmx, GetParam());
}

// Weights at their largest levels against activations at +-127, where the kernels' int16 pair
// sums come closest to overflowing (Q5_K's 5-bit levels: 4 vpmaddubsw sums per int16 add, not 8):
// every SIMD kernel still equals the reference bit for bit, for a lone token, small token tiles
// and groups decoded once for many tokens.
TEST_P(PackedGemm, SimdKernelsExactAtExtremeLevels) {
  const GgmlType type = GetParam();
  const int64_t rows = 32, n = 2 * unit(type) * (unit(type) <= 2 ? 64 : 1);
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < rows; ++r) {
    // Constant rows, rows of alternating sign, and rows whose blocks of 32 open with -1 and then
    // hold 15/16: that first value sets the scale, so Q4_0 / Q5_0 store the rest at their top
    // level (15 / 31) and Q4_1 / Q5_1 likewise, which constant rows never reach.
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[size_t(i)] = r % 4 == 0   ? 1.0f
                     : r % 4 == 1 ? -1.0f
                     : r % 4 == 2 ? (i % 2 == 0 ? 1.0f : -0.5f)
                                  : (i % 32 == 0 ? -1.0f : 0.9375f);
    const auto row = test::encode(type, v);
    w.insert(w.end(), row.begin(), row.end());
  }
  const auto pw = packed(type, w, rows, n);
  const TypeTraits& q8 = *type_traits_for(KernelIsa::kScalar, act_type(type));
  const size_t stride = bytes_of(act_type(type), n);
  for (int64_t n_act : {1, 3, 17}) {
    std::vector<uint8_t> act(stride * size_t(n_act));
    for (int64_t t = 0; t < n_act; ++t) {
      std::vector<float> x(static_cast<size_t>(n), t % 3 == 0 ? 1.0f : -1.0f);
      if (t % 3 == 2)
        for (int64_t i = 1; i < n; i += 2) x[size_t(i)] = -x[size_t(i)];
      q8.from_float(x.data(), &act[size_t(t) * stride], n);
    }
    const auto want = run(packed_gemm_kernel(PackedKernelKind::kReference, type), pw, rows, n, act,
                          stride, n_act, rows);
    for (PackedKernelKind kind :
         {PackedKernelKind::kAvx2, PackedKernelKind::kAvx512, PackedKernelKind::kAmx}) {
      const PackedGemmFn kernel = packed_gemm_kernel(kind, type);
      if (kernel == nullptr) continue;
      const auto got = run(kernel, pw, rows, n, act, stride, n_act, rows);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
          << "kernel kind " << int(kind) << ", " << n_act << " tokens";
    }
  }
}

// matmul_rows on the interleaved layout: any row split and any batch gives each token the
// floats it gets alone (the engine's batched == one-at-a-time guarantee), and the values match
// the row-major matmul within the float bound.
TEST_P(PackedGemm, MatmulRowsBatchInvariant) {
  const GgmlType type = GetParam();
  const int64_t rows = 64, n = unit(type) * 9;
  if (!prefers_interleaved16(type, rows, n))
    GTEST_SKIP() << "no packed kernels at this kernel level";
  const auto w = make_weights(type, rows, n, 5);
  const auto p = packed(type, w, rows, n);
  const int64_t n_tokens = 21;
  std::vector<float> x(size_t(n_tokens * n));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto v = test::normal_values(n, 1.0f, uint32_t(100 + t));
    std::copy(v.begin(), v.end(), x.begin() + t * n);
  }
  MatmulScratch scratch, scratch_prepared;
  std::vector<float> batched(size_t(n_tokens * rows)), plain(batched.size());
  std::vector<float> batched_prepared(batched.size());
  const QuantizedActivations act = quantize_activations(type, x.data(), n, n_tokens, scratch);
  // Converted for interleaved weights: with the packed kernel's own copy where it has one.
  const QuantizedActivations act_prepared = quantize_activations(
      type, x.data(), n, n_tokens, scratch_prepared, WeightLayout::kInterleaved16);
  if (active_packed_kernels(type).prep_for_tokens(n_tokens) != nullptr) {
    ASSERT_NE(act_prepared.packed, nullptr);
  }
  for (int64_t r = 0; r < rows; r += 16) {  // split by groups, as MatmulSplit does
    matmul_rows(type, p.data(), rows, n, r, r + 16, act, n_tokens, batched.data(),
                WeightLayout::kInterleaved16);
    matmul_rows(type, p.data(), rows, n, r, r + 16, act_prepared, n_tokens, batched_prepared.data(),
                WeightLayout::kInterleaved16);
  }
  ASSERT_EQ(std::memcmp(batched.data(), batched_prepared.data(), batched.size() * 4), 0)
      << "the prepared activation copy changed a result";
  matmul(type, w.data(), rows, n, x.data(), n_tokens, plain.data(), scratch);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<float> alone(static_cast<size_t>(rows));
    matmul(type, p.data(), rows, n, x.data() + t * n, 1, alone.data(), scratch,
           WeightLayout::kInterleaved16);
    for (int64_t r = 0; r < rows; ++r) {
      const float b = batched[size_t(t * rows + r)];
      ASSERT_EQ(std::memcmp(&b, &alone[size_t(r)], 4), 0) << "token " << t << " row " << r;
      EXPECT_NEAR(b, plain[size_t(t * rows + r)], 1e-4 * (1 + std::fabs(b)));
    }
  }
}

// A matrix whose row count is not a multiple of 16 has no whole last group: it stays row-major
// (the row kernels serve it), while the same rows cut to whole groups are packed.
TEST_P(PackedGemm, RowCountsOffSixteenStayRowMajor) {
  const GgmlType type = GetParam();
  const int64_t n = unit(type) * 4;
  const bool packs = active_packed_kernels(type).small != nullptr;
  EXPECT_EQ(prefers_interleaved16(type, 48, n), packs);
  for (int64_t rows : {1, 8, 24, 40, 47, 49})
    EXPECT_FALSE(prefers_interleaved16(type, rows, n)) << rows << " rows";
}

// The codebook formats (IQ4_NL, MXFP4) over raw blocks rather than quantized values: every code
// in every position, the extreme levels (IQ4_NL's -127 and 113) against activation quants of
// +-127, and for MXFP4 every e8m0 scale byte from 0 (the subnormal 2^-128) to 200 (larger ones
// overflow these sums to infinity). Packing round-trips bit for bit, the reference is the row
// kernels' dot product within the float bound where the scales are normal, and every SIMD kernel
// equals the reference bit for bit, subnormal scales included.
class PackedCodebook : public testing::TestWithParam<GgmlType> {};

TEST_P(PackedCodebook, EveryCodeAndScaleExactAgainstReference) {
  const GgmlType type = GetParam();
  const int64_t rows = 48, nb = 9, n = nb * kPackedBlockK;
  const size_t block = type == GgmlType::MXFP4 ? sizeof(BlockMXFP4) : sizeof(BlockIQ4_NL);
  std::vector<uint8_t> w(size_t(rows * nb) * block);
  Lcg next{12345};
  for (int64_t i = 0; i < rows * nb; ++i) {
    uint8_t* b = &w[size_t(i) * block];
    if (type == GgmlType::MXFP4) {
      b[0] = uint8_t(i % 201);  // e8m0 scale byte
    } else {
      const uint16_t d = fp32_to_fp16(float(1 + next() % 1000) * 1e-5f);
      std::memcpy(b, &d, 2);
    }
    uint8_t* qs = b + (block - 16);
    for (int j = 0; j < 16; ++j) {
      // Blocks of one repeated extreme code (IQ4_NL: 0 is -127, 15 is 113; MXFP4: 7 and 15 are
      // +-12), else every pair of codes by position and row, else random.
      const int64_t kind = i % 4;
      qs[j] = kind == 0   ? uint8_t(i % 8 < 4 ? 0x00 : 0xFF)
              : kind == 1 ? uint8_t(i % 8 < 4 ? 0x77 : 0xF7)
              : kind == 2 ? uint8_t((j + i) % 16 | ((j + 3 * i) % 16) << 4)
                          : uint8_t(next() >> 24);
    }
  }
  const auto pw = packed(type, w, rows, n);
  std::vector<uint8_t> row(size_t(nb) * block);
  for (int64_t r = 0; r < rows; ++r) {
    unpack_interleaved16_row(type, pw.data(), n, r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), &w[size_t(r) * row.size()], row.size()), 0) << "row " << r;
  }
  const size_t stride = bytes_of(GgmlType::Q8_0, n);
  // Rows with a block whose scale times the activations' (at least 0.01) is subnormal in f32.
  const auto subnormal_row = [&](int64_t r) {
    for (int64_t b = 0; b < nb; ++b)
      if (type == GgmlType::MXFP4 && (r * nb + b) % 201 < 9) return true;
    return false;
  };
  for (int64_t n_act : {1, 2, 5, 17}) {
    std::vector<uint8_t> act(stride * size_t(n_act));
    for (int64_t t = 0; t < n_act; ++t) {
      auto* a = reinterpret_cast<BlockQ8_0*>(&act[size_t(t) * stride]);
      for (int64_t b = 0; b < nb; ++b) {
        a[b].d = fp32_to_fp16(float(1 + (t * nb + b) % 17) * 0.01f);
        for (int k = 0; k < kQK8_0; ++k)
          a[b].qs[k] = t % 3 == 0   ? int8_t(k % 2 ? 127 : -127)
                       : t % 3 == 1 ? int8_t(127)
                                    : int8_t((int(next() >> 24) - 128) | 1);  // never -128
      }
    }
    const auto want = run(packed_gemm_kernel(PackedKernelKind::kReference, type), pw, rows, n, act,
                          stride, n_act, rows);
    for (int64_t t = 0; t < n_act; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        const float got = want[size_t(t * rows + r)];
        ASSERT_TRUE(std::isfinite(got)) << "row " << r << " token " << t;
        if (subnormal_row(r)) continue;
        const auto ref =
            test::dot_reference(type, &w[size_t(r) * row.size()], &act[size_t(t) * stride], n);
        EXPECT_NEAR(got, ref.value, ref.tolerance) << "row " << r << " token " << t;
      }
    for (PackedKernelKind kind : {PackedKernelKind::kAvx2, PackedKernelKind::kAvx512}) {
      const PackedGemmFn kernel = packed_gemm_kernel(kind, type);
      if (kernel == nullptr) continue;
      const auto got = run(kernel, pw, rows, n, act, stride, n_act, rows);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
          << "kernel kind " << int(kind) << ", " << n_act << " tokens";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PackedCodebook, testing::Values(GgmlType::IQ4_NL, GgmlType::MXFP4),
                         [](const auto& info) {
                           return std::string(ggml_type_name(uint32_t(info.param)));
                         });

// Weights of `type` as raw super-blocks (`wb`: rows of nb blocks each) checked on the packed
// layout: packing round-trips bit for bit, the reference is the row kernels' dot product within
// its float bound, and every SIMD kernel equals the reference bit for bit, against activation
// quants of +-127 at both signs, all +-127 and random, over token counts on both sides of every
// tile size.
void expect_super_blocks_exact(GgmlType type, const std::vector<uint8_t>& wb, int64_t rows,
                               int64_t nb) {
  const int64_t n = nb * kQK_K;
  const auto pw = packed(type, wb, rows, n);
  const size_t row_bytes_w = wb.size() / size_t(rows);
  std::vector<uint8_t> row(row_bytes_w);
  for (int64_t r = 0; r < rows; ++r) {
    unpack_interleaved16_row(type, pw.data(), n, r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), &wb[size_t(r) * row_bytes_w], row_bytes_w), 0) << "row " << r;
  }
  Lcg next{777};
  const size_t stride = bytes_of(GgmlType::Q8_K, n);
  for (int64_t n_act : {1, 2, 3, 5, 8, 11, 17, 33}) {
    std::vector<uint8_t> act(stride * size_t(n_act));
    for (int64_t t = 0; t < n_act; ++t) {
      auto* a = reinterpret_cast<BlockQ8_K*>(&act[size_t(t) * stride]);
      for (int64_t b = 0; b < nb; ++b) {
        a[b].d = float(1 + (t * nb + b) % 17) * 0.01f;
        for (int k = 0; k < kQK_K; ++k)
          a[b].qs[k] = t % 3 == 0   ? int8_t(k % 2 ? 127 : -127)
                       : t % 3 == 1 ? int8_t(t % 2 ? 127 : -127)
                                    : int8_t((int(next() >> 24) - 128) | 1);  // never -128
        for (int s = 0; s < kQK_K / 16; ++s) {
          int sum = 0;
          for (int k = 0; k < 16; ++k) sum += a[b].qs[16 * s + k];
          a[b].bsums[s] = int16_t(sum);
        }
      }
    }
    const auto want = run(packed_gemm_kernel(PackedKernelKind::kReference, type), pw, rows, n, act,
                          stride, n_act, rows);
    for (int64_t t = 0; t < n_act; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        const auto ref =
            test::dot_reference(type, &wb[size_t(r) * row_bytes_w], &act[size_t(t) * stride], n);
        EXPECT_NEAR(want[size_t(t * rows + r)], ref.value, ref.tolerance)
            << "row " << r << " token " << t;
      }
    for (PackedKernelKind kind : {PackedKernelKind::kAvx2, PackedKernelKind::kAvx512}) {
      const PackedGemmFn kernel = packed_gemm_kernel(kind, type);
      if (kernel == nullptr) continue;
      const auto got = run(kernel, pw, rows, n, act, stride, n_act, rows);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
          << "kernel kind " << int(kind) << ", " << n_act << " tokens";
    }
  }
}

// The raw bytes of a vector of blocks.
template <class Block>
std::vector<uint8_t> bytes_of_blocks(const std::vector<Block>& w) {
  std::vector<uint8_t> bytes(w.size() * sizeof(Block));
  std::memcpy(bytes.data(), w.data(), bytes.size());
  return bytes;
}

// IQ4_XS over raw super-blocks: every code in every position, sub-block scales at both ends
// (ls 0 and 63: -32 and 31) and random, the extreme levels (-127, 113) against activation quants
// of +-127, where the AVX2 kernel's int16 pair sums and their scaling by vpmaddwd come closest to
// overflowing. Packing round-trips bit for bit, the reference is the row kernels' dot product
// within the float bound, and every SIMD kernel equals the reference bit for bit.
TEST(PackedIQ4_XS, EveryCodeAndScaleExactAgainstReference) {
  const GgmlType type = GgmlType::IQ4_XS;
  const int64_t rows = 48, nb = 3;
  std::vector<BlockIQ4_XS> w(size_t(rows * nb));
  Lcg next{4242};
  for (int64_t i = 0; i < rows * nb; ++i) {
    BlockIQ4_XS& b = w[size_t(i)];
    b.d = fp32_to_fp16(float(1 + next() % 1000) * 1e-5f);
    const int64_t kind = i % 4;
    const uint32_t scales = kind == 0 ? 0u : kind == 1 ? ~0u : next();
    b.scales_h = uint16_t(scales >> 16);
    std::memcpy(b.scales_l, &scales, 4);
    for (int j = 0; j < kQK4_XS / 2; ++j)
      b.qs[j] = kind < 2    ? uint8_t(i % 8 < 4 ? 0x00 : 0xFF)
                : kind == 2 ? uint8_t((j + i) % 16 | ((j + 3 * i) % 16) << 4)
                            : uint8_t(next() >> 24);
  }
  expect_super_blocks_exact(type, bytes_of_blocks(w), rows, nb);
}

// Q3_K over raw super-blocks: every q (0..7) in every position and every scale (0..63: -32..31),
// set field by field in a quarter of the blocks, the scales and every byte of hmask and qs at
// both ends (all 0, all 1) and random elsewhere, so the extreme levels (-4 and 3) meet activation
// quants of +-127. Packing into the bit planes round-trips bit for bit (the 6-bit scales
// re-packed), the reference is the row kernels' dot product within the float bound, and every
// SIMD kernel equals the reference bit for bit.
TEST(PackedQ3_K, EveryCodeAndScaleExactAgainstReference) {
  const GgmlType type = GgmlType::Q3_K;
  const int64_t rows = 48, nb = 3;
  std::vector<BlockQ3_K> w(size_t(rows * nb));
  Lcg next{3131};
  for (int64_t i = 0; i < rows * nb; ++i) {
    BlockQ3_K& b = w[size_t(i)];
    b.d = fp32_to_fp16(float(1 + next() % 1000) * 1e-4f);
    const int64_t kind = i % 4;
    if (kind == 2) {
      // The 36 such blocks: element e's q = (e + i / 4) % 8, sub-block j's scale (j + 16 (i /
      // 4)) % 64 (q3_k_scale()'s fields).
      std::memset(b.hmask, 0, sizeof(b.hmask));
      std::memset(b.qs, 0, sizeof(b.qs));
      std::memset(b.scales, 0, sizeof(b.scales));
      for (int e = 0; e < kQK_K; ++e) {
        const int q = int((e + i / 4) % 8);
        b.qs[32 * (e / 128) + e % 32] |= uint8_t((q & 3) << (2 * (e / 32 % 4)));
        b.hmask[e % 32] |= uint8_t((q >> 2) << (e / 32));
      }
      for (int j = 0; j < kLowKSubBlocks; ++j) {
        const int sc = int((j + 16 * (i / 4)) % 64);
        b.scales[j % 8] |= uint8_t((sc & 0x0F) << (4 * (j / 8)));
        b.scales[8 + j % 4] |= uint8_t((sc >> 4) << (2 * (j / 4)));
      }
      continue;
    }
    for (auto& s : b.scales) s = kind == 0 ? 0x00 : kind == 1 ? 0xFF : uint8_t(next() >> 24);
    for (auto& h : b.hmask) h = kind < 2 ? uint8_t(i % 8 < 4 ? 0x00 : 0xFF) : uint8_t(next() >> 24);
    for (auto& q : b.qs) q = kind < 2 ? uint8_t(i % 8 < 4 ? 0x00 : 0xFF) : uint8_t(next() >> 24);
  }
  expect_super_blocks_exact(type, bytes_of_blocks(w), rows, nb);
}

// Q2_K over raw super-blocks: every q (0..3) in every position and every scale and min nibble
// (0..15) of every sub-block, set field by field in a quarter of the blocks, the scale / min bytes
// and every byte of qs at both ends (all 0, all 1) and random elsewhere, so the extreme values (sc
// 15 with q 3, min 15) meet activation quants of +-127. Packing round-trips bit for bit, the
// reference is the row kernels' dot product within the float bound, and every SIMD kernel equals
// the reference bit for bit.
TEST(PackedQ2_K, EveryCodeAndScaleExactAgainstReference) {
  const GgmlType type = GgmlType::Q2_K;
  const int64_t rows = 48, nb = 3;
  std::vector<BlockQ2_K> w(size_t(rows * nb));
  Lcg next{2121};
  for (int64_t i = 0; i < rows * nb; ++i) {
    BlockQ2_K& b = w[size_t(i)];
    b.d = fp32_to_fp16(float(1 + next() % 1000) * 1e-4f);
    b.dmin = fp32_to_fp16(float(1 + next() % 1000) * 1e-5f);
    const int64_t kind = i % 4;
    if (kind == 2) {
      // The 36 such blocks: element e's q = (e + i / 4) % 4, sub-block j's scale (j + i / 4) % 16
      // and min (j + 3 (i / 4) + 7) % 16.
      std::memset(b.qs, 0, sizeof(b.qs));
      for (int e = 0; e < kQK_K; ++e) {
        const int q = int((e + i / 4) % 4);
        b.qs[32 * (e / 128) + e % 32] |= uint8_t(q << (2 * (e / 32 % 4)));
      }
      for (int j = 0; j < kLowKSubBlocks; ++j) {
        const int sc = int((j + i / 4) % 16), mn = int((j + 3 * (i / 4) + 7) % 16);
        b.scales[j] = uint8_t(sc | mn << 4);
      }
      continue;
    }
    for (auto& s : b.scales) s = kind == 0 ? 0x00 : kind == 1 ? 0xFF : uint8_t(next() >> 24);
    for (auto& q : b.qs) q = kind < 2 ? uint8_t(i % 8 < 4 ? 0x00 : 0xFF) : uint8_t(next() >> 24);
  }
  expect_super_blocks_exact(type, bytes_of_blocks(w), rows, nb);
}

// TQ2_0 over raw super-blocks: every q (0..3, 3 included though a well-formed file never holds
// it) in every position, blocks of all 0 and all 3 against activation quants of +-127, and
// random ones. Beyond expect_super_blocks_exact: the AVX-512 kernel gives the floats of the
// AVX-512 row-wise dot on the file's layout, bit for bit (so repacking a ternary model changes
// no logit).
TEST(PackedTQ2_0, EveryCodeExactAgainstReferenceAndTheRowKernel) {
  const GgmlType type = GgmlType::TQ2_0;
  const int64_t rows = 48, nb = 3, n = nb * kQK_K;
  std::vector<BlockTQ2_0> w(size_t(rows * nb));
  Lcg next{2020};
  for (int64_t i = 0; i < rows * nb; ++i) {
    BlockTQ2_0& b = w[size_t(i)];
    b.d = fp32_to_fp16(float(1 + next() % 1000) * 1e-4f);
    if (i % 4 == 2) {  // element e's q = (e + i / 4) % 4
      std::memset(b.qs, 0, sizeof(b.qs));
      for (int e = 0; e < kQK_K; ++e)
        b.qs[32 * (e / 128) + e % 32] |= uint8_t(int((e + i / 4) % 4) << (2 * (e / 32 % 4)));
      continue;
    }
    for (auto& q : b.qs) q = i % 4 < 2 ? uint8_t(i % 8 < 4 ? 0x00 : 0xFF) : uint8_t(next() >> 24);
  }
  const auto wb = bytes_of_blocks(w);
  expect_super_blocks_exact(type, wb, rows, nb);

  const PackedGemmFn kernel = packed_gemm_kernel(PackedKernelKind::kAvx512, type);
  const TypeTraits* row_kernels = type_traits_for(KernelIsa::kAvx512, type);
  if (kernel == nullptr || row_kernels == nullptr) GTEST_SKIP() << "no AVX-512 VNNI";
  const int64_t n_act = 5;
  const size_t stride = bytes_of(GgmlType::Q8_K, n);
  const auto act = make_acts(type, n_act, n, stride, 31);
  const auto y = run(kernel, packed(type, wb, rows, n), rows, n, act, stride, n_act, rows);
  const size_t w_row = wb.size() / size_t(rows);
  for (int64_t t = 0; t < n_act; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const float want = row_kernels->vec_dot(n, &wb[size_t(r) * w_row], &act[size_t(t) * stride]);
      const float got = y[size_t(t * rows + r)];
      ASSERT_EQ(std::memcmp(&want, &got, 4), 0)
          << "row " << r << " token " << t << ": " << want << " vs " << got;
    }
}

// The SIMD BF16 kernels this CPU can run: AVX2 and AVX-512 widened FMA, and vdpbf16ps (with
// AVX512-BF16).
std::vector<std::pair<const char*, PackedGemmFn>> simd_bf16_kernels() {
  std::vector<std::pair<const char*, PackedGemmFn>> out;
  if (cpu_features().avx2)
    out.emplace_back("AVX2 widened FMA",
                     packed_gemm_kernel(PackedKernelKind::kAvx2, GgmlType::BF16));
  if (cpu_features().avx512)
    out.emplace_back("AVX-512 widened FMA",
                     kernels::packed_gemm_float_avx512(GgmlType::BF16, Bf16Kernel::kWidenedFma));
  if (cpu_features().avx512_bf16)
    out.emplace_back("AVX-512 vdpbf16ps",
                     kernels::packed_gemm_float_avx512(GgmlType::BF16, Bf16Kernel::kDot));
  return out;
}

// Whichever BF16 kernel the engine picks, the others give the same floats.
TEST(PackedGemmBf16, EverySimdKernelBitIdenticalToReference) {
  const auto kernels = simd_bf16_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no AVX2";
  for (const auto& [name, fn] : kernels) {
    SCOPED_TRACE(name);
    ASSERT_NE(fn, nullptr);
    expect_bit_identical(fn, GgmlType::BF16);
  }
}

// Subnormal weights and activations count as zero and products that underflow flush to zero, as
// in vdpbf16ps, for both kernels; normal values around them keep their exact sums. The thread's
// rounding state is back as it was afterwards.
TEST(PackedGemmBf16, SubnormalsFlushAsVdpbf16psDoes) {
  const auto kernels = simd_bf16_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no AVX2";
  const int64_t rows = 32, n = 96, n_act = 7;
  // bf16 bit patterns: subnormals (exponent 0) and tiny normals, whose products underflow; rows
  // and tokens of only those sum to a flushed zero, the others mix in ordinary values.
  const uint16_t kValues[] = {0x0001, 0x8005, 0x007F, 0x0080, 0x0480, 0x8700, 0x00A0,
                              0x8081, 0x0000, 0x3F80, 0xBFC0, 0x4100, 0x3C00};
  const size_t kTiny = 9;  // the first kTiny values
  const auto pick = [&](size_t i, bool tiny_only) {
    return kValues[(i * 7 + i / 11) % (tiny_only ? kTiny : std::size(kValues))];
  };
  std::vector<uint16_t> w(size_t(rows * n)), x(size_t(n_act * n));
  for (size_t i = 0; i < w.size(); ++i) w[i] = pick(i, i / size_t(n) % 4 == 0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = pick(i + 3, i / size_t(n) % 3 == 0);
  std::vector<uint8_t> w_bytes(w.size() * 2), act(x.size() * 2);
  std::memcpy(w_bytes.data(), w.data(), w_bytes.size());
  std::memcpy(act.data(), x.data(), act.size());
  const auto pw = packed(GgmlType::BF16, w_bytes, rows, n);
  const auto want = run(packed_gemm_kernel(PackedKernelKind::kReference, GgmlType::BF16), pw, rows,
                        n, act, size_t(n) * 2, n_act, rows);
  int zeros = 0;
  for (float v : want) zeros += v == 0.0f;
  ASSERT_GT(zeros, 0) << "no sum flushed: the case does not test flushing";
  for (const auto& [name, fn] : kernels) {
    const unsigned csr = _mm_getcsr();
    const auto got = run(fn, pw, rows, n, act, size_t(n) * 2, n_act, rows);
    EXPECT_EQ(_mm_getcsr(), csr) << name;
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, PackedGemm,
    testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                    GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K,
                    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::IQ4_XS,
                    GgmlType::Q3_K, GgmlType::Q2_K, GgmlType::TQ2_0),
    [](const auto& info) { return std::string(ggml_type_name(uint32_t(info.param))); });

}  // namespace
}  // namespace vela

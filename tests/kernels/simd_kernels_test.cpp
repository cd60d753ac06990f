// Every SIMD kernel table this CPU can run (supported_kernel_isas(): the scalar reference, AVX2,
// AVX-512) against the scalar one, for every weight type: vec_dot and vec_dot_rows agree with the
// scalar vec_dot within a stated float-rounding bound (and exactly where no rounding can happen),
// from_float gives the same bytes in every table, and matmul in every table agrees.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/type_traits.h"
#include "quant/blocks.h"
#include "quant/quantize.h"
#include "util/half.h"

namespace vela {
namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
const GgmlType kActivationTypes[] = {GgmlType::F32, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q8_1,
                                     GgmlType::Q8_K};

constexpr double kUnitRoundoff = 1.0 / 16777216.0;  // 2^-24, float's unit roundoff

const TypeTraits& scalar_traits(GgmlType type) {
  return *type_traits_for(KernelIsa::kScalar, type);
}

int64_t block_size(GgmlType type) {
  return ggml_type_info(uint32_t(type))->block_size;
}

size_t bytes_of(GgmlType type, int64_t n) {
  return size_t(row_bytes(*ggml_type_info(uint32_t(type)), n));
}

std::vector<float> decode(GgmlType type, const uint8_t* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  scalar_traits(type).to_float(row, out.data(), n);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Test rows

enum class Data {
  kRandom,   // realistic: reference-quantized normal weights, normal activations with spikes
  kBytes,    // quantized types: arbitrary bytes for the quants and scales, finite fp16 scales
  kInteger,  // every decoded value a small integer: no float operation can round
};

void set_half(uint8_t* block, size_t offset, float value) {
  const uint16_t h = fp32_to_fp16(value);
  std::memcpy(block + offset, &h, sizeof(h));
}

// Overwrites the fp16 scale fields of every block (arbitrary bytes could be NaN or inf there):
// `scale` draws d (and dmin), `offset` draws m. Q6_K's int8 sub-block scales are kept within
// +-q6_scale_limit (0 = leave them).
template <class ScaleFn, class OffsetFn>
void set_scale_fields(GgmlType type, std::vector<uint8_t>& row, ScaleFn scale, OffsetFn offset,
                      int q6_scale_limit, std::mt19937& rng) {
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(type))->type_size);
  for (size_t at = 0; at < row.size(); at += block_bytes) {
    uint8_t* blk = row.data() + at;
    switch (type) {
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
      case GgmlType::Q8_0:
        set_half(blk, 0, scale());
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        set_half(blk, offsetof(BlockQ4_1, d), scale());
        set_half(blk, offsetof(BlockQ4_1, m), offset());
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        set_half(blk, offsetof(BlockQ4_K, d), scale());
        set_half(blk, offsetof(BlockQ4_K, dmin), scale());
        break;
      case GgmlType::Q6_K: {
        set_half(blk, offsetof(BlockQ6_K, d), scale());
        if (q6_scale_limit > 0) {
          std::uniform_int_distribution<int> sc(-q6_scale_limit, q6_scale_limit);
          for (int j = 0; j < 16; ++j) blk[offsetof(BlockQ6_K, scales) + j] = uint8_t(sc(rng));
        }
        break;
      }
      default:
        break;
    }
  }
}

bool is_float_type(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

// One weight row: [n] elements of `type`.
std::vector<uint8_t> make_weights(GgmlType type, int64_t n, Data data, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  if (data == Data::kInteger) {
    std::uniform_int_distribution<int> small(-8, 8);
    for (float& v : values) v = float(small(rng));
  } else {
    // Per-32 magnitudes vary, with a shift on odd seeds (exercises the affine offsets).
    for (size_t i = 0; i < values.size(); ++i) {
      const float block_scale = (i / 32 % 5 == 3) ? 30.0f : ((i / 32 % 7 == 2) ? 0.0f : 1.0f);
      values[i] = 0.02f * block_scale * normal(rng) + (seed % 2 == 1 ? 0.03f : 0.0f);
    }
  }
  std::vector<uint8_t> row(bytes_of(type, n));
  quantize_row(type, values.data(), row.data(), n);
  if (data == Data::kRandom || is_float_type(type)) return row;

  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : row) b = uint8_t(byte(rng));
  if (data == Data::kBytes) {
    auto scale = [&] { return 0.01f * normal(rng); };  // any sign: the formats allow it
    auto offset = [&] { return 0.05f * normal(rng); };
    set_scale_fields(type, row, scale, offset, 0, rng);
  } else {
    std::uniform_int_distribution<int> small(-4, 4);
    auto scale = [] { return 1.0f; };
    auto offset = [&] { return float(small(rng)); };
    set_scale_fields(type, row, scale, offset, 16, rng);
  }
  return row;
}

// Activation values: [n] f32.
std::vector<float> make_activations(int64_t n, Data data, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  if (data == Data::kInteger) {
    // A +-127 at the start of every 32 values makes every Q8 block scale exactly +-1, so the
    // quants are the values themselves.
    std::uniform_int_distribution<int> small(-4, 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(small(rng));
    for (size_t i = 0; i < x.size(); i += 32) x[i] = (i / 32 % 2 == 0) ? 127.0f : -127.0f;
    return x;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (size_t i = 7; i < x.size(); i += 97) x[i] *= 40.0f;       // outliers, as in real activations
  if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
  return x;
}

// Converts x: [n] f32 to the activation type with the scalar table (the bytes every table's
// from_float must produce; checked in FromFloat).
std::vector<uint8_t> to_activation(GgmlType act_type, const std::vector<float>& x) {
  std::vector<uint8_t> act(bytes_of(act_type, int64_t(x.size())));
  scalar_traits(act_type).from_float(x.data(), act.data(), int64_t(x.size()));
  return act;
}

// ---------------------------------------------------------------------------------------------
// Error bound

// Sum over elements of |w_i a_i|, where a weight of an affine type counts as its two parts,
// |d q_i| + |m| (Q4_1/Q5_1) or |d sc q_i| + |dmin mn| (Q4_K/Q5_K): the kernels scale and round
// the two parts separately, and they can each be larger than the weight.
double term_magnitude(GgmlType w_type, const uint8_t* w_row, const std::vector<float>& a,
                      int64_t n) {
  std::vector<std::vector<float>> parts;
  const size_t block_bytes = size_t(ggml_type_info(uint32_t(w_type))->type_size);
  const std::vector<uint8_t> row(w_row, w_row + bytes_of(w_type, n));
  auto with_zeroed = [&](size_t offset) {  // the row with one fp16 field zeroed in every block
    std::vector<uint8_t> copy = row;
    for (size_t at = offset; at < copy.size(); at += block_bytes) set_half(copy.data(), at, 0.0f);
    return decode(w_type, copy.data(), n);
  };
  switch (w_type) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      // d at offset 0; m (Q4_1/Q5_1) or dmin (Q4_K/Q5_K) at offset 2.
      parts.push_back(with_zeroed(2));
      parts.push_back(with_zeroed(0));
      break;
    default:
      parts.push_back(decode(w_type, w_row, n));
      break;
  }
  double m = 0;
  for (const auto& p : parts) {
    for (int64_t i = 0; i < n; ++i) m += std::fabs(double(p[size_t(i)]) * double(a[size_t(i)]));
  }
  return m;
}

// How far two correct kernels' results for one dot product of n elements may be apart.
// The integer parts of the quantized dots (level x quant products, their block sums, the sums
// scaled by sub-block scales and mins) are exact in every table, so only float rounding
// differs, and only through the order and grouping of operations:
//  * Each kernel's result is a float sum of at most n + n/block terms: per-lane or per-block
//    integer partial sums (at most one per element, plus one offset term per block for the
//    affine types) times products of block scales, or for the float types one product per
//    element. Summed in any order, such a sum is within (T - 1) u sum|terms| of exact
//    (u = 2^-24; the standard first-order bound for recursive summation, which covers any
//    tree, lanes and tiles included).
//  * Each term itself carries at most ~6 roundings of its own size: d_w * d_a, int -> float of a
//    partial sum, the product, the K types' d * sum - dmin * mins.
//  * sum|terms| <= M (term_magnitude), up to the fp16 rounding of Q8_1's stored s, which the
//    factor 1.01 covers.
// So each kernel is within (n + n/block + 8) u M of the exact value, and two kernels within
// twice that. The scalar F32/F16/BF16 kernels sum in double and are closer still.
// The bound is loose for long rows (the typical error is ~sqrt(n) u M); the exact-integer tests
// and the short rows are what pin down single-element mistakes.
double dot_tolerance(GgmlType w_type, const uint8_t* w_row, GgmlType act_type,
                     const uint8_t* act_row, int64_t n) {
  const double m = 1.01 * term_magnitude(w_type, w_row, decode(act_type, act_row, n), n);
  const double terms = double(n + n / block_size(w_type) + 8);
  return 2.0 * terms * kUnitRoundoff * m;
}

// ---------------------------------------------------------------------------------------------
// Fixtures

using IsaType = std::tuple<KernelIsa, GgmlType>;

std::string param_name(const testing::TestParamInfo<IsaType>& info) {
  return std::string(kernel_isa_name(std::get<0>(info.param))) + "_" +
         ggml_type_name(uint32_t(std::get<1>(info.param)));
}

std::vector<int64_t> test_lengths(GgmlType w_type, Data data) {
  if (is_float_type(w_type)) {  // block size 1: ragged lengths hit every tail path
    std::vector<int64_t> n = {1, 7, 8, 9, 31, 32, 33, 100, 257, 1000};
    if (data != Data::kInteger) n.push_back(4096);
    return n;
  }
  if (block_size(w_type) == kQK_K) {
    if (data == Data::kInteger) return {256, 512};  // keeps every partial sum below 2^24
    return {256, 512, 768, 2048};
  }
  if (data == Data::kInteger) return {32, 64, 96, 160, 1024};
  return {32, 64, 96, 160, 1024, 4096};
}

class SimdKernels : public testing::TestWithParam<IsaType> {
 protected:
  void SetUp() override {
    isa_ = std::get<0>(GetParam());
    type_ = std::get<1>(GetParam());
    simd_ = type_traits_for(isa_, type_);
    ASSERT_NE(simd_, nullptr);
    ASSERT_NE(simd_->vec_dot, nullptr);
    act_type_ = simd_->vec_dot_type;
    ASSERT_EQ(act_type_, scalar_traits(type_).vec_dot_type);
  }

  float scalar_dot(int64_t n, const uint8_t* w, const uint8_t* a) const {
    return scalar_traits(type_).vec_dot(n, w, a);
  }

  KernelIsa isa_ = KernelIsa::kScalar;
  GgmlType type_ = GgmlType::F32;
  GgmlType act_type_ = GgmlType::F32;
  const TypeTraits* simd_ = nullptr;
};

TEST_P(SimdKernels, VecDotMatchesScalarWithinRoundingBound) {
  for (const Data data : {Data::kRandom, Data::kBytes}) {
    for (const int64_t n : test_lengths(type_, data)) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        const auto w = make_weights(type_, n, data, seed);
        const auto act = to_activation(act_type_, make_activations(n, data, seed + 100));
        const double expect = scalar_dot(n, w.data(), act.data());
        const double got = simd_->vec_dot(n, w.data(), act.data());
        EXPECT_NEAR(got, expect, dot_tolerance(type_, w.data(), act_type_, act.data(), n))
            << "n=" << n << " seed=" << seed << " data=" << int(data);
      }
    }
  }
}

// All operands small integers with unit scales: every product and partial sum is an integer
// below 2^24, so every order of evaluation is exact and all tables give the exact dot product.
TEST_P(SimdKernels, IntegerDataIsExact) {
  for (const int64_t n : test_lengths(type_, Data::kInteger)) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      const auto w = make_weights(type_, n, Data::kInteger, seed);
      const auto act = to_activation(act_type_, make_activations(n, Data::kInteger, seed + 100));
      const auto w_dec = decode(type_, w.data(), n);
      const auto a_dec = decode(act_type_, act.data(), n);
      double exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += double(w_dec[size_t(i)]) * a_dec[size_t(i)];
      ASSERT_EQ(exact, std::round(exact)) << "decoded operands are not integers";
      ASSERT_LT(term_magnitude(type_, w.data(), a_dec, n), 16777216.0) << "n=" << n;
      EXPECT_EQ(scalar_dot(n, w.data(), act.data()), float(exact)) << "n=" << n;
      EXPECT_EQ(simd_->vec_dot(n, w.data(), act.data()), float(exact))
          << "n=" << n << " seed=" << seed;
      if (simd_->vec_dot_rows != nullptr) {
        float out = -1.0f;
        simd_->vec_dot_rows(n, w.data(), act.data(), act.size(), 1, &out, 1);
        EXPECT_EQ(out, float(exact)) << "n=" << n << " seed=" << seed;
      }
    }
  }
}

// vec_dot_rows over n_act activation rows, laid out with a padded stride and written to a
// strided output, for counts around the kernels' row tiles (remainders of 1..3 for tiles of 2,
// 3 or 4, and 16 sequences decoding together).
TEST_P(SimdKernels, VecDotRowsMatchesScalar) {
  if (simd_->vec_dot_rows == nullptr) GTEST_SKIP() << "no batched kernel; matmul loops vec_dot";
  for (const Data data : {Data::kRandom, Data::kBytes, Data::kInteger}) {
    const std::vector<int64_t> lengths = test_lengths(type_, data);
    for (const int64_t n : {lengths.front(), lengths[lengths.size() / 2], lengths.back()}) {
      const auto w = make_weights(type_, n, data, uint32_t(n));
      const size_t act_bytes = bytes_of(act_type_, n);
      const size_t act_stride = act_bytes + 64;  // rows need not be packed
      for (const int64_t n_act : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17}) {
        std::vector<uint8_t> acts(act_stride * size_t(n_act), 0xCD);
        for (int64_t t = 0; t < n_act; ++t) {
          const auto act = to_activation(act_type_, make_activations(n, data, uint32_t(7 * t)));
          std::memcpy(acts.data() + size_t(t) * act_stride, act.data(), act_bytes);
        }
        constexpr int64_t kOutStride = 3;
        std::vector<float> out(size_t(n_act * kOutStride), -7.0f);
        simd_->vec_dot_rows(n, w.data(), acts.data(), act_stride, n_act, out.data(), kOutStride);
        for (int64_t t = 0; t < n_act; ++t) {
          const uint8_t* a = acts.data() + size_t(t) * act_stride;
          EXPECT_NEAR(out[size_t(t * kOutStride)], scalar_dot(n, w.data(), a),
                      dot_tolerance(type_, w.data(), act_type_, a, n))
              << "n=" << n << " n_act=" << n_act << " t=" << t << " data=" << int(data);
          // Only the strided slots are written.
          EXPECT_EQ(out[size_t(t * kOutStride + 1)], -7.0f);
          EXPECT_EQ(out[size_t(t * kOutStride + 2)], -7.0f);
        }
      }
    }
  }
}

// A sequence's logits must not depend on what else is in the batch: matmul uses vec_dot for one
// token and vec_dot_rows for several, so the batched kernel must give each row exactly the
// single-row result, whatever tile the row falls in.
TEST_P(SimdKernels, VecDotRowsIsBitIdenticalToVecDot) {
  if (simd_->vec_dot_rows == nullptr) GTEST_SKIP() << "no batched kernel; matmul loops vec_dot";
  const int64_t n = test_lengths(type_, Data::kRandom).back();
  const auto w = make_weights(type_, n, Data::kRandom, 5);
  const size_t stride = bytes_of(act_type_, n);
  constexpr int64_t kActs = 13;
  std::vector<uint8_t> acts(stride * kActs);
  for (int64_t t = 0; t < kActs; ++t) {
    const auto act = to_activation(act_type_, make_activations(n, Data::kRandom, uint32_t(t)));
    std::memcpy(acts.data() + size_t(t) * stride, act.data(), stride);
  }
  for (const int64_t n_act : {int64_t(2), int64_t(3), int64_t(4), int64_t(5), kActs}) {
    std::vector<float> out(static_cast<size_t>(n_act));
    simd_->vec_dot_rows(n, w.data(), acts.data(), stride, n_act, out.data(), 1);
    for (int64_t t = 0; t < n_act; ++t) {
      EXPECT_EQ(out[size_t(t)], simd_->vec_dot(n, w.data(), acts.data() + size_t(t) * stride))
          << "n_act=" << n_act << " t=" << t;
    }
  }
}

// y: [n_tokens, n_rows] from the given table's kernels, called the way matmul_rows calls them.
std::vector<float> matmul_with(KernelIsa isa, GgmlType w_type, const std::vector<uint8_t>& w,
                               int64_t n_rows, int64_t n_cols, const std::vector<float>& x,
                               int64_t n_tokens, std::vector<uint8_t>* act_out) {
  const TypeTraits& traits = *type_traits_for(isa, w_type);
  const size_t stride = bytes_of(traits.vec_dot_type, n_cols);
  std::vector<uint8_t>& act = *act_out;
  act.assign(stride * size_t(n_tokens), 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    type_traits_for(isa, traits.vec_dot_type)
        ->from_float(x.data() + t * n_cols, act.data() + size_t(t) * stride, n_cols);
  }
  const size_t w_stride = bytes_of(w_type, n_cols);
  std::vector<float> y(size_t(n_tokens * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* w_row = w.data() + size_t(r) * w_stride;
    if (traits.vec_dot_rows != nullptr && n_tokens > 1) {
      traits.vec_dot_rows(n_cols, w_row, act.data(), stride, n_tokens, y.data() + r, n_rows);
    } else {
      for (int64_t t = 0; t < n_tokens; ++t) {
        y[size_t(t * n_rows + r)] = traits.vec_dot(n_cols, w_row, act.data() + size_t(t) * stride);
      }
    }
  }
  return y;
}

TEST_P(SimdKernels, MatmulAgreesWithScalarTable) {
  constexpr int64_t kRows = 37;
  constexpr int64_t kCols = 512;
  const size_t w_stride = bytes_of(type_, kCols);
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < kRows; ++r) {
    const auto row = make_weights(type_, kCols, Data::kRandom, uint32_t(1000 + r));
    w.insert(w.end(), row.begin(), row.end());
  }
  for (const int64_t n_tokens : {1, 5, 16}) {
    const auto x = make_activations(n_tokens * kCols, Data::kRandom, uint32_t(n_tokens));
    std::vector<uint8_t> act_simd, act_scalar;
    const auto y = matmul_with(isa_, type_, w, kRows, kCols, x, n_tokens, &act_simd);
    const auto y_ref =
        matmul_with(KernelIsa::kScalar, type_, w, kRows, kCols, x, n_tokens, &act_scalar);
    ASSERT_EQ(act_simd, act_scalar) << "activation conversion differs";
    const size_t act_stride = act_scalar.size() / size_t(n_tokens);
    std::vector<double> tol(y.size());
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < kRows; ++r) {
        const size_t i = size_t(t * kRows + r);
        tol[i] = dot_tolerance(type_, w.data() + size_t(r) * w_stride, act_type_,
                               act_scalar.data() + size_t(t) * act_stride, kCols);
        EXPECT_NEAR(y[i], y_ref[i], tol[i]) << "token " << t << " row " << r;
      }
    }
    // matmul() itself runs the active table; it must agree with that table's kernels.
    if (isa_ == active_kernel_isa()) {
      MatmulScratch scratch;
      std::vector<float> y_matmul(y.size());
      matmul(type_, w.data(), kRows, kCols, x.data(), n_tokens, y_matmul.data(), scratch);
      for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y_matmul[i], y[i], tol[i]) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, SimdKernels,
                         testing::Combine(testing::ValuesIn(supported_kernel_isas()),
                                          testing::ValuesIn(kWeightTypes)),
                         param_name);

// ---------------------------------------------------------------------------------------------
// Activation conversions

using IsaActType = std::tuple<KernelIsa, GgmlType>;

// Value j of a block whose maximum is 381 = 3 * 127, so the scale 127/381 (or -127/381 for
// Q8_K) rounds to +-1/3 + 1e-8 relative: (k + 0.5) * 3 times it is just off k + 0.5, and only
// rounding the product to float first gives the exact tie the quantizers then round to even.
float thirds(int j) {
  if (j == 0) return 381.0f;
  return (j % 2 ? -1.0f : 1.0f) * (float(j % 16) + 0.5f) * 3.0f;
}

// Inputs that reach every branch of the quantizers: ordinary values, outliers, all-zero blocks,
// rounding ties, equal-magnitude maxima of both signs, and extreme (huge, subnormal) scales.
std::vector<float> conversion_inputs(int64_t n, uint32_t seed) {
  auto x = make_activations(n, Data::kRandom, seed);
  auto block = [&](int64_t b) { return x.begin() + b * 32; };
  for (int64_t b = 2; b * 32 + 32 <= n; ++b) {
    switch (b % 9) {
      case 0:  // amax 127: the scale is 1 and the .5s are exact ties (to even)
        for (int j = 0; j < 32; ++j) block(b)[j] = float(j % 16) - 7.5f;
        block(b)[31] = 127.0f;
        break;
      case 1:  // the first maximum is negative, a later one positive (Q8_K keeps the first)
        block(b)[3] = -9.0f;
        block(b)[20] = 9.0f;
        break;
      case 2:  // huge
        for (int j = 0; j < 32; ++j) block(b)[j] *= 1e35f;
        break;
      case 3:  // subnormal
        for (int j = 0; j < 32; ++j) block(b)[j] *= 1e-40f;
        break;
      case 4:  // one value in a block of zeros
        std::fill(block(b), block(b) + 32, 0.0f);
        block(b)[17] = -0.125f;
        break;
      case 5:  // signed zeros
        for (int j = 0; j < 32; ++j) block(b)[j] = (j % 2) ? -0.0f : 0.0f;
        break;
      case 6:  // products that round to a tie only when rounded before the +1.5*2^23 (fused
               // into one FMA they would round differently): see thirds() below
        for (int j = 0; j < 32; ++j) block(b)[j] = thirds(j);
        break;
      default:
        break;
    }
  }
  // The same two cases over whole Q8_K super-blocks (a larger maximum elsewhere in the 256
  // would hide them): equal-magnitude maxima of both signs, and the rounding ties.
  if (n >= 3 * kQK_K) {
    for (int64_t i = kQK_K; i < 2 * kQK_K; ++i) x[size_t(i)] = std::sin(float(i));
    x[kQK_K + 3] = -9.0f;
    x[kQK_K + 200] = 9.0f;
    for (int64_t i = 0; i < kQK_K; ++i) x[size_t(2 * kQK_K + i)] = thirds(int(i));
  }
  return x;
}

class FromFloat : public testing::TestWithParam<IsaActType> {};

TEST_P(FromFloat, BitIdenticalToScalar) {
  const auto [isa, type] = GetParam();
  const TypeTraits* traits = type_traits_for(isa, type);
  ASSERT_NE(traits, nullptr);
  std::vector<int64_t> lengths = {256, 512, 4096};
  if (block_size(type) == 1) lengths.insert(lengths.end(), {1, 7, 9, 33, 4099});
  for (const int64_t n : lengths) {
    for (uint32_t seed = 0; seed < 4; ++seed) {
      const auto x = conversion_inputs(n, seed);
      std::vector<uint8_t> got(bytes_of(type, n), 0xAA), want(bytes_of(type, n), 0x55);
      traits->from_float(x.data(), got.data(), n);
      scalar_traits(type).from_float(x.data(), want.data(), n);
      ASSERT_EQ(got, want) << "n=" << n << " seed=" << seed;
    }
  }
}

// bf16 keeps NaN and infinity and rounds exact halfway cases to even.
TEST_P(FromFloat, Bf16SpecialValues) {
  const auto [isa, type] = GetParam();
  if (type != GgmlType::BF16) GTEST_SKIP();
  std::vector<float> x;
  for (uint32_t bits :
       {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x3f808000u, 0x3f818000u,
        0xbf808000u, 0x7f7fffffu, 0x00008000u, 0x80000000u, 0x00000001u, 0x3f80ffffu}) {
    x.push_back(bits_to_float(bits));
  }
  while (x.size() < 21) x.push_back(float(x.size()) * 0.37f);
  std::vector<uint16_t> got(x.size()), want(x.size());
  type_traits_for(isa, type)->from_float(x.data(), got.data(), int64_t(x.size()));
  quantize_row_bf16(x.data(), want.data(), int64_t(x.size()));
  EXPECT_EQ(got, want);
}

// Weight types quantize their activations with their vec_dot_type's conversion, in every table.
TEST(FromFloatTable, WeightTypesUseTheirActivationConversion) {
  for (const KernelIsa isa : supported_kernel_isas()) {
    for (const GgmlType w : kWeightTypes) {
      const TypeTraits* traits = type_traits_for(isa, w);
      ASSERT_NE(traits, nullptr);
      EXPECT_EQ(traits->from_float, type_traits_for(isa, traits->vec_dot_type)->from_float)
          << kernel_isa_name(isa) << " " << ggml_type_name(uint32_t(w));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, FromFloat,
                         testing::Combine(testing::ValuesIn(supported_kernel_isas()),
                                          testing::ValuesIn(kActivationTypes)),
                         param_name);

}  // namespace
}  // namespace vela

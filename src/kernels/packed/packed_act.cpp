#include "kernels/packed/packed_act.h"

#include <algorithm>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_layout.h"
#include "kernels/thread_buffer.h"
#include "quant/blocks.h"
#include "util/half.h"

namespace vela {

namespace {

// fn(block, out) for every block of rows [t_begin, t_end), out pointing at its `per` values.
template <class Block, class Fn>
void for_each_block(const uint8_t* act, size_t act_stride, int64_t nb, int per, int64_t t_begin,
                    int64_t t_end, int32_t* out, Fn&& fn) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    const auto* a = reinterpret_cast<const Block*>(act + size_t(t) * act_stride);
    for (int64_t b = 0; b < nb; ++b) fn(a[b], out + (t * nb + b) * per);
  }
}

// The start of a block's integer sum for levels stored as q + bias: -bias * sum of its quants.
template <int kBias>
void biased_start(const BlockQ8_0& a, int32_t* o) {
  int32_t sum = 0;
  for (int8_t q : a.qs) sum += q;
  *o = -kBias * sum;
}

template <GgmlType kType>
size_t sums_bytes(int64_t n_act, int64_t n_cols) {
  return size_t(n_act * (n_cols / interleaved16_block_cols(kType)) *
                packed_act_sums_per_block(kType)) *
         sizeof(int32_t);
}

template <GgmlType kType>
void write_sums(const uint8_t* act, size_t act_stride, int64_t /*n_act*/, int64_t n_cols,
                int64_t t_begin, int64_t t_end, void* out) {
  write_packed_act_sums(kType, act, act_stride, n_cols, t_begin, t_end, static_cast<int32_t*>(out));
}

float f32_value(float v) {
  return v;
}
uint16_t bf16_bits(uint16_t v) {
  return v;
}

template <class Out>
size_t copy_bytes(int64_t n_act, int64_t n_cols) {
  return size_t(n_act * n_cols) * sizeof(Out);
}

// Rows [t_begin, t_end) of In values as Out values, tokens in tiles of kTile and steps of P
// columns (packed_act.h): element k of token t0 + j of the tile at t0 goes to
// t0 n_cols + ((k / P) n + j) P + k % P, n the tile's tokens. kTile = 1: plain rows.
template <class In, class Out, int64_t kTile, int64_t P, Out (*kConvert)(In)>
void write_tiles(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t n_cols,
                 int64_t t_begin, int64_t t_end, void* out) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    const auto* a = reinterpret_cast<const In*>(act + size_t(t) * act_stride);
    const int64_t t0 = t / kTile * kTile;
    const int64_t n = std::min(kTile, n_act - t0);
    Out* o = static_cast<Out*>(out) + t0 * n_cols + (t - t0) * P;
    for (int64_t k = 0; k < n_cols; k += P)
      for (int64_t i = 0; i < P; ++i) o[k * n + i] = kConvert(a[k + i]);
  }
}

}  // namespace

int packed_act_sums_per_block(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
      return 1;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return 4;
    case GgmlType::Q6_K:
    case GgmlType::Q3_K:
      return 16;
    case GgmlType::IQ4_XS:
    case GgmlType::Q2_K:
      return 8;
    case GgmlType::TQ2_0:
      return 1;
    default:
      return 0;
  }
}

void write_packed_act_sums(GgmlType w_type, const uint8_t* act, size_t act_stride, int64_t n_cols,
                           int64_t t_begin, int64_t t_end, int32_t* out) {
  const int per = packed_act_sums_per_block(w_type);
  const int64_t nb = n_cols / interleaved16_block_cols(w_type);
  switch (w_type) {
    case GgmlType::Q4_0:
      for_each_block<BlockQ8_0>(act, act_stride, nb, per, t_begin, t_end, out,
                                biased_start<kQ4_0PackedBias>);
      return;
    case GgmlType::Q5_0:
      for_each_block<BlockQ8_0>(act, act_stride, nb, per, t_begin, t_end, out,
                                biased_start<kQ5_0PackedBias>);
      return;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      for_each_block<BlockQ8_K>(act, act_stride, nb, per, t_begin, t_end, out,
                                [](const BlockQ8_K& a, int32_t* o) {
                                  for (int k = 0; k < 4; ++k) {
                                    const int16_t* s = a.bsums + 4 * k;
                                    const auto lo = uint16_t(int16_t(s[0] + s[1]));
                                    const auto hi = uint16_t(int16_t(s[2] + s[3]));
                                    o[k] = int32_t(uint32_t(lo) | (uint32_t(hi) << 16));
                                  }
                                });
      return;
    case GgmlType::Q6_K:
      for_each_block<BlockQ8_K>(act, act_stride, nb, per, t_begin, t_end, out,
                                [](const BlockQ8_K& a, int32_t* o) {
                                  for (int s = 0; s < 16; ++s)
                                    o[s] = -kQ6_KOffset * int32_t(a.bsums[s]);
                                });
      return;
    case GgmlType::Q3_K:
      for_each_block<BlockQ8_K>(act, act_stride, nb, per, t_begin, t_end, out,
                                [](const BlockQ8_K& a, int32_t* o) {
                                  for (int s = 0; s < 16; ++s)
                                    o[s] = -kQ3_KOffset * int32_t(a.bsums[s]);
                                });
      return;
    case GgmlType::Q2_K:
      for_each_block<BlockQ8_K>(act, act_stride, nb, per, t_begin, t_end, out,
                                [](const BlockQ8_K& a, int32_t* o) {
                                  for (int k = 0; k < 8; ++k) {
                                    const auto lo = uint16_t(a.bsums[2 * k]);
                                    const auto hi = uint16_t(a.bsums[2 * k + 1]);
                                    o[k] = int32_t(uint32_t(lo) | (uint32_t(hi) << 16));
                                  }
                                });
      return;
    case GgmlType::TQ2_0:
      for_each_block<BlockQ8_K>(act, act_stride, nb, per, t_begin, t_end, out,
                                [](const BlockQ8_K& a, int32_t* o) {
                                  int32_t sum = 0;
                                  for (int s = 0; s < 16; ++s) sum += a.bsums[s];
                                  o[0] = -sum;
                                });
      return;
    case GgmlType::IQ4_XS:
      for_each_block<BlockQ8_K>(
          act, act_stride, nb, per, t_begin, t_end, out, [](const BlockQ8_K& a, int32_t* o) {
            for (int j = 0; j < 8; ++j)
              o[j] = -kCodebookPackedBias * (int32_t(a.bsums[2 * j]) + int32_t(a.bsums[2 * j + 1]));
          });
      return;
    default:
      return;
  }
}

const int32_t* packed_act_sums(GgmlType w_type, const PackedGemmArgs& p) {
  if (p.act_prepared != nullptr) return static_cast<const int32_t*>(p.act_prepared);
  int32_t* sums = kernels::thread_buffer<int32_t>(size_t(
      p.n_act * (p.n_cols / interleaved16_block_cols(w_type)) * packed_act_sums_per_block(w_type)));
  write_packed_act_sums(w_type, p.act, p.act_stride, p.n_cols, 0, p.n_act, sums);
  return sums;
}

PackedActPrep packed_act_sums_prep(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::Q4_0:
      return {sums_bytes<GgmlType::Q4_0>, write_sums<GgmlType::Q4_0>};
    case GgmlType::Q5_0:
      return {sums_bytes<GgmlType::Q5_0>, write_sums<GgmlType::Q5_0>};
    case GgmlType::Q4_K:
      return {sums_bytes<GgmlType::Q4_K>, write_sums<GgmlType::Q4_K>};
    case GgmlType::Q5_K:
      return {sums_bytes<GgmlType::Q5_K>, write_sums<GgmlType::Q5_K>};
    case GgmlType::Q6_K:
      return {sums_bytes<GgmlType::Q6_K>, write_sums<GgmlType::Q6_K>};
    case GgmlType::IQ4_XS:
      return {sums_bytes<GgmlType::IQ4_XS>, write_sums<GgmlType::IQ4_XS>};
    case GgmlType::Q3_K:
      return {sums_bytes<GgmlType::Q3_K>, write_sums<GgmlType::Q3_K>};
    case GgmlType::Q2_K:
      return {sums_bytes<GgmlType::Q2_K>, write_sums<GgmlType::Q2_K>};
    case GgmlType::TQ2_0:
      return {sums_bytes<GgmlType::TQ2_0>, write_sums<GgmlType::TQ2_0>};
    default:
      return {};
  }
}

const void* packed_act_view(const PackedActPrep& prep, const PackedGemmArgs& p) {
  if (p.act_prepared != nullptr) return p.act_prepared;
  uint8_t* copy = kernels::thread_buffer<uint8_t>(prep.bytes(p.n_act, p.n_cols));
  prep.write(p.act, p.act_stride, p.n_act, p.n_cols, 0, p.n_act, copy);
  return copy;
}

PackedActPrep widened_bf16_act_prep() {
  return {copy_bytes<float>, write_tiles<uint16_t, float, 1, 1, bf16_to_fp32>};
}

PackedActPrep interleaved_float_act_prep(GgmlType w_type, Bf16Kernel bf16) {
  switch (w_type) {
    case GgmlType::F32:
    case GgmlType::F16:
      return {copy_bytes<float>, write_tiles<float, float, kFloatActTile, 1, f32_value>};
    case GgmlType::BF16:
      if (bf16 == Bf16Kernel::kWidenedFma)
        return {copy_bytes<float>, write_tiles<uint16_t, float, kFloatActTile, 2, bf16_to_fp32>};
      return {copy_bytes<uint16_t>, write_tiles<uint16_t, uint16_t, kFloatActTile, 2, bf16_bits>};
    default:
      return {};
  }
}

}  // namespace vela

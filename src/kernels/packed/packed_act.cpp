#include "kernels/packed/packed_act.h"

#include <vector>

#include "kernels/packed/packed_blocks.h"
#include "quant/blocks.h"

namespace vela {

const uint32_t* q8_k_bsum_pairs(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb) {
  thread_local std::vector<uint32_t> pairs;
  if (pairs.size() < size_t(n_act * nb * 4)) pairs.resize(size_t(n_act * nb * 4));
  for (int64_t t = 0; t < n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + size_t(t) * act_stride);
    for (int64_t b = 0; b < nb; ++b)
      for (int k = 0; k < 4; ++k) {
        const int16_t* s = a[b].bsums + 4 * k;
        const auto lo = uint16_t(int16_t(s[0] + s[1])), hi = uint16_t(int16_t(s[2] + s[3]));
        pairs[size_t((t * nb + b) * 4 + k)] = uint32_t(lo) | (uint32_t(hi) << 16);
      }
  }
  return pairs.data();
}

const int32_t* q6_k_sum_starts(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb) {
  thread_local std::vector<int32_t> starts;
  if (starts.size() < size_t(n_act * nb * 16)) starts.resize(size_t(n_act * nb * 16));
  for (int64_t t = 0; t < n_act; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + size_t(t) * act_stride);
    for (int64_t b = 0; b < nb; ++b)
      for (int s = 0; s < 16; ++s)
        starts[size_t((t * nb + b) * 16 + s)] = -kQ6_KOffset * int32_t(a[b].bsums[s]);
  }
  return starts.data();
}

}  // namespace vela

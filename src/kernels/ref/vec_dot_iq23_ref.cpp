#include "kernels/ref/vec_dot_iq23_ref.h"

#include <cassert>
#include <cstring>

#include "quant/blocks.h"
#include "quant/blocks_iq23.h"
#include "quant/iq23_grids.h"
#include "util/half.h"

namespace vela::kernels::ref {

namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// sum_j +-mag[j] * act[j] over one group of 8: mag [8] magnitudes, act [8] quants, sign bit j
// set = element j negative.
int group_dot(const uint8_t* mag, uint8_t signs, const int8_t* act) {
  int sum = 0;
  for (int j = 0; j < 8; ++j) {
    const int v = int(mag[j]) * int(act[j]);
    sum += (signs >> j) & 1 ? -v : v;
  }
  return sum;
}

int group_dot8(uint64_t entry, uint8_t signs, const int8_t* act) {
  uint8_t mag[8];
  std::memcpy(mag, &entry, 8);
  return group_dot(mag, signs, act);
}

int group_dot4x2(uint32_t first, uint32_t second, uint8_t signs, const int8_t* act) {
  uint8_t mag[8];
  std::memcpy(mag, &first, 4);
  std::memcpy(mag + 4, &second, 4);
  return group_dot(mag, signs, act);
}

int odd_scale(uint32_t s) {
  return int(2 * (s & 15) + 1);
}

// Per super-block, Format::block_sum(w, act) gives the exact integer sum of ls * group dots;
// the row sum is f * sum_b d_w d_a block_sum.
template <class Format>
float vec_dot_iq(int64_t n, const void* w_row, const void* a_row) {
  assert(n % kQK_K == 0);
  const auto* w = static_cast<const typename Format::Block*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const int isum = Format::block_sum(w[b], a[b].qs);
    sum += (fp16_to_fp32(w[b].d) * a[b].d) * float(isum);
  }
  return Format::kFactor * sum;
}

// Ranges: a group dot is at most 8 * 62 * 128 < 2^16 in magnitude, a sub-block's 4 of them
// times ls <= 31 < 2^23, a super-block's 8 sub-blocks < 2^26: int32 never overflows.

struct IQ2_XXS {
  using Block = BlockIQ2_XXS;
  static constexpr float kFactor = 0.125f;
  static int block_sum(const Block& w, const int8_t* act) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* q = w.qs + 8 * sb;
      const uint32_t aux = load_u32(q + 4);
      int sub = 0;
      for (int l = 0; l < 4; ++l) {
        sub += group_dot8(kIq2XxsGrid[q[l]], iq_sign_byte(aux >> (7 * l)), act + 32 * sb + 8 * l);
      }
      isum += odd_scale(aux >> 28) * sub;
    }
    return isum;
  }
};

struct IQ2_XS {
  using Block = BlockIQ2_XS;
  static constexpr float kFactor = 0.125f;
  static int block_sum(const Block& w, const int8_t* act) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      for (int half = 0; half < 2; ++half) {  // 16 elements per 4-bit scale
        int sub = 0;
        for (int l = 2 * half; l < 2 * half + 2; ++l) {
          const uint16_t q = w.qs[4 * sb + l];
          sub += group_dot8(kIq2XsGrid[q & 511], iq_sign_byte(q >> 9), act + 32 * sb + 8 * l);
        }
        isum += odd_scale(w.scales[sb] >> (4 * half)) * sub;
      }
    }
    return isum;
  }
};

struct IQ2_S {
  using Block = BlockIQ2_S;
  static constexpr float kFactor = 0.125f;
  static int block_sum(const Block& w, const int8_t* act) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      for (int half = 0; half < 2; ++half) {
        int sub = 0;
        for (int l = 2 * half; l < 2 * half + 2; ++l) {
          const int g = 4 * sb + l;
          const int index = w.qs[g] | (((w.qh[sb] >> (2 * l)) & 3) << 8);
          sub += group_dot8(kIq2SGrid[index], w.signs[g], act + 8 * g);
        }
        isum += odd_scale(w.scales[sb] >> (4 * half)) * sub;
      }
    }
    return isum;
  }
};

struct IQ3_XXS {
  using Block = BlockIQ3_XXS;
  static constexpr float kFactor = 0.25f;
  static int block_sum(const Block& w, const int8_t* act) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* q = w.qs + 8 * sb;
      const uint32_t aux = load_u32(w.scales_signs + 4 * sb);
      int sub = 0;
      for (int l = 0; l < 4; ++l) {
        sub += group_dot4x2(kIq3XxsGrid[q[2 * l]], kIq3XxsGrid[q[2 * l + 1]],
                            iq_sign_byte(aux >> (7 * l)), act + 32 * sb + 8 * l);
      }
      isum += odd_scale(aux >> 28) * sub;
    }
    return isum;
  }
};

struct IQ3_S {
  using Block = BlockIQ3_S;
  static constexpr float kFactor = 1.0f;
  static int block_sum(const Block& w, const int8_t* act) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* q = w.qs + 8 * sb;
      int sub = 0;
      for (int l = 0; l < 4; ++l) {
        const int lo = q[2 * l] | (((w.qh[sb] >> (2 * l)) & 1) << 8);
        const int hi = q[2 * l + 1] | (((w.qh[sb] >> (2 * l + 1)) & 1) << 8);
        sub +=
            group_dot4x2(kIq3SGrid[lo], kIq3SGrid[hi], w.signs[4 * sb + l], act + 32 * sb + 8 * l);
      }
      isum += odd_scale(w.scales[sb / 2] >> (4 * (sb % 2))) * sub;
    }
    return isum;
  }
};

}  // namespace

float vec_dot_iq2_xxs_q8_k(int64_t n, const void* w, const void* a) {
  return vec_dot_iq<IQ2_XXS>(n, w, a);
}
float vec_dot_iq2_xs_q8_k(int64_t n, const void* w, const void* a) {
  return vec_dot_iq<IQ2_XS>(n, w, a);
}
float vec_dot_iq2_s_q8_k(int64_t n, const void* w, const void* a) {
  return vec_dot_iq<IQ2_S>(n, w, a);
}
float vec_dot_iq3_xxs_q8_k(int64_t n, const void* w, const void* a) {
  return vec_dot_iq<IQ3_XXS>(n, w, a);
}
float vec_dot_iq3_s_q8_k(int64_t n, const void* w, const void* a) {
  return vec_dot_iq<IQ3_S>(n, w, a);
}

}  // namespace vela::kernels::ref

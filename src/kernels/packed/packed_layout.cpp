#include "kernels/packed/packed_layout.h"

#include <cassert>
#include <cstring>
#include <optional>
#include <type_traits>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "quant/blocks.h"
#include "quant/blocks_low_k.h"
#include "quant/blocks_nonlinear4.h"

namespace vela {

namespace {

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Packing copies 4-byte groups: each lands in one slot of the interleaved block.
void pack_group(const BlockQ8_0* rows[kPackedRows], int64_t nb, BlockQ8_0x16* out) {
  static_assert(kQ8_0PackedBias == 128, "level + 128 is the byte with its top bit flipped");
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ8_0x16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ8_0& src = rows[n][b];
      o.d[n] = src.d;
      for (int j = 0; j < 8; ++j) {
        const uint32_t biased = load_u32(src.qs + 4 * j) ^ 0x80808080u;
        std::memcpy(o.qs[j][n], &biased, 4);
      }
    }
  }
}

// GGUF's byte k already holds elements k (low nibble) and 16 + k (high): bytes are copied.
// Q4_1, Q5_0 and Q5_1 keep Q4_0's nibble bytes; the 5th bits (GGUF bit k of qh = element k)
// go to bit k / 4 of byte (n, k % 4) (packed_blocks.h).
template <class Packed>
void pack_high_bits(const uint8_t gguf_qh[4], int n, Packed& o) {
  const uint32_t bits = load_u32(gguf_qh);
  for (int i = 0; i < 4; ++i) {
    uint8_t plane = 0;
    for (int v = 0; v < 8; ++v) plane |= uint8_t(((bits >> (4 * v + i)) & 1) << v);
    o.qh[n][i] = plane;
  }
}

template <class Packed>
void unpack_high_bits(const Packed& in, int n, uint8_t gguf_qh[4]) {
  uint32_t bits = 0;
  for (int i = 0; i < 4; ++i)
    for (int v = 0; v < 8; ++v) bits |= uint32_t((in.qh[n][i] >> v) & 1) << (4 * v + i);
  std::memcpy(gguf_qh, &bits, 4);
}

// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 (the other types have overloads of their own, which
// take precedence over this template). MXFP4's e8m0 bytes are copied as its scales.
template <class Block, class Packed>
void pack_group(const Block* rows[kPackedRows], int64_t nb, Packed* out) {
  for (int64_t b = 0; b < nb; ++b) {
    Packed& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const Block& src = rows[n][b];
      if constexpr (requires(const Block& x) { x.e; })
        o.e[n] = src.e;
      else
        o.d[n] = src.d;
      if constexpr (requires(const Block& x) { x.m; }) o.m[n] = src.m;
      if constexpr (requires(const Block& x) { x.qh; }) pack_high_bits(src.qh, n, o);
      for (int j = 0; j < 4; ++j) std::memcpy(o.qs[j][n], src.qs + 4 * j, 4);
    }
  }
}

// Row n of a Q4_K or Q5_K super-block's scales, mins and low 4 bits (the same fields in both).
template <class KBlock>
void pack_q4_k_part(const KBlock& src, int n, BlockQ4_Kx16& o) {
  o.d[n] = src.d;
  o.dmin[n] = src.dmin;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    k_scale_min(j, src.scales, &sc, &mn);
    o.scale[j][n] = sc;
    o.min_pairs[j / 2][n][j % 2] = mn;
  }
  for (int p = 0; p < 4; ++p)
    for (int g = 0; g < 8; ++g) std::memcpy(o.qs[p][g][n], src.qs + 32 * p + 4 * g, 4);
}

template <class KBlock>
void unpack_q4_k_part(const BlockQ4_Kx16& in, int n, KBlock* out) {
  out->d = in.d[n];
  out->dmin = in.dmin[n];
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) sc[j] = in.scale[j][n], mn[j] = in.min_pairs[j / 2][n][j % 2];
  k_pack_scale_min(sc, mn, out->scales);
  for (int p = 0; p < 4; ++p)
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 4; ++i) out->qs[32 * p + 4 * g + i] = in.qs[p][g][n][i];
}

void pack_group(const BlockQ4_K* rows[kPackedRows], int64_t nb, BlockQ4_Kx16* out) {
  for (int64_t b = 0; b < nb; ++b)
    for (int n = 0; n < kPackedRows; ++n) pack_q4_k_part(rows[n][b], n, out[b]);
}

// Q5_K's 5th bit of element 32j + l is bit j of qh[l]; packed, for l = 4g + i, it is bit g of
// row n's byte i in sub-block j's plane, qh[j / 2][j % 2][n][i].
void pack_group(const BlockQ5_K* rows[kPackedRows], int64_t nb, BlockQ5_Kx16* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ5_Kx16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ5_K& src = rows[n][b];
      pack_q4_k_part(src, n, o.low);
      for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 4; ++i) {
          uint8_t plane = 0;
          for (int g = 0; g < 8; ++g) plane |= uint8_t(((src.qh[4 * g + i] >> j) & 1) << g);
          o.qh[j / 2][j % 2][n][i] = plane;
        }
    }
  }
}

// IQ4_XS: the scales decoded (minus 32), sub-block j's 16 nibble bytes as IQ4_NL's block.
void pack_group(const BlockIQ4_XS* rows[kPackedRows], int64_t nb, BlockIQ4_XSx16* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ4_XSx16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockIQ4_XS& src = rows[n][b];
      o.d[n] = src.d;
      for (int j = 0; j < 8; ++j) {
        o.scale[j][n] = int8_t(iq4_xs_scale(src, j));
        for (int v = 0; v < 4; ++v) std::memcpy(o.qs[j][v][n], src.qs + 16 * j + 4 * v, 4);
      }
    }
  }
}

void unpack_block(const BlockIQ4_XSx16& in, int n, BlockIQ4_XS* out) {
  out->d = in.d[n];
  out->scales_h = 0;
  std::memset(out->scales_l, 0, sizeof(out->scales_l));
  for (int j = 0; j < 8; ++j) {
    const int ls = in.scale[j][n] + 32;  // 0..63
    out->scales_l[j / 2] = uint8_t(out->scales_l[j / 2] | (ls & 0x0F) << (4 * (j % 2)));
    out->scales_h = uint16_t(out->scales_h | (ls >> 4) << (2 * j));
    for (int k = 0; k < 16; ++k) out->qs[16 * j + k] = in.qs[j][k / 4][n][k % 4];
  }
}

// Q3_K: the scales decoded (minus 32), each element's low 2 bits and high bit (the file's qs
// field and hmask bit) moved to their places in the interleaved planes.
inline int q3_k_low(const BlockQ3_K& b, int e) {
  return (b.qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
}
inline int q3_k_high(const BlockQ3_K& b, int e) {
  return (b.hmask[e % 32] >> (e / 32)) & 1;
}

void pack_group(const BlockQ3_K* rows[kPackedRows], int64_t nb, BlockQ3_Kx16* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ3_Kx16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ3_K& src = rows[n][b];
      o.d[n] = src.d;
      for (int j = 0; j < kLowKSubBlocks; ++j) {
        o.scale[j][n] = int8_t(q3_k_scale(j, src.scales));
        for (int i = 0; i < 4; ++i) {
          int byte = 0;
          for (int v = 0; v < 4; ++v) byte |= q3_k_low(src, 16 * j + 4 * v + i) << (2 * v);
          o.ql[j][n][i] = uint8_t(byte);
        }
      }
      for (int p = 0; p < kLowKSubBlocks / 2; ++p)
        for (int i = 0; i < 4; ++i) {
          int byte = 0;
          for (int v = 0; v < 8; ++v) byte |= q3_k_high(src, 32 * p + 4 * v + i) << v;
          o.qh[p][n][i] = uint8_t(byte);
        }
    }
  }
}

void unpack_block(const BlockQ3_Kx16& in, int n, BlockQ3_K* out) {
  out->d = in.d[n];
  std::memset(out->hmask, 0, sizeof(out->hmask));
  std::memset(out->qs, 0, sizeof(out->qs));
  std::memset(out->scales, 0, sizeof(out->scales));
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    const int s = in.scale[j][n] + 32;  // 0..63, q3_k_scale()'s fields
    out->scales[j % 8] = uint8_t(out->scales[j % 8] | (s & 0x0F) << (4 * (j / 8)));
    out->scales[8 + j % 4] = uint8_t(out->scales[8 + j % 4] | (s >> 4) << (2 * (j / 4)));
  }
  for (int e = 0; e < kQK_K; ++e) {
    const int low = (in.ql[e / 16][n][e % 4] >> (2 * (e % 16 / 4))) & 3;
    const int high = (in.qh[e / 32][n][e % 4] >> (e % 32 / 4)) & 1;
    uint8_t& q = out->qs[32 * (e / 128) + e % 32];
    q = uint8_t(q | low << (2 * (e / 32 % 4)));
    out->hmask[e % 32] = uint8_t(out->hmask[e % 32] | high << (e / 32));
  }
}

// Row n of a Q2_K / TQ2_0 block's 2-bit plane: each element's 2 bits (the file's qs field,
// q3_k_low()'s order) moved to its place in the interleaved plane, and back.
void pack_two_bit_plane(const uint8_t (&qs)[kQK_K / 4], int n,
                        uint8_t (&plane)[kLowKSubBlocks][kPackedRows][4]) {
  for (int j = 0; j < kLowKSubBlocks; ++j)
    for (int i = 0; i < 4; ++i) {
      int byte = 0;
      for (int v = 0; v < 4; ++v) {
        const int e = 16 * j + 4 * v + i;
        byte |= ((qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3) << (2 * v);
      }
      plane[j][n][i] = uint8_t(byte);
    }
}

void unpack_two_bit_plane(const uint8_t (&plane)[kLowKSubBlocks][kPackedRows][4], int n,
                          uint8_t (&qs)[kQK_K / 4]) {
  std::memset(qs, 0, sizeof(qs));
  for (int e = 0; e < kQK_K; ++e) {
    const int q = (plane[e / 16][n][e % 4] >> (2 * (e % 16 / 4))) & 3;
    uint8_t& byte = qs[32 * (e / 128) + e % 32];
    byte = uint8_t(byte | q << (2 * (e / 32 % 4)));
  }
}

// Q2_K: the scale / min bytes copied into their pairs, the 2-bit plane interleaved.
void pack_group(const BlockQ2_K* rows[kPackedRows], int64_t nb, BlockQ2_Kx16* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ2_Kx16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ2_K& src = rows[n][b];
      o.d[n] = src.d;
      o.dmin[n] = src.dmin;
      for (int j = 0; j < kLowKSubBlocks; ++j) o.scale_min[j / 2][n][j % 2] = src.scales[j];
      pack_two_bit_plane(src.qs, n, o.qs);
    }
  }
}

void unpack_block(const BlockQ2_Kx16& in, int n, BlockQ2_K* out) {
  out->d = in.d[n];
  out->dmin = in.dmin[n];
  for (int j = 0; j < kLowKSubBlocks; ++j) out->scales[j] = in.scale_min[j / 2][n][j % 2];
  unpack_two_bit_plane(in.qs, n, out->qs);
}

// TQ2_0: the scale copied, the 2-bit plane interleaved.
void pack_group(const BlockTQ2_0* rows[kPackedRows], int64_t nb, BlockTQ2_0x16* out) {
  for (int64_t b = 0; b < nb; ++b)
    for (int n = 0; n < kPackedRows; ++n) {
      out[b].d[n] = rows[n][b].d;
      pack_two_bit_plane(rows[n][b].qs, n, out[b].qs);
    }
}

void unpack_block(const BlockTQ2_0x16& in, int n, BlockTQ2_0* out) {
  out->d = in.d[n];
  unpack_two_bit_plane(in.qs, n, out->qs);
}

// Q6_K element k of a GGUF block (dequantize_row_q6_k's order: half, quarter, position).
struct Q6Index {
  int ql, ql_shift, qh, qh_shift;
  explicit Q6Index(int k) {
    const int half = k / 128, quarter = k % 128 / 32, l = k % 32;
    ql = 64 * half + l + (quarter % 2 ? 32 : 0);
    ql_shift = quarter < 2 ? 0 : 4;
    qh = 32 * half + l;
    qh_shift = 2 * quarter;
  }
};

void set_q6_level(BlockQ6_K& b, int k, int q) {
  const Q6Index i(k);
  b.ql[i.ql] = uint8_t((b.ql[i.ql] & ~(0x0F << i.ql_shift)) | ((q & 0x0F) << i.ql_shift));
  b.qh[i.qh] = uint8_t((b.qh[i.qh] & ~(3 << i.qh_shift)) | ((q >> 4) << i.qh_shift));
}

// All 256 levels of a Q6_K block, in element order (dequantize_row_q6_k's loops).
void q6_levels(const BlockQ6_K& b, uint8_t q[256]) {
  for (int half = 0; half < 2; ++half)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t qh = b.qh[32 * half + l];
      uint8_t* out = q + 128 * half;
      out[l] = uint8_t((ql[l] & 0x0F) | ((qh & 3) << 4));
      out[32 + l] = uint8_t((ql[32 + l] & 0x0F) | (((qh >> 2) & 3) << 4));
      out[64 + l] = uint8_t((ql[l] >> 4) | (((qh >> 4) & 3) << 4));
      out[96 + l] = uint8_t((ql[32 + l] >> 4) | (((qh >> 6) & 3) << 4));
    }
}

void pack_group(const BlockQ6_K* rows[kPackedRows], int64_t nb, BlockQ6_Kx16* out) {
  uint8_t q[256];
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ6_Kx16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ6_K& src = rows[n][b];
      o.d[n] = src.d;
      q6_levels(src, q);
      for (int s = 0; s < 16; ++s) {
        o.scale[s][n] = src.scales[s];  // sub-block s = elements 16s .. 16s + 15
        const uint8_t* qs = q + 16 * s;
        for (int i = 0; i < 4; ++i) {
          o.qh[s][n][i] = uint8_t((qs[i] >> 4) | ((qs[4 + i] >> 4) << 2) | ((qs[8 + i] >> 4) << 4) |
                                  ((qs[12 + i] >> 4) << 6));
          for (int h = 0; h < 2; ++h)
            o.ql[s][h][n][i] = uint8_t((qs[8 * h + i] & 0x0F) | ((qs[8 * h + 4 + i] & 0x0F) << 4));
        }
      }
    }
  }
}

void unpack_block(const BlockQ6_Kx16& in, int n, BlockQ6_K* out) {
  out->d = in.d[n];
  for (int s = 0; s < 16; ++s) {
    out->scales[s] = in.scale[s][n];
    for (int g = 0; g < 4; ++g)
      for (int i = 0; i < 4; ++i) {
        const int low = (in.ql[s][g / 2][n][i] >> (4 * (g % 2))) & 0x0F;
        const int high = (in.qh[s][n][i] >> (2 * g)) & 3;
        set_q6_level(*out, 16 * s + 4 * g + i, low | (high << 4));
      }
  }
}

void unpack_block(const BlockQ4_Kx16& in, int n, BlockQ4_K* out) {
  unpack_q4_k_part(in, n, out);
}

void unpack_block(const BlockQ5_Kx16& in, int n, BlockQ5_K* out) {
  unpack_q4_k_part(in.low, n, out);
  std::memset(out->qh, 0, sizeof(out->qh));
  for (int j = 0; j < 8; ++j)
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 4; ++i)
        if ((in.qh[j / 2][j % 2][n][i] >> g) & 1) out->qh[4 * g + i] |= uint8_t(1 << j);
}

void unpack_block(const BlockQ8_0x16& in, int n, BlockQ8_0* out) {
  out->d = in.d[n];
  for (int k = 0; k < kPackedBlockK; ++k)
    out->qs[k] = int8_t(int(in.qs[k / 4][n][k % 4]) - kQ8_0PackedBias);
}

// Byte (k/4, k%4) holds elements k and 16 + k, as GGUF's byte k does.
template <class Packed, class Block>
void unpack_block(const Packed& in, int n, Block* out) {
  if constexpr (requires(Block & x) { x.e; })
    out->e = in.e[n];
  else
    out->d = in.d[n];
  if constexpr (requires(Block & x) { x.m; }) out->m = in.m[n];
  if constexpr (requires(Block & x) { x.qh; }) unpack_high_bits(in, n, out->qh);
  for (int k = 0; k < 16; ++k) out->qs[k] = in.qs[k / 4][n][k % 4];
}

// Elements per packed block: the GGUF block's.
template <class Block>
constexpr int64_t kPackedK =
    std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K> ||
            std::is_same_v<Block, BlockQ6_K> || std::is_same_v<Block, BlockIQ4_XS> ||
            std::is_same_v<Block, BlockQ3_K> || std::is_same_v<Block, BlockQ2_K> ||
            std::is_same_v<Block, BlockTQ2_0>
        ? kPackedSuperK
        : kPackedBlockK;

template <class Block, class Packed>
void pack_rows(const void* src, int64_t n_cols, int64_t row_begin, int64_t row_end, void* dst) {
  assert(row_begin % kPackedRows == 0 && row_end % kPackedRows == 0);
  const int64_t nb = n_cols / kPackedK<Block>;
  const auto* in = static_cast<const Block*>(src);
  auto* out = static_cast<Packed*>(dst);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPackedRows) {
    const Block* rows[kPackedRows];
    for (int n = 0; n < kPackedRows; ++n) rows[n] = in + (r0 + n) * nb;
    pack_group(rows, nb, out + r0 / kPackedRows * nb);
  }
}

template <class Block, class Packed>
void unpack_row(const void* packed, int64_t n_cols, int64_t row, void* dst_row) {
  const int64_t nb = n_cols / kPackedK<Block>;
  const Packed* group = static_cast<const Packed*>(packed) + row / kPackedRows * nb;
  auto* out = static_cast<Block*>(dst_row);
  for (int64_t b = 0; b < nb; ++b) unpack_block(group[b], int(row % kPackedRows), out + b);
}

// fn.template operator()<Block, Packed>() for w_type's GGUF block and packed group types;
// false when w_type has no interleaved layout.
template <class Fn>
bool with_packed_types(GgmlType w_type, Fn&& fn) {
  switch (w_type) {
    case GgmlType::Q8_0:
      return fn.template operator()<BlockQ8_0, BlockQ8_0x16>(), true;
    case GgmlType::Q4_0:
      return fn.template operator()<BlockQ4_0, BlockQ4_0x16>(), true;
    case GgmlType::Q5_0:
      return fn.template operator()<BlockQ5_0, BlockQ5_0x16>(), true;
    case GgmlType::Q4_1:
      return fn.template operator()<BlockQ4_1, BlockQ4_1x16>(), true;
    case GgmlType::Q5_1:
      return fn.template operator()<BlockQ5_1, BlockQ5_1x16>(), true;
    case GgmlType::Q4_K:
      return fn.template operator()<BlockQ4_K, BlockQ4_Kx16>(), true;
    case GgmlType::Q5_K:
      return fn.template operator()<BlockQ5_K, BlockQ5_Kx16>(), true;
    case GgmlType::Q6_K:
      return fn.template operator()<BlockQ6_K, BlockQ6_Kx16>(), true;
    case GgmlType::IQ4_NL:
      return fn.template operator()<BlockIQ4_NL, BlockIQ4_NLx16>(), true;
    case GgmlType::MXFP4:
      return fn.template operator()<BlockMXFP4, BlockMXFP4x16>(), true;
    case GgmlType::IQ4_XS:
      return fn.template operator()<BlockIQ4_XS, BlockIQ4_XSx16>(), true;
    case GgmlType::Q3_K:
      return fn.template operator()<BlockQ3_K, BlockQ3_Kx16>(), true;
    case GgmlType::Q2_K:
      return fn.template operator()<BlockQ2_K, BlockQ2_Kx16>(), true;
    case GgmlType::TQ2_0:
      return fn.template operator()<BlockTQ2_0, BlockTQ2_0x16>(), true;
    default:
      return false;
  }
}

// The float types' layout (packed_blocks.h): element k of row n of a group at slot
// (k / P) * 16 P + n P + k % P, P elements of a row side by side.
struct FloatInterleave {
  size_t elem_bytes;
  int64_t pair;  // P
};

std::optional<FloatInterleave> float_interleave(GgmlType w_type) {
  switch (w_type) {
    case GgmlType::F32:
      return FloatInterleave{4, 1};
    case GgmlType::F16:
      return FloatInterleave{2, 1};
    case GgmlType::BF16:
      return FloatInterleave{2, kBf16PackedPair};
    default:
      return std::nullopt;
  }
}

// Element k of row n in a float group: its slot.
inline int64_t float_slot(const FloatInterleave& f, int64_t n, int64_t k) {
  return k / f.pair * kPackedRows * f.pair + n * f.pair + k % f.pair;
}

void pack_float_rows(const FloatInterleave& f, const void* src, int64_t n_cols, int64_t row_begin,
                     int64_t row_end, void* dst) {
  assert(row_begin % kPackedRows == 0 && row_end % kPackedRows == 0);
  const size_t e = f.elem_bytes;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPackedRows) {
    uint8_t* group = out + size_t(r0 * n_cols) * e;
    for (int64_t n = 0; n < kPackedRows; ++n) {
      const uint8_t* row = in + size_t((r0 + n) * n_cols) * e;
      for (int64_t k = 0; k < n_cols; k += f.pair)
        std::memcpy(group + size_t(float_slot(f, n, k)) * e, row + size_t(k) * e,
                    size_t(f.pair) * e);
    }
  }
}

void unpack_float_row(const FloatInterleave& f, const void* packed, int64_t n_cols, int64_t row,
                      void* dst_row) {
  const size_t e = f.elem_bytes;
  const auto* group =
      static_cast<const uint8_t*>(packed) + size_t(row / kPackedRows * kPackedRows * n_cols) * e;
  auto* out = static_cast<uint8_t*>(dst_row);
  for (int64_t k = 0; k < n_cols; k += f.pair)
    std::memcpy(out + size_t(k) * e, group + size_t(float_slot(f, row % kPackedRows, k)) * e,
                size_t(f.pair) * e);
}

}  // namespace

int64_t interleaved16_block_cols(GgmlType w_type) {
  if (const auto f = float_interleave(w_type)) return f->pair;
  return w_type == GgmlType::Q4_K || w_type == GgmlType::Q5_K || w_type == GgmlType::Q6_K ||
                 w_type == GgmlType::IQ4_XS || w_type == GgmlType::Q3_K ||
                 w_type == GgmlType::Q2_K || w_type == GgmlType::TQ2_0
             ? kPackedSuperK
             : kPackedBlockK;
}

bool prefers_interleaved16(GgmlType w_type, int64_t n_rows, int64_t n_cols) {
  const int64_t k = interleaved16_block_cols(w_type);
  if (n_rows <= 0 || n_rows % kPackedRows != 0 || n_cols <= 0 || n_cols % k != 0) return false;
  return active_packed_kernels(w_type).small != nullptr;
}

int64_t interleaved16_group_bytes(GgmlType w_type, int64_t n_cols) {
  if (const auto f = float_interleave(w_type)) return kPackedRows * n_cols * int64_t(f->elem_bytes);
  int64_t bytes = 0;
  const bool known = with_packed_types(w_type, [&]<class Block, class Packed>() {
    bytes = n_cols / kPackedK<Block> * int64_t(sizeof(Packed));
  });
  assert(known && "no interleaved layout for this type");
  (void)known;
  return bytes;
}

void pack_interleaved16(GgmlType w_type, const void* src, int64_t n_cols, int64_t row_begin,
                        int64_t row_end, void* dst) {
  if (const auto f = float_interleave(w_type))
    return pack_float_rows(*f, src, n_cols, row_begin, row_end, dst);
  const bool known = with_packed_types(w_type, [&]<class Block, class Packed>() {
    pack_rows<Block, Packed>(src, n_cols, row_begin, row_end, dst);
  });
  assert(known && "no interleaved layout for this type");
  (void)known;
}

void unpack_interleaved16_row(GgmlType w_type, const void* packed, int64_t n_cols, int64_t row,
                              void* dst_row) {
  if (const auto f = float_interleave(w_type))
    return unpack_float_row(*f, packed, n_cols, row, dst_row);
  const bool known = with_packed_types(w_type, [&]<class Block, class Packed>() {
    unpack_row<Block, Packed>(packed, n_cols, row, dst_row);
  });
  assert(known && "no interleaved layout for this type");
  (void)known;
}

}  // namespace vela

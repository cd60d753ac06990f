#include "kernels/packed/packed_layout.h"

#include <cassert>
#include <cstring>

#include "kernels/packed/packed_blocks.h"
#include "kernels/packed/packed_gemm.h"
#include "quant/blocks.h"

namespace vela {

namespace {

// Level of element k (0..31) of a Q4_0 block: byte j low nibble = element j, high = j + 16.
inline uint8_t q4_level(const BlockQ4_0& b, int k) {
  return k < 16 ? uint8_t(b.qs[k] & 0x0F) : uint8_t(b.qs[k - 16] >> 4);
}

void pack_group(const BlockQ8_0* rows[kPackedRows], int64_t nb, BlockQ8_0x16* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ8_0x16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ8_0& src = rows[n][b];
      o.d[n] = src.d;
      for (int k = 0; k < kPackedBlockK; ++k)
        o.qs[k / 4][n][k % 4] = uint8_t(int(src.qs[k]) + kQ8_0PackedBias);
    }
  }
}

void pack_group(const BlockQ4_0* rows[kPackedRows], int64_t nb, BlockQ4_0x16* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ4_0x16& o = out[b];
    for (int n = 0; n < kPackedRows; ++n) {
      const BlockQ4_0& src = rows[n][b];
      o.d[n] = src.d;
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 4; ++i)
          o.qs[j][n][i] = uint8_t(q4_level(src, 4 * j + i) | (q4_level(src, 16 + 4 * j + i) << 4));
    }
  }
}

template <class Block, class Packed>
void pack_rows(const void* src, int64_t n_cols, int64_t row_begin, int64_t row_end, void* dst) {
  assert(row_begin % kPackedRows == 0 && row_end % kPackedRows == 0);
  const int64_t nb = n_cols / kPackedBlockK;
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
  const int64_t nb = n_cols / kPackedBlockK;
  const Packed* group = static_cast<const Packed*>(packed) + row / kPackedRows * nb;
  const int n = int(row % kPackedRows);
  auto* out = static_cast<Block*>(dst_row);
  for (int64_t b = 0; b < nb; ++b) {
    out[b].d = group[b].d[n];
    if constexpr (sizeof(Block) == sizeof(BlockQ8_0)) {
      for (int k = 0; k < kPackedBlockK; ++k)
        out[b].qs[k] = int8_t(int(group[b].qs[k / 4][n][k % 4]) - kQ8_0PackedBias);
    } else {
      for (int k = 0; k < 16; ++k) {
        const uint8_t lo = group[b].qs[k / 4][n][k % 4] & 0x0F;
        const uint8_t hi = group[b].qs[k / 4][n][k % 4] >> 4;
        // Element k sits in byte (k/4, k%4) low nibble; element 16 + k in the same byte's high.
        out[b].qs[k] = uint8_t(lo | (hi << 4));
      }
    }
  }
}

}  // namespace

bool prefers_interleaved16(GgmlType w_type, int64_t n_rows, int64_t n_cols) {
  if (n_rows <= 0 || n_rows % kPackedRows != 0 || n_cols <= 0 || n_cols % kPackedBlockK != 0)
    return false;
  return active_packed_kernels(w_type).small != nullptr;
}

void pack_interleaved16(GgmlType w_type, const void* src, int64_t n_cols, int64_t row_begin,
                        int64_t row_end, void* dst) {
  switch (w_type) {
    case GgmlType::Q8_0: return pack_rows<BlockQ8_0, BlockQ8_0x16>(src, n_cols, row_begin, row_end, dst);
    case GgmlType::Q4_0: return pack_rows<BlockQ4_0, BlockQ4_0x16>(src, n_cols, row_begin, row_end, dst);
    default: assert(false && "no interleaved layout for this type");
  }
}

void unpack_interleaved16_row(GgmlType w_type, const void* packed, int64_t n_cols, int64_t row,
                              void* dst_row) {
  switch (w_type) {
    case GgmlType::Q8_0: return unpack_row<BlockQ8_0, BlockQ8_0x16>(packed, n_cols, row, dst_row);
    case GgmlType::Q4_0: return unpack_row<BlockQ4_0, BlockQ4_0x16>(packed, n_cols, row, dst_row);
    default: assert(false && "no interleaved layout for this type");
  }
}

}  // namespace vela

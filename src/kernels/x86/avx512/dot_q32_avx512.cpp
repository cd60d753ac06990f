// AVX-512 dot products of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with
// Q8_0 / Q8_1 activations. One 512-bit register holds two blocks. Each weight pair is decoded
// once into unsigned bytes (|level| plus a sign mask for the symmetric types, so vpdpbusd's
// unsigned x signed form applies) and then dotted with every activation row of the tile: the
// integer sum per block is exact, and is scaled per block in float by d_w * d_a as the scalar
// reference does (the fp16 scales gathered with vpermw and converted exactly by vcvtph2ps).
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/block_dot_install.h"
#include "quant/blocks.h"

namespace vela::kernels::avx512 {

namespace {

constexpr int64_t kBlock = 32;

// One or two consecutive weight blocks, decoded for the int8 dot: byte i of `u` multiplies
// byte i of the activation pair (block 0 in bytes 0-31, block 1 in bytes 32-63, element order).
struct DecodedPair {
  __m512i u;      // |level| (symmetric types) or the level itself (affine types), 0..128
  __mmask64 neg;  // symmetric types: bytes whose level is negative
  __m512 d;       // weight scale: lanes 0-7 block 0, lanes 8-15 block 1
  __m512 m8;      // affine types: offset / 8 (each block's offset term is spread over 8 lanes)
};

// The first min(64, blocks * kBytes) bytes of one block (kTwo false) or two consecutive blocks
// of kBytes each, the rest zero; or, when kReadable64 (64 bytes from p are known to be inside
// the row), the 64 bytes as they are. A masked load only where needed: one whose masked-off part
// crosses into a page missing from the TLB is very slow on some CPUs (measured 4x on a whole
// matrix x vector here).
template <size_t kBytes, bool kTwo, bool kReadable64 = false>
inline __m512i load_blocks(const void* p) {
  constexpr size_t bytes = (kTwo ? 2 : 1) * kBytes < 64 ? (kTwo ? 2 : 1) * kBytes : 64;
  if constexpr (bytes == 64 || kReadable64) {
    return _mm512_loadu_si512(p);
  } else {
    return _mm512_maskz_loadu_epi8((__mmask64(1) << bytes) - 1, p);
  }
}

// A 16-bit-lane permutation (vpermw index), built at compile time.
struct WordIndex {
  alignas(64) int16_t lane[32];
  __m512i get() const { return _mm512_load_si512(lane); }
};

// Lanes 0-7 = word a0, 8-15 = a1, 16-23 = b0, 24-31 = b1: two fp16 fields of two blocks.
constexpr WordIndex field_index(int a0, int a1, int b0, int b1) {
  WordIndex idx{};
  for (int i = 0; i < 32; ++i) idx.lane[i] = int16_t(i < 8 ? a0 : i < 16 ? a1 : i < 24 ? b0 : b1);
  return idx;
}

// 128-bit lanes: the 16 nibble bytes at word q0 twice, then those at word q1 twice.
constexpr WordIndex nibble_index(int q0, int q1) {
  WordIndex idx{};
  for (int i = 0; i < 32; ++i) idx.lane[i] = int16_t((i < 16 ? q0 : q1) + i % 8);
  return idx;
}

// The fp16 values that vpermw gathered into the low (upper = false) or high 256 bits, as floats.
inline __m512 halves_low(__m512i gathered) {
  return _mm512_cvtph_ps(_mm512_castsi512_si256(gathered));
}
inline __m512 halves_high(__m512i gathered) {
  return _mm512_cvtph_ps(_mm512_extracti64x4_epi64(gathered, 1));
}

// The pair's nibbles (gathered by nibble_index) as 64 levels in element order: per block, the
// low nibbles are elements 0-15 and the high nibbles 16-31.
inline __m512i nibble_levels(__m512i gathered) {
  const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(gathered, shifts), _mm512_set1_epi8(0x0F));
}

// The quants of one block (kTwo false: upper half zero) or two blocks `stride` bytes apart.
template <bool kTwo>
inline __m512i load_quants(const int8_t* q, size_t stride) {
  const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  if constexpr (!kTwo) return _mm512_zextsi256_si512(q0);
  const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + stride));
  return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
}

// Sets bit 4 of the bytes whose 5th bit is set in the blocks' qh words (bit j = element j).
template <bool kTwo>
inline __m512i add_fifth_bits(__m512i q, const uint8_t* qh, size_t stride) {
  uint64_t bits = uint32_t(load_i32(qh));
  if constexpr (kTwo) bits |= uint64_t(uint32_t(load_i32(qh + stride))) << 32;
  return _mm512_mask_add_epi8(q, bits, q, _mm512_set1_epi8(0x10));
}

// Symmetric levels q - zero (zero = 8 or 16) as magnitudes and signs.
inline void set_symmetric(__m512i q, int zero, DecodedPair* p) {
  const __m512i z = _mm512_set1_epi8(char(zero));
  p->u = _mm512_abs_epi8(_mm512_sub_epi8(q, z));
  p->neg = _mm512_cmplt_epu8_mask(q, z);
}

// Word offset of a field in a block.
constexpr int word(size_t byte_offset) {
  return int(byte_offset / 2);
}

// Weight formats: the block, its activation block, and how a pair decodes. The smaller blocks
// (up to 32 bytes) come in with one masked load; vpermw then gathers their nibbles and scales.
struct Q4_0Format {
  using Block = BlockQ4_0;
  using Act = BlockQ8_0;
  static constexpr bool kSigned = true, kAffine = false;
  static constexpr int kW = word(sizeof(Block));
  static constexpr WordIndex kNibbles = nibble_index(word(offsetof(Block, qs)), kW + 1);
  static constexpr WordIndex kScales = field_index(0, kW, 0, kW);
  template <bool kTwo, bool kReadable64>
  static DecodedPair decode(const Block* w) {
    const __m512i raw = load_blocks<sizeof(Block), kTwo, kReadable64>(w);
    DecodedPair p;
    set_symmetric(nibble_levels(_mm512_permutexvar_epi16(kNibbles.get(), raw)), 8, &p);
    p.d = halves_low(_mm512_permutexvar_epi16(kScales.get(), raw));
    return p;
  }
};

struct Q4_1Format {
  using Block = BlockQ4_1;
  using Act = BlockQ8_1;
  static constexpr bool kSigned = false, kAffine = true;
  static constexpr int kW = word(sizeof(Block));
  static constexpr WordIndex kNibbles = nibble_index(word(offsetof(Block, qs)), kW + 2);
  static constexpr WordIndex kFields = field_index(0, kW, 1, kW + 1);  // d, then m
  template <bool kTwo, bool kReadable64>
  static DecodedPair decode(const Block* w) {
    const __m512i raw = load_blocks<sizeof(Block), kTwo, kReadable64>(w);
    DecodedPair p;
    p.u = nibble_levels(_mm512_permutexvar_epi16(kNibbles.get(), raw));
    p.neg = 0;
    const __m512i fields = _mm512_permutexvar_epi16(kFields.get(), raw);
    p.d = halves_low(fields);
    p.m8 = _mm512_mul_ps(halves_high(fields), _mm512_set1_ps(0.125f));
    return p;
  }
};

struct Q5_0Format {
  using Block = BlockQ5_0;
  using Act = BlockQ8_0;
  static constexpr bool kSigned = true, kAffine = false;
  static constexpr int kW = word(sizeof(Block));
  static constexpr WordIndex kNibbles = nibble_index(word(offsetof(Block, qs)), kW + 3);
  static constexpr WordIndex kScales = field_index(0, kW, 0, kW);
  template <bool kTwo, bool kReadable64>
  static DecodedPair decode(const Block* w) {
    const __m512i raw = load_blocks<sizeof(Block), kTwo, kReadable64>(w);
    const __m512i q = nibble_levels(_mm512_permutexvar_epi16(kNibbles.get(), raw));
    DecodedPair p;
    set_symmetric(add_fifth_bits<kTwo>(q, w[0].qh, sizeof(Block)), 16, &p);
    p.d = halves_low(_mm512_permutexvar_epi16(kScales.get(), raw));
    return p;
  }
};

struct Q5_1Format {
  using Block = BlockQ5_1;
  using Act = BlockQ8_1;
  static constexpr bool kSigned = false, kAffine = true;
  static constexpr int kW = word(sizeof(Block));
  static constexpr WordIndex kNibbles = nibble_index(word(offsetof(Block, qs)), kW + 4);
  static constexpr WordIndex kFields = field_index(0, kW, 1, kW + 1);  // d, then m
  template <bool kTwo, bool kReadable64>
  static DecodedPair decode(const Block* w) {
    const __m512i raw = load_blocks<sizeof(Block), kTwo, kReadable64>(w);
    const __m512i q = nibble_levels(_mm512_permutexvar_epi16(kNibbles.get(), raw));
    DecodedPair p;
    p.u = add_fifth_bits<kTwo>(q, w[0].qh, sizeof(Block));
    p.neg = 0;
    const __m512i fields = _mm512_permutexvar_epi16(kFields.get(), raw);
    p.d = halves_low(fields);
    p.m8 = _mm512_mul_ps(halves_high(fields), _mm512_set1_ps(0.125f));
    return p;
  }
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  using Act = BlockQ8_0;
  static constexpr bool kSigned = true, kAffine = false;
  static constexpr WordIndex kScales = field_index(0, word(sizeof(Block)), 0, 0);
  template <bool kTwo, bool kReadable64>
  static DecodedPair decode(const Block* w) {
    const __m512i q = load_quants<kTwo>(w[0].qs, sizeof(Block));
    DecodedPair p;
    p.u = _mm512_abs_epi8(q);  // -128 becomes 128, still right as an unsigned byte
    p.neg = _mm512_movepi8_mask(q);
    const __m512i raw = load_blocks<sizeof(Block), kTwo, kReadable64>(w);
    p.d = halves_low(_mm512_permutexvar_epi16(kScales.get(), raw));
    return p;
  }
};

// Activation scales of a pair: d (and Q8_1's s = d * sum of quants) as floats.
template <class Act>
struct ActScales {
  static constexpr int kW = word(sizeof(Act));
  static constexpr WordIndex kFields = field_index(0, kW, 1, kW + 1);  // d, then s (Q8_1)
};

// acc + the pair's contribution for one activation row (a: the pair's first block).
// Activation quants are in [-127, 127] (from_float), so negating them cannot overflow.
template <class F, bool kVnni, bool kTwo>
inline __m512 row_step(const DecodedPair& p, const typename F::Act* a, __m512 acc) {
  using Act = typename F::Act;
  __m512i q = load_quants<kTwo>(a->qs, sizeof(Act));
  if constexpr (F::kSigned) q = _mm512_mask_sub_epi8(q, p.neg, _mm512_setzero_si512(), q);
  const __m512i sum = dot_u8s8<kVnni>(_mm512_setzero_si512(), p.u, q);
  const __m512i fields =
      _mm512_permutexvar_epi16(ActScales<Act>::kFields.get(), load_blocks<sizeof(Act), kTwo>(a));
  const __m512 scale = _mm512_mul_ps(p.d, halves_low(fields));  // d_w * d_a, as the reference
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc);
  // Q8_1: sum_i (d q_i + m) a_i adds m * s, s = d_a * sum(a quants), from the block's s.
  if constexpr (F::kAffine) acc = _mm512_fmadd_ps(p.m8, halves_high(fields), acc);
  return acc;
}

// Accumulator chains per activation row: enough to hide the FMA latency in the single-row case.
// The same for every tile size, so each row's sum is formed in the same order whatever tile it
// falls in: vec_dot_rows gives bit-identical results to vec_dot (batch invariance).
constexpr int kChains = 2;

// out[r * out_stride] = dot(w, activation row r) for R rows starting at act.
// w: [nb] blocks of F::Block; act: R rows of [nb] F::Act blocks, act_stride bytes apart.
template <class F, bool kVnni, int R>
void dot_tile(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
              float* out, int64_t out_stride) {
  using Act = typename F::Act;
  const Act* a[R];
  __m512 acc[R][kChains];
  for (int r = 0; r < R; ++r) {
    a[r] = reinterpret_cast<const Act*>(act + size_t(r) * act_stride);
    for (int c = 0; c < kChains; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  // The main loop reads 64 bytes at each pair, so it stops where that would pass the row's end.
  constexpr int64_t kReadableBlocks =
      (64 + sizeof(typename F::Block) - 1) / sizeof(typename F::Block);
  int64_t b = 0;
  for (; b + 2 * (kChains - 1) + kReadableBlocks <= nb; b += 2 * kChains) {
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      prefetch_weights<2 * sizeof(typename F::Block)>(w + b + 2 * c);
      const DecodedPair p = F::template decode<true, true>(w + b + 2 * c);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r][c] = row_step<F, kVnni, true>(p, a[r] + b + 2 * c, acc[r][c]);
    }
  }
  for (; b + 2 <= nb; b += 2) {
    const DecodedPair p = F::template decode<true, false>(w + b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = row_step<F, kVnni, true>(p, a[r] + b, acc[r][0]);
  }
  if (b < nb) {  // an odd block count leaves one block
    const DecodedPair p = F::template decode<false, false>(w + b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = row_step<F, kVnni, false>(p, a[r] + b, acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 1; c < kChains; ++c) acc[r][0] = _mm512_add_ps(acc[r][0], acc[r][c]);
    out[r * out_stride] = hsum(acc[r][0]);
  }
}

// dot_tile as a type for block_dot_install.h.
struct Tile {
  template <class F, bool kVnni, int R>
  static void run(int64_t nb, const typename F::Block* w, const uint8_t* act, size_t act_stride,
                  float* out, int64_t out_stride) {
    dot_tile<F, kVnni, R>(nb, w, act, act_stride, out, out_stride);
  }
};

template <class F>
void install(TraitsTable& table, GgmlType type, bool vnni) {
  install_tiled<Tile, F, kBlock>(table, type, vnni);
}

}  // namespace

void register_q32_kernels(TraitsTable& table, Avx512Extensions ext) {
  install<Q4_0Format>(table, GgmlType::Q4_0, ext.vnni);
  install<Q4_1Format>(table, GgmlType::Q4_1, ext.vnni);
  install<Q5_0Format>(table, GgmlType::Q5_0, ext.vnni);
  install<Q5_1Format>(table, GgmlType::Q5_1, ext.vnni);
  install<Q8_0Format>(table, GgmlType::Q8_0, ext.vnni);
}

}  // namespace vela::kernels::avx512

// Quantizers of IQ4_NL, IQ4_XS and MXFP4 (quant/quantize_nonlinear4.h).
//
// Every block is first scaled to |x| <= 1 by its largest magnitude (so any finite input, however
// large or small, keeps the arithmetic in range; NaN counts as 0 and +-Inf as +-FLT_MAX) and
// given element weights w_i (see the header). The IQ4 fits minimise sum_i w_i (x_i - x'_i)^2.
//
//  * Scale of one 32-element IQ4 block, x ~= s * L[q] with L the 16 levels: for a given s the
//    best codes are the levels nearest to x / s, and with t = 1/s element i's code only changes
//    where t * x_i crosses the midpoint of two adjacent levels. Sweeping t over all crossings
//    in a window (the largest |x| landing between level kWindowLo and kWindowHi, which reaches
//    past both ends of the table, -127 and 113), for both signs of s, visits every assignment
//    nearest rounding can give there together with its least-squares s; the best is the exact
//    optimum over the window, which holds all of ggml's candidate scales. A few rounds of
//    nearest codes / least-squares refit then polish it (each round can only lower the error).
//  * IQ4_NL stores s as fp16; the codes are re-derived for the value the fp16 decodes to.
//  * IQ4_XS: each 32-element sub-block gets its s_j as above. The fp16 super-scale D and the
//    6-bit integers l_j (s_j ~= D l_j, l_j in [-32, 31]) are chosen by the error they actually
//    give: D from candidates that put the largest |s_j| on one of several integers near -32 or
//    +31, each l_j from the two integers around s_j / D with its codes re-derived for D l_j; then
//    D is refit by least squares over the whole super-block while the error falls.
//  * MXFP4: see mxfp4_exponent() and quantize_mxfp4_block().
#include "quant/quantize_nonlinear4.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/blocks_nonlinear4.h"
#include "util/half.h"

namespace vela {

namespace {

constexpr int kSub = 32;            // elements per IQ4_NL block / IQ4_XS sub-block / MXFP4 block
constexpr float kHalfMax = 65504;   // largest finite fp16
constexpr float kWindowLo = 60.0f;  // sweep window: the largest |x| maps to [lo, hi] level units
constexpr float kWindowHi = 150.0f;
constexpr uint8_t kCodeNearZero = 8;  // the code of level 1, the level nearest 0

// Midpoints between adjacent IQ4 levels: element codes change where t * x crosses one. All are
// multiples of 1/2.
constexpr std::array<float, 15> kIQ4Midpoints = [] {
  std::array<float, 15> m{};
  for (int j = 0; j < 15; ++j) m[size_t(j)] = 0.5f * float(kIQ4Levels[j] + kIQ4Levels[j + 1]);
  return m;
}();

// The code of the level nearest to v for v in [c / 2 - 128, c / 2 - 127.5): cells of half a
// level unit, so every midpoint is a cell edge and a cell lies wholly on one side of it. A value
// exactly on a midpoint falls in the cell above it and takes the upper level, as ggml's search.
constexpr std::array<uint8_t, 512> kIQ4NearestCode = [] {
  std::array<uint8_t, 512> table{};
  for (int c = 0; c < 512; ++c) {
    const float centre = 0.5f * (float(c) + 0.5f) - 128.0f;
    int best = 0;
    float best_dist = 1e9f;
    for (int j = 0; j < 16; ++j) {
      const float dist = centre > kIQ4Levels[j] ? centre - kIQ4Levels[j] : kIQ4Levels[j] - centre;
      if (dist < best_dist) {
        best_dist = dist;
        best = j;
      }
    }
    table[size_t(c)] = uint8_t(best);
  }
  return table;
}();

// Code of the IQ4 level nearest to v (clamped to the table's ends; +-Inf gives the end codes).
inline int nearest_iq4_code(float v) {
  float u = 2.0f * v + 256.0f;
  u = u > 0.0f ? u : 0.0f;  // also catches NaN
  u = u < 511.0f ? u : 511.0f;
  return kIQ4NearestCode[size_t(int(u))];
}

inline float iq4_level(int code) {
  return float(kIQ4Levels[code]);
}

// A block ready for fitting: finite values `orig`, the same divided by `amax` in `x` (so
// |x| <= 1), and weights `w` (all > 0). amax == 0 marks a block of zeros; `weighted` whether the
// weights came from an importance vector.
template <int N>
struct Prepared {
  float orig[N];
  float x[N];
  float w[N];
  float amax = 0;
  bool weighted = false;
};

template <int N>
void prepare(const float* src, const float* importance, Prepared<N>* b) {
  float amax = 0;
  for (int i = 0; i < N; ++i) {
    const float v = std::isnan(src[i]) ? 0.0f : std::clamp(src[i], -FLT_MAX, FLT_MAX);
    b->orig[i] = v;
    amax = std::max(amax, std::fabs(v));
  }
  b->amax = amax;
  if (amax == 0) {
    std::fill(b->x, b->x + N, 0.0f);
    std::fill(b->w, b->w + N, 1.0f);
    return;
  }
  float sum_sq = 0;
  for (int i = 0; i < N; ++i) {
    b->x[i] = b->orig[i] / amax;
    sum_sq += b->x[i] * b->x[i];
  }
  float imp_max = 0;
  if (importance != nullptr) {
    for (int i = 0; i < N; ++i) imp_max = std::fmax(imp_max, importance[i]);
  }
  b->weighted = imp_max > 0 && imp_max <= FLT_MAX;
  const float sigma2 = 2.0f * sum_sq / float(N);
  float sum_w = 0;
  for (int i = 0; i < N; ++i) {
    const float imp = b->weighted ? std::fmax(importance[i], 0.0f) / imp_max : 1.0f;
    b->w[i] = imp * std::sqrt(sigma2 + b->x[i] * b->x[i]);
    sum_w += b->w[i];
  }
  // A tiny floor keeps every fit determined where the importance vanishes (columns no
  // calibration input reached); it is far below any weight that matters.
  const float floor = sum_w / float(N) * 1e-6f + FLT_MIN;
  for (int i = 0; i < N; ++i) b->w[i] += floor;
}

// ---------------------------------------------------------------------------------------------
// IQ4 block scale.

// Codes of the levels nearest to x / s (the code of the level nearest 0 for s == 0) and their
// weighted error sum w (x - s L[q])^2. x, w, q: [kSub].
float iq4_codes(const float* x, const float* w, float s, uint8_t* q) {
  float err = 0;
  if (s == 0) {
    for (int i = 0; i < kSub; ++i) {
      q[i] = kCodeNearZero;
      err += w[i] * x[i] * x[i];
    }
    return err;
  }
  float inv = 1.0f / s;
  if (!(std::fabs(inv) <= FLT_MAX)) inv = std::copysign(FLT_MAX, s);  // s subnormal
  for (int i = 0; i < kSub; ++i) {
    const int code = nearest_iq4_code(x[i] * inv);
    q[i] = uint8_t(code);
    const float diff = x[i] - s * iq4_level(code);
    err += w[i] * diff * diff;
  }
  return err;
}

// Least-squares scale for fixed codes: sum w x L / sum w L^2 (the levels are never 0).
float iq4_refit(const float* x, const float* w, const uint8_t* q) {
  float sxl = 0, sll = 0;
  for (int i = 0; i < kSub; ++i) {
    const float l = iq4_level(q[i]);
    sxl += w[i] * x[i] * l;
    sll += w[i] * l * l;
  }
  return sll > 0 ? sxl / sll : 0.0f;
}

struct Crossing {
  float t;      // value of 1/s where one element moves to the next level
  float d_sxl;  // resulting change of sum w y L
  float d_sll;  // resulting change of sum w L^2
};

// The least-squares scale of the best nearest-level assignment over the sweep window (file
// comment), or 0 for a block whose values are all (nearly) 0. x, w: [kSub], |x| <= 1.
float iq4_sweep(const float* x, const float* w) {
  float amax = 0;
  for (int i = 0; i < kSub; ++i) amax = std::max(amax, std::fabs(x[i]));
  // Values this far below the block's (or super-block's) largest one quantize to 0 whatever the
  // scale; this also keeps the window's t finite.
  if (!(amax > 1e-20f)) return 0.0f;
  const float t_lo = kWindowLo / amax, t_hi = kWindowHi / amax;
  Crossing crossings[kSub * 15];
  float best_sxl = 0, best_sll = 1, best_t = 0, best_sign = 1;
  for (const float sign : {1.0f, -1.0f}) {
    // In this sweep y = sign * x and the codes are nearest(t * y) for t growing over the window.
    float sxl = 0, sll = 0;
    int count = 0;
    for (int i = 0; i < kSub; ++i) {
      const float y = sign * x[i];
      int code = nearest_iq4_code(t_lo * y);
      const int end = nearest_iq4_code(t_hi * y);
      sxl += w[i] * y * iq4_level(code);
      sll += w[i] * iq4_level(code) * iq4_level(code);
      // Moving away from 0: up the table for y > 0, down it for y < 0.
      for (; code < end; ++code) {
        const float from = iq4_level(code), to = iq4_level(code + 1);
        crossings[count++] = {kIQ4Midpoints[size_t(code)] / y, w[i] * y * (to - from),
                              w[i] * (to * to - from * from)};
      }
      for (; code > end; --code) {
        const float from = iq4_level(code), to = iq4_level(code - 1);
        crossings[count++] = {kIQ4Midpoints[size_t(code - 1)] / y, w[i] * y * (to - from),
                              w[i] * (to * to - from * from)};
      }
    }
    std::sort(crossings, crossings + count,
              [](const Crossing& a, const Crossing& b) { return a.t < b.t; });
    // sxl^2 / sll is the error the least-squares scale of a state removes.
    if (sxl * sxl * best_sll > best_sxl * best_sxl * sll) {
      best_sxl = sxl;
      best_sll = sll;
      best_t = t_lo;
      best_sign = sign;
    }
    for (int c = 0; c < count; ++c) {
      sxl += crossings[c].d_sxl;
      sll += crossings[c].d_sll;
      // Only the state after the last of several equal crossings exists.
      if (c + 1 < count && crossings[c + 1].t == crossings[c].t) continue;
      if (sxl * sxl * best_sll > best_sxl * best_sxl * sll) {
        best_sxl = sxl;
        best_sll = sll;
        best_t = c + 1 < count ? 0.5f * (crossings[c].t + crossings[c + 1].t) : t_hi;
        best_sign = sign;
      }
    }
  }
  if (!(best_t > 0)) return 0.0f;
  uint8_t q[kSub];
  for (int i = 0; i < kSub; ++i) q[i] = uint8_t(nearest_iq4_code(best_t * best_sign * x[i]));
  return iq4_refit(x, w, q);
}

// The best scale of one IQ4 block: the sweep's, polished by alternating nearest codes and
// least-squares refits while the error falls. x, w: [kSub].
float iq4_fit(const float* x, const float* w) {
  float s = iq4_sweep(x, w);
  if (s == 0) return 0.0f;
  uint8_t q[kSub];
  float err = iq4_codes(x, w, s, q);
  for (int round = 0; round < 3; ++round) {
    const float s2 = iq4_refit(x, w, q);
    uint8_t q2[kSub];
    const float err2 = iq4_codes(x, w, s2, q2);
    if (!(err2 < err)) break;
    s = s2;
    err = err2;
    std::memcpy(q, q2, sizeof(q));
  }
  return s;
}

// Packs 32 codes in Q4_0's order: byte j holds element j (low nibble) and j + 16 (high).
void pack_codes(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(q[j] | (q[j + 16] << 4));
}

// The fp16 encoding of a scale given for values divided by amax, saturating at the largest
// finite fp16.
uint16_t store_scale(float s, float amax) {
  return fp32_to_fp16(std::clamp(s * amax, -kHalfMax, kHalfMax));
}

// ---------------------------------------------------------------------------------------------
// IQ4_NL.

void quantize_iq4_nl_block(const float* src, const float* importance, BlockIQ4_NL* out) {
  Prepared<kQK4_NL> b;
  prepare(src, importance, &b);
  if (b.amax == 0) {
    out->d = 0;
    std::memset(out->qs, 0, sizeof(out->qs));
    return;
  }
  const float s = iq4_fit(b.x, b.w);
  out->d = store_scale(s, b.amax);
  const float d = fp16_to_fp32(out->d);
  uint8_t q[kQK4_NL];
  if (d == 0) {
    std::fill(q, q + kQK4_NL, kCodeNearZero);
  } else {
    const float inv = 1.0f / d;  // finite: |d| >= 2^-24
    for (int i = 0; i < kQK4_NL; ++i) q[i] = uint8_t(nearest_iq4_code(b.orig[i] * inv));
  }
  pack_codes(q, out->qs);
}

// ---------------------------------------------------------------------------------------------
// IQ4_XS.

// One choice of super-scale for an IQ4_XS super-block: the fp16 scale, the sub-block integers
// and codes, and the weighted error (of the normalised values).
struct XsChoice {
  uint16_t d = 0;
  int l[kIQ4XSSubBlocks] = {};
  uint8_t q[kQK4_XS];
  float err = FLT_MAX;
};

// Evaluates the super-scale `scale` (for the normalised values): rounds it to fp16, picks each
// sub-block's integer from the two around s_j / D by the error with re-derived codes.
void evaluate_xs_scale(const Prepared<kQK4_XS>& b, const float* sub_scale, float scale,
                       XsChoice* c) {
  c->d = store_scale(scale, b.amax);
  const float d = fp16_to_fp32(c->d) / b.amax;
  c->err = 0;
  for (int j = 0; j < kIQ4XSSubBlocks; ++j) {
    const float* x = b.x + kSub * j;
    const float* w = b.w + kSub * j;
    uint8_t* q = c->q + kSub * j;
    float r = d != 0 ? sub_scale[j] / d : 0.0f;
    r = r >= -32.0f ? r : -32.0f;  // also catches NaN
    r = r <= 31.0f ? r : 31.0f;
    const int lo = int(std::floor(r));
    const int hi = std::min(lo + 1, 31);
    c->l[j] = lo;
    float best = iq4_codes(x, w, d * float(lo), q);
    if (hi != lo) {
      uint8_t q2[kSub];
      const float err = iq4_codes(x, w, d * float(hi), q2);
      if (err < best) {
        best = err;
        c->l[j] = hi;
        std::memcpy(q, q2, sizeof(q2));
      }
    }
    c->err += best;
  }
}

void quantize_iq4_xs_block(const float* src, const float* importance, BlockIQ4_XS* out) {
  Prepared<kQK4_XS> b;
  prepare(src, importance, &b);
  float sub_scale[kIQ4XSSubBlocks];
  float max_scale = 0;
  if (b.amax > 0) {
    for (int j = 0; j < kIQ4XSSubBlocks; ++j) {
      sub_scale[j] = iq4_fit(b.x + kSub * j, b.w + kSub * j);
      if (std::fabs(sub_scale[j]) > std::fabs(max_scale)) max_scale = sub_scale[j];
    }
  }
  XsChoice best;
  if (max_scale == 0) {  // nothing to encode: zero scale, every sub-block integer 0
    best.d = 0;
    std::fill(best.q, best.q + kQK4_XS, kCodeNearZero);
  } else {
    // Candidates put the largest sub-block scale on -32, -31, -30, 30 or 31 (more, or fewer,
    // change the error by less than 0.1%).
    evaluate_xs_scale(b, sub_scale, max_scale / -32.0f, &best);
    XsChoice c;
    for (const int k : {-31, -30, 31, 30}) {
      evaluate_xs_scale(b, sub_scale, max_scale / float(k), &c);
      if (c.err < best.err) best = c;
    }
    // Least-squares refit of the super-scale for the chosen integers and codes.
    for (int round = 0; round < 3; ++round) {
      float sxa = 0, saa = 0;
      for (int i = 0; i < kQK4_XS; ++i) {
        const float a = float(best.l[i / kSub]) * iq4_level(best.q[i]);
        sxa += b.w[i] * b.x[i] * a;
        saa += b.w[i] * a * a;
      }
      if (!(saa > 0)) break;
      evaluate_xs_scale(b, sub_scale, sxa / saa, &c);
      if (!(c.err < best.err)) break;
      best = c;
    }
  }
  out->d = best.d;
  out->scales_h = 0;
  std::memset(out->scales_l, 0, sizeof(out->scales_l));
  for (int j = 0; j < kIQ4XSSubBlocks; ++j) {
    const int u = best.l[j] + 32;
    out->scales_l[j / 2] |= uint8_t((u & 0x0F) << (4 * (j % 2)));
    out->scales_h |= uint16_t((u >> 4) << (2 * j));
    pack_codes(best.q + kSub * j, out->qs + 16 * j);
  }
}

// ---------------------------------------------------------------------------------------------
// MXFP4.

// The e2m1 code nearest to x for the half-scale h (levels kMXFP4Levels, doubled e2m1): the
// magnitude is rounded to the nearest of 0, 1, 2, 3, 4, 6, 8, 12 with ties toward the smaller
// one, and beyond 12 to 12; negative values take codes 9..15, and those rounding to 0 the code
// of +0 (never -0). This is ggml's rounding exactly: its comparisons of |L h - x| are exact
// (adjacent levels are within a factor 2, so the subtractions are exact).
inline int mxfp4_code(float x, float h) {
  const float a = std::fabs(x) / h;
  const int m = int(a > 0.5f) + int(a > 1.5f) + int(a > 2.5f) + int(a > 3.5f) + int(a > 5.0f) +
                int(a > 7.0f) + int(a > 10.0f);
  return m | (x < 0 && m > 0 ? 8 : 0);
}

// The shared exponent as ggml chooses it: e = floor(log2(amax)) - 2 + 127, i.e. the scale
// 2^(e - 127) puts the block's largest magnitude in [4, 8) e2m1 units (values past 6, the
// largest e2m1 magnitude, round to 6). floor(log2) is taken exactly from the float's exponent
// (ggml's log2f can round up for values a hair below a power of two; elsewhere the two agree).
// Clamped to [0, 252]: amax below 2^-125 gets the smallest scale, and the largest finite float
// gets 252 (253 and above would decode the top codes to infinity).
int mxfp4_exponent(float amax) {
  if (!(amax > 0)) return 0;
  return std::clamp(std::ilogb(amax) - 2 + 127, 0, 252);
}

double mxfp4_error(const Prepared<kQKMXFP4>& b, int e) {
  const float h = e8m0_half_scale(uint8_t(e));
  double err = 0;
  for (int i = 0; i < kQKMXFP4; ++i) {
    const double diff =
        double(b.orig[i]) - double(h) * double(kMXFP4Levels[mxfp4_code(b.orig[i], h)]);
    err += double(b.w[i]) * diff * diff;
  }
  return err;
}

// Without an importance vector: ggml's exponent (mxfp4_exponent()) and rounding, so the same
// bytes. With one: the exponent among ggml's, one below (clips the largest values more, finer
// steps for the rest), two below, and one above (no clipping, coarser steps) with the lowest
// weighted error sum w (x - x')^2 (ggml's on ties); the e2m1 rounding stays nearest, which for a
// given scale is best whatever the weights.
void quantize_mxfp4_block(const float* src, const float* importance, BlockMXFP4* out) {
  Prepared<kQKMXFP4> b;
  prepare(src, importance, &b);
  int e = mxfp4_exponent(b.amax);
  if (b.weighted) {
    double best = mxfp4_error(b, e);
    const int base = e;
    for (const int delta : {-1, 1, -2}) {
      const int cand = std::clamp(base + delta, 0, 252);
      if (cand == base) continue;
      const double err = mxfp4_error(b, cand);
      if (err < best) {
        best = err;
        e = cand;
      }
    }
  }
  out->e = uint8_t(e);
  const float h = e8m0_half_scale(uint8_t(e));
  uint8_t q[kQKMXFP4];
  for (int i = 0; i < kQKMXFP4; ++i) q[i] = uint8_t(mxfp4_code(b.orig[i], h));
  pack_codes(q, out->qs);
}

}  // namespace

void quantize_row_iq4_nl_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQK4_NL == 0);
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t i = 0; i < n / kQK4_NL; ++i) {
    quantize_iq4_nl_block(src + i * kQK4_NL, importance ? importance + i * kQK4_NL : nullptr,
                          &blocks[i]);
  }
}

void quantize_row_iq4_xs_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQK4_XS == 0);
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t i = 0; i < n / kQK4_XS; ++i) {
    quantize_iq4_xs_block(src + i * kQK4_XS, importance ? importance + i * kQK4_XS : nullptr,
                          &blocks[i]);
  }
}

void quantize_row_mxfp4_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQKMXFP4 == 0);
  auto* blocks = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / kQKMXFP4; ++i) {
    quantize_mxfp4_block(src + i * kQKMXFP4, importance ? importance + i * kQKMXFP4 : nullptr,
                         &blocks[i]);
  }
}

void quantize_row_iq4_nl(const float* src, void* dst, int64_t n) {
  quantize_row_iq4_nl_weighted(src, dst, n, nullptr);
}

void quantize_row_iq4_xs(const float* src, void* dst, int64_t n) {
  quantize_row_iq4_xs_weighted(src, dst, n, nullptr);
}

void quantize_row_mxfp4(const float* src, void* dst, int64_t n) {
  quantize_row_mxfp4_weighted(src, dst, n, nullptr);
}

}  // namespace vela

// Quantizers of Q2_K, Q3_K, TQ1_0 and TQ2_0 (formats: quant/blocks_low_k.h).
//
// Every super-block is first scaled to |x| <= 1 (so any finite input, however large or small,
// keeps the arithmetic in range) and given element weights w_i = imp_i * sqrt(sigma^2 + x_i^2):
// the importance (mean squared activation of the element's input column; 1 without one) times a
// term that favours large weights without ignoring small ones (sigma^2: the block's mean square).
// The fits minimise sum_i w_i (x_i - x'_i)^2.
//
//  * Symmetric scales (Q3_K sub-blocks, the super-scales of Q2_K and Q3_K): for x ~= s * l with
//    integer l in [lo, hi], the nearest-level assignment only changes where some t x_i (t = 1/s)
//    crosses a half-integer. Sweeping t over those crossings, in both signs, visits every
//    assignment nearest rounding can produce in a window of t, so the least-squares scale of the
//    best one is the optimum over that window (exact_scale_fit()). Near-ties go to the smallest
//    scale, so values the format holds exactly get one canonical fit (and re-quantizing decoded
//    Q3_K and ternary rows gives them back unchanged).
//  * Q2_K's affine sub-blocks (x ~= s * l - m, l in [0, 3], m >= 0) try a spread of grids over
//    [min(x, 0), max(x)], refit (s, m) by least squares for each, and polish the best by
//    alternating nearest levels and refits.
//  * The 4/6-bit sub-block scales (and Q2_K mins) are then quantized against the fp16
//    super-scales: each sub-block picks, among the integers near its fit, those giving the
//    lowest error with its levels re-derived, and the super-scales are refit by least squares
//    over the whole super-block while that lowers the error.
//  * Ternary blocks (x ~= d * t, t in {-1, 0, 1}): for a given d the best trits zero exactly the
//    elements below d / 2, so the non-zero set is always a top-k by magnitude; the best k and its
//    d = sum w|x| / sum w are found by one pass over the sorted magnitudes (exact).
#include "quant/quantize_low_k.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/blocks_low_k.h"
#include "quant/rounding.h"
#include "util/half.h"

namespace vela {

namespace {

constexpr int kSub = 16;           // elements per Q2_K / Q3_K sub-block
constexpr float kHalfMax = 65504;  // largest finite fp16

// Nearest integer to v within [lo, hi] (NaN gives lo). Clamping first keeps the rounding trick in
// its valid range whatever v is.
inline int nearest_level(float v, int lo, int hi) {
  v = v >= float(lo) ? v : float(lo);  // also catches NaN
  v = v <= float(hi) ? v : float(hi);
  return quant_detail::round_nearest_even(v);
}

// A super-block prepared for fitting: values divided by `amax` (so |x| <= 1) and element weights
// (all > 0). amax == 0 marks a block of zeros.
struct SuperBlock {
  float x[kQK_K];
  float w[kQK_K];
  float amax = 0;
};

void prepare(const float* src, const float* importance, SuperBlock* b) {
  float amax = 0;
  for (int i = 0; i < kQK_K; ++i) {
    // Non-finite inputs are not meaningful weights; map them to the nearest finite value (NaN to
    // 0) so the block stays defined.
    const float v = std::isnan(src[i]) ? 0.0f : std::clamp(src[i], -FLT_MAX, FLT_MAX);
    b->x[i] = v;
    amax = std::max(amax, std::fabs(v));
  }
  b->amax = amax;
  if (amax == 0) {
    std::fill(b->w, b->w + kQK_K, 1.0f);
    return;
  }
  double sum_sq = 0;
  for (int i = 0; i < kQK_K; ++i) {
    b->x[i] /= amax;
    sum_sq += double(b->x[i]) * b->x[i];
  }
  const float sigma2 = float(sum_sq / kQK_K);
  float imp_max = 0;
  if (importance != nullptr) {
    for (int i = 0; i < kQK_K; ++i) imp_max = std::fmax(imp_max, importance[i]);
  }
  const bool use_importance = imp_max > 0 && imp_max <= FLT_MAX;
  double sum_w = 0;
  for (int i = 0; i < kQK_K; ++i) {
    const float imp = use_importance ? std::fmax(importance[i], 0.0f) / imp_max : 1.0f;
    b->w[i] = imp * std::sqrt(sigma2 + b->x[i] * b->x[i]);
    sum_w += b->w[i];
  }
  // A tiny floor keeps every sub-block's fit determined where the importance is zero (columns no
  // calibration input ever reached); it is far below any weight that matters.
  const float floor = float(sum_w / kQK_K) * 1e-6f + FLT_MIN;
  for (int i = 0; i < kQK_K; ++i) b->w[i] += floor;
}

// The real-valued super-scale `s` (for values divided by amax) stored as fp16, and the
// normalised value it decodes to. Out-of-range scales saturate at the largest finite fp16.
uint16_t store_scale(float s, float amax, float* decoded) {
  const float real = std::clamp(s * amax, -kHalfMax, kHalfMax);
  const uint16_t h = fp32_to_fp16(real);
  *decoded = fp16_to_fp32(h) / amax;
  return h;
}

// ---------------------------------------------------------------------------------------------
// Exact symmetric scale fit.

struct Crossing {
  float t;      // value of 1/scale where one element moves one level further from 0
  float d_sxl;  // resulting change of sum w x l (in the sweep's sign convention)
  float d_sll;  // resulting change of sum w l^2
};

// Upper bound on the crossings of one sweep: n values times the longest level run.
constexpr int kMaxCrossings = kSub * 32;

// Best x ~= scale * l, l integer in [lo, hi] (lo <= 0 < hi), minimising sum w (x - scale l)^2
// over the scales whose reciprocal t puts the largest |x| within `below` levels under and `above`
// levels over the extreme level it can take (all scales: below >= max(hi, -lo), above large).
// n <= 16 and max(hi, -lo) <= 32. Writes the levels; returns the scale (0 for an all-zero x).
float exact_scale_fit(const float* x, const float* w, int n, int lo, int hi, float below,
                      float above, int8_t* levels) {
  assert(n <= kSub && hi <= 32 && -lo <= 32);
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  std::memset(levels, 0, size_t(n));
  if (!(amax > 0)) return 0.0f;
  Crossing crossings[kMaxCrossings];
  // Every reachable level assignment, as the error its least-squares scale removes (merit =
  // sxl^2 / sll), that scale's magnitude, and a t inside its interval.
  struct State {
    float merit, magnitude, t, sign;
  };
  State states[2 * (kMaxCrossings + 1)];
  int n_states = 0;
  for (const float sign : {1.0f, -1.0f}) {
    // In this sweep l_i = round(t * sign * x_i) for t growing over the window: element i moves
    // from level k - 1 to k (away from 0) when t passes (k - 1/2) / |x_i|, up to hi for positive
    // sign * x_i and -lo for negative.
    const float top = sign * max > 0 ? float(hi) : float(-lo);
    const float t_lo = std::max(0.0f, top - below) / amax;
    const float t_hi = (top + above) / amax;
    float sxl = 0, sll = 0;
    int count = 0;
    for (int i = 0; i < n; ++i) {
      const float y = sign * x[i];
      const float ay = std::fabs(y);
      if (!(ay > 0)) continue;
      const int steps = y > 0 ? hi : -lo;
      const int start = std::abs(nearest_level(t_lo * y, lo, hi));  // level at the window's start
      sxl += w[i] * ay * float(start);
      sll += w[i] * float(start * start);
      for (int k = start + 1; k <= steps; ++k) {
        const float t = (float(k) - 0.5f) / ay;
        if (t > t_hi) break;
        crossings[count++] = {t, w[i] * ay, w[i] * float(2 * k - 1)};
      }
    }
    std::sort(crossings, crossings + count,
              [](const Crossing& a, const Crossing& b) { return a.t < b.t; });
    if (sll > 0) {
      states[n_states++] = {sxl * sxl / sll, sxl / sll,
                            count > 0 ? 0.5f * (t_lo + crossings[0].t) : t_lo, sign};
    }
    for (int c = 0; c < count; ++c) {
      sxl += crossings[c].d_sxl;
      sll += crossings[c].d_sll;
      // Only the state after the last of several equal crossings is reachable.
      if (c + 1 < count && crossings[c + 1].t == crossings[c].t) continue;
      const float t = c + 1 < count ? 0.5f * (crossings[c].t + crossings[c + 1].t)
                                    : std::max(crossings[c].t, 0.5f * (crossings[c].t + t_hi));
      states[n_states++] = {sxl * sxl / sll, sxl / sll, t, sign};
    }
  }
  // The best merit; among states within rounding of it (values the format holds exactly often
  // have several exact fits), the smallest scale, so that equal inputs get one canonical fit.
  float best_merit = 0;
  for (int k = 0; k < n_states; ++k) best_merit = std::max(best_merit, states[k].merit);
  float best_t = 0, best_sign = 1, best_magnitude = FLT_MAX;
  for (int k = 0; k < n_states; ++k) {
    if (states[k].merit >= best_merit * (1 - 1e-6f) && states[k].magnitude < best_magnitude) {
      best_magnitude = states[k].magnitude;
      best_t = states[k].t;
      best_sign = states[k].sign;
    }
  }
  float sxl = 0, sll = 0;
  for (int i = 0; i < n; ++i) {
    const int l = best_t > 0 ? nearest_level(best_t * best_sign * x[i], lo, hi) : 0;
    levels[i] = int8_t(l);
    sxl += w[i] * x[i] * float(l);
    sll += w[i] * float(l * l);
  }
  return sll > 0 ? sxl / sll : 0.0f;
}

// ---------------------------------------------------------------------------------------------
// Q2_K.

// One affine sub-block fit: x ~= scale * l - offset, l in [0, 3], scale >= 0, offset >= 0.
struct AffineFit {
  float scale = 0;
  float offset = 0;
  float err = 0;
};

float affine_error(const float* x, const float* w, const uint8_t* l, float scale, float offset) {
  float err = 0;
  for (int i = 0; i < kSub; ++i) {
    const float diff = scale * float(l[i]) - offset - x[i];
    err += w[i] * diff * diff;
  }
  return err;
}

void nearest_affine_levels(const float* x, float scale, float offset, uint8_t* l) {
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (int i = 0; i < kSub; ++i) l[i] = uint8_t(nearest_level((x[i] + offset) * inv, 0, 3));
}

// Weighted least-squares (scale, offset) for fixed levels with offset >= 0 and scale > 0.
// Returns false where the levels determine no such fit.
bool refit_affine(const float* x, const float* w, const uint8_t* l, float* scale, float* offset) {
  float sw = 0, sl = 0, sll = 0, sx = 0, sxl = 0;
  for (int i = 0; i < kSub; ++i) {
    const float li = float(l[i]);
    sw += w[i];
    sl += w[i] * li;
    sll += w[i] * li * li;
    sx += w[i] * x[i];
    sxl += w[i] * x[i] * li;
  }
  if (!(sll > 0)) return false;
  const float det = sw * sll - sl * sl;
  float s = 0, base = 0;  // x ~= s * l + base
  if (det > 0) {
    s = (sw * sxl - sx * sl) / det;
    base = (sll * sx - sl * sxl) / det;
  }
  if (!(det > 0) || base > 0) {  // a positive base is not representable: scale alone
    base = 0;
    s = sxl / sll;
  }
  if (!(s > 0)) return false;
  *scale = s;
  *offset = -base;
  return true;
}

AffineFit fit_affine_subblock(const float* x, const float* w) {
  float lo = 0, hi = x[0];
  for (int i = 0; i < kSub; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  AffineFit best;
  best.offset = -lo;
  uint8_t l[kSub], best_l[kSub];
  std::memset(best_l, 0, sizeof(best_l));
  best.err = affine_error(x, w, best_l, 0, best.offset);
  if (!(hi > lo)) return best;
  // Errors this close count as equal (values the format holds exactly have several exact fits);
  // among them the smallest scale wins, so that equal inputs get one canonical fit.
  float energy = 0;
  for (int i = 0; i < kSub; ++i) energy += w[i] * x[i] * x[i];
  const float tie = 1e-6f * energy;
  // Grids of 3 + delta steps over [lo, hi]: a shorter or longer grid often fits the bulk better.
  for (int step = 0; step <= 36; ++step) {
    const float inv = (2.1f + 0.05f * float(step)) / (hi - lo);
    for (int i = 0; i < kSub; ++i) l[i] = uint8_t(nearest_level((x[i] - lo) * inv, 0, 3));
    float scale, offset;
    if (!refit_affine(x, w, l, &scale, &offset)) continue;
    const float err = affine_error(x, w, l, scale, offset);
    if (err < best.err - tie || (err <= best.err + tie && scale < best.scale)) {
      best = {scale, offset, err};
      std::memcpy(best_l, l, sizeof(l));
    }
  }
  // Polish: nearest levels for the fit, refit, while the error falls.
  for (int iter = 0; iter < 4 && best.scale > 0; ++iter) {
    nearest_affine_levels(x, best.scale, best.offset, l);
    if (std::memcmp(l, best_l, sizeof(l)) == 0) break;
    float scale, offset;
    if (!refit_affine(x, w, l, &scale, &offset)) break;
    const float err = affine_error(x, w, l, scale, offset);
    if (!(err < best.err)) break;
    best = {scale, offset, err};
    std::memcpy(best_l, l, sizeof(l));
  }
  return best;
}

// Integer scale sc and min m of one sub-block for the super-scales d and dmin, chosen near the
// fit's values by actual error. Writes levels; returns the error.
float choose_q2_sub(const float* x, const float* w, float d, float dmin, float scale, float offset,
                    int* sc_out, int* m_out, uint8_t* levels) {
  const int sc0 = d > 0 ? nearest_level(scale / d, 0, 15) : 0;
  const int m0 = dmin > 0 ? nearest_level(offset / dmin, 0, 15) : 0;
  float best_err = FLT_MAX;
  uint8_t l[kSub];
  for (int sc = std::max(0, sc0 - 1); sc <= std::min(15, sc0 + 1); ++sc) {
    if (sc > 0 && !(d > 0)) break;
    for (int m = std::max(0, m0 - 1); m <= std::min(15, m0 + 1); ++m) {
      if (m > 0 && !(dmin > 0)) break;
      const float s = d * float(sc), o = dmin * float(m);
      nearest_affine_levels(x, s, o, l);
      const float err = affine_error(x, w, l, s, o);
      if (err < best_err) {
        best_err = err;
        *sc_out = sc;
        *m_out = m;
        std::memcpy(levels, l, sizeof(l));
      }
    }
  }
  return best_err;
}

// Places the 2-bit field of element e of a Q2_K / Q3_K / TQ2_0 super-block (see
// blocks_low_k.h). qs must start zeroed.
inline void put_two_bits(uint8_t* qs, int e, int v) {
  qs[32 * (e / 128) + e % 32] |= uint8_t((v & 3) << (2 * (e / 32 % 4)));
}

// A Q2_K encoding of a prepared super-block: fp16 super-scales, sub-block integers, levels, and
// its weighted error.
struct Q2Choice {
  uint16_t d = 0, dmin = 0;
  int sc[kLowKSubBlocks] = {}, m[kLowKSubBlocks] = {};
  uint8_t levels[kQK_K] = {};
  float err = FLT_MAX;
};

// Stores d and dmin (normalised) as fp16 and picks each sub-block's integers (choose_q2_sub()).
void q2_assign(const SuperBlock& b, const float* scale, const float* offset, float d, float dmin,
               Q2Choice* c) {
  float d_eff, dmin_eff;
  c->d = store_scale(std::max(d, 0.0f), b.amax, &d_eff);
  c->dmin = store_scale(std::max(dmin, 0.0f), b.amax, &dmin_eff);
  c->err = 0;
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    c->err += choose_q2_sub(b.x + kSub * j, b.w + kSub * j, d_eff, dmin_eff, scale[j], offset[j],
                            &c->sc[j], &c->m[j], c->levels + kSub * j);
  }
}

void quantize_q2_k_block(const float* src, const float* importance, BlockQ2_K* out) {
  SuperBlock b;
  prepare(src, importance, &b);
  std::memset(out, 0, sizeof(*out));
  if (b.amax == 0) return;

  float scale[kLowKSubBlocks], offset[kLowKSubBlocks];
  float scale_w[kLowKSubBlocks], offset_w[kLowKSubBlocks];
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    const float* x = b.x + kSub * j;
    const float* w = b.w + kSub * j;
    const AffineFit fit = fit_affine_subblock(x, w);
    scale[j] = fit.scale;
    offset[j] = fit.offset;
    // Sensitivity of the error to this sub-block's scale and offset: sum w l^2 and sum w.
    uint8_t l[kSub];
    nearest_affine_levels(x, fit.scale, fit.offset, l);
    scale_w[j] = offset_w[j] = 0;
    for (int i = 0; i < kSub; ++i) {
      scale_w[j] += w[i] * float(l[i] * l[i]);
      offset_w[j] += w[i];
    }
    if (!(scale_w[j] > 0)) scale_w[j] = offset_w[j];
  }
  int8_t sc_fit[kLowKSubBlocks], m_fit[kLowKSubBlocks];
  const float d_fit = exact_scale_fit(scale, scale_w, kLowKSubBlocks, 0, 15, 15, 1, sc_fit);
  const float dmin_fit = exact_scale_fit(offset, offset_w, kLowKSubBlocks, 0, 15, 15, 1, m_fit);

  // Start from the fitted super-scales, then refit (d, dmin) by least squares while the error
  // falls.
  Q2Choice best, trial;
  q2_assign(b, scale, offset, d_fit, dmin_fit, &best);
  for (int round = 0; round < 2; ++round) {
    // x ~= d a - dmin c with a = sc l, c = m.
    double saa = 0, sac = 0, scc = 0, sxa = 0, sxc = 0;
    for (int e = 0; e < kQK_K; ++e) {
      const double a = double(best.sc[e / kSub] * best.levels[e]), c = double(best.m[e / kSub]);
      const double we = b.w[e], xe = b.x[e];
      saa += we * a * a;
      sac += we * a * c;
      scc += we * c * c;
      sxa += we * xe * a;
      sxc += we * xe * c;
    }
    if (!(saa > 0)) break;
    const double det = saa * scc - sac * sac;
    double new_d = sxa / saa, new_dmin = 0;
    if (scc > 0 && det > 0) {
      new_d = (sxa * scc - sxc * sac) / det;
      new_dmin = -(saa * sxc - sac * sxa) / det;
      if (new_dmin < 0) {
        new_dmin = 0;
        new_d = sxa / saa;
      }
    }
    q2_assign(b, scale, offset, float(new_d), float(new_dmin), &trial);
    if (!(trial.err < best.err)) break;
    best = trial;
  }
  out->d = best.d;
  out->dmin = best.dmin;
  for (int j = 0; j < kLowKSubBlocks; ++j) out->scales[j] = uint8_t(best.sc[j] | (best.m[j] << 4));
  for (int e = 0; e < kQK_K; ++e) put_two_bits(out->qs, e, best.levels[e]);
}

// ---------------------------------------------------------------------------------------------
// Q3_K.

// Error of one sub-block at scale s with nearest levels in [-4, 3]; writes the levels.
float symmetric_sub_error(const float* x, const float* w, float s, int8_t* levels) {
  float err = 0;
  const float inv = s != 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < kSub; ++i) {
    const int l = s != 0 ? nearest_level(x[i] * inv, -4, 3) : 0;
    levels[i] = int8_t(l);
    const float diff = x[i] - s * float(l);
    err += w[i] * diff * diff;
  }
  return err;
}

// A Q3_K encoding of a prepared super-block: fp16 super-scale, sub-block integers, levels, and
// its weighted error.
struct Q3Choice {
  uint16_t d = 0;
  int s[kLowKSubBlocks] = {};
  int8_t levels[kQK_K] = {};
  float err = FLT_MAX;
};

// Stores d (normalised) as fp16 and picks each sub-block's integer scale near its fit `scale[j]`
// (or its negation: the same magnitude with negated levels) by actual error.
void q3_assign(const SuperBlock& b, const float* scale, float d, Q3Choice* c) {
  float d_eff = 0;
  c->d = store_scale(d, b.amax, &d_eff);
  c->err = 0;
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    const float* x = b.x + kSub * j;
    const float* w = b.w + kSub * j;
    const int s0 = d_eff != 0 ? nearest_level(scale[j] / d_eff, -32, 31) : 0;
    int cands[8], n_cands = 0;
    for (int k = s0 - 2; k <= s0 + 2; ++k) cands[n_cands++] = k;
    for (int k = -s0 - 1; k <= -s0 + 1; ++k) cands[n_cands++] = k;
    float sub_best = FLT_MAX;
    int8_t l[kSub];
    for (int k = 0; k < n_cands; ++k) {
      if (cands[k] < -32 || cands[k] > 31) continue;
      const float sub_err = symmetric_sub_error(x, w, d_eff * float(cands[k]), l);
      if (sub_err < sub_best) {
        sub_best = sub_err;
        c->s[j] = cands[k];
        std::memcpy(c->levels + kSub * j, l, sizeof(l));
      }
    }
    c->err += sub_best;
  }
}

void quantize_q3_k_block(const float* src, const float* importance, BlockQ3_K* out) {
  SuperBlock b;
  prepare(src, importance, &b);
  std::memset(out, 0, sizeof(*out));
  if (b.amax == 0) return;

  float scale[kLowKSubBlocks], scale_w[kLowKSubBlocks];
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    const float* x = b.x + kSub * j;
    const float* w = b.w + kSub * j;
    int8_t l[kSub];
    scale[j] = exact_scale_fit(x, w, kSub, -4, 3, 4, 3, l);
    scale_w[j] = 0;
    for (int i = 0; i < kSub; ++i) scale_w[j] += w[i] * float(l[i] * l[i]);
    if (!(scale_w[j] > 0)) scale_w[j] = w[0];
  }
  // A sub-block's scale may change sign with its levels (unless a level sits at -4), so the
  // super-scale is fitted to the magnitudes; its sign lets the largest one take the extra -32.
  float magnitude[kLowKSubBlocks], largest = 0;
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    magnitude[j] = std::fabs(scale[j]);
    if (magnitude[j] > std::fabs(largest)) largest = scale[j];
  }
  int8_t s_fit[kLowKSubBlocks];
  const float d_fit = exact_scale_fit(magnitude, scale_w, kLowKSubBlocks, 0, 32, 32, 1, s_fit);
  // The sign of d decides which sub-blocks can use -32; try both (the one favouring the largest
  // sub-block scale first), then refine d by least squares while the error falls.
  Q3Choice best, trial;
  q3_assign(b, scale, largest > 0 ? -d_fit : d_fit, &best);
  q3_assign(b, scale, largest > 0 ? d_fit : -d_fit, &trial);
  if (trial.err < best.err) best = trial;
  for (int round = 0; round < 2; ++round) {
    double saa = 0, sxa = 0;  // x ~= d a, a = s l
    for (int e = 0; e < kQK_K; ++e) {
      const double a = double(best.s[e / kSub] * best.levels[e]);
      saa += b.w[e] * a * a;
      sxa += b.w[e] * b.x[e] * a;
    }
    if (!(saa > 0)) break;
    q3_assign(b, scale, float(sxa / saa), &trial);
    if (!(trial.err < best.err)) break;
    best = trial;
  }
  out->d = best.d;
  for (int j = 0; j < kLowKSubBlocks; ++j) {
    const int u = best.s[j] + 32;  // 6-bit field
    out->scales[j % 8] |= uint8_t((u & 0x0F) << (4 * (j / 8)));
    out->scales[8 + j % 4] |= uint8_t((u >> 4) << (2 * (j / 4)));
  }
  for (int e = 0; e < kQK_K; ++e) {
    const int q = best.levels[e] + 4;
    put_two_bits(out->qs, e, q);
    out->hmask[e % 32] |= uint8_t((q >> 2) << (e / 32));
  }
}

// ---------------------------------------------------------------------------------------------
// Ternary.

// Trits (0, 1, 2 for -1, 0, +1) of one super-block and its fp16 scale.
uint16_t ternary_block(const float* src, const float* importance, uint8_t* trits) {
  SuperBlock b;
  prepare(src, importance, &b);
  std::fill(trits, trits + kQK_K, uint8_t(1));
  if (b.amax == 0) return 0;
  uint16_t order[kQK_K];
  for (int i = 0; i < kQK_K; ++i) order[i] = uint16_t(i);
  std::sort(order, order + kQK_K,
            [&](uint16_t a, uint16_t c) { return std::fabs(b.x[a]) > std::fabs(b.x[c]); });
  // Making the top k magnitudes +-d with d = S1 / S0 (S1 = sum w|x|, S0 = sum w over them)
  // removes S1^2 / S0 from the error sum w x^2.
  double s1 = 0, s0 = 0, best_merit = -1, best_d = 0;
  for (int k = 0; k < kQK_K; ++k) {
    const int i = order[k];
    s1 += double(b.w[i]) * std::fabs(b.x[i]);
    s0 += b.w[i];
    const double merit = s1 * s1 / s0;
    if (merit > best_merit) {
      best_merit = merit;
      best_d = s1 / s0;
    }
  }
  float d;
  const uint16_t h = store_scale(float(best_d), b.amax, &d);
  for (int i = 0; i < kQK_K; ++i) {
    // For a fixed d the nearest trit is best whatever the weights.
    if (std::fabs(b.x[i]) > 0.5f * d) trits[i] = b.x[i] > 0 ? 2 : 0;
  }
  return h;
}

// Byte holding trits t[0..count) (count 5, or 4 with an implicit trailing 0) as the base-3
// fraction 0.t0 t1 t2 t3 t4 scaled to 256 and rounded up (see tq1_trit()).
inline uint8_t pack_trits(const uint8_t* t, int stride, int count) {
  int v = 0;
  for (int n = 0; n < 5; ++n) v = 3 * v + (n < count ? t[n * stride] : 0);
  return uint8_t((v * 256 + 242) / 243);
}

}  // namespace

void quantize_row_q2_k_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    quantize_q2_k_block(src + kQK_K * i, importance ? importance + kQK_K * i : nullptr, &blocks[i]);
  }
}

void quantize_row_q3_k_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    quantize_q3_k_block(src + kQK_K * i, importance ? importance + kQK_K * i : nullptr, &blocks[i]);
  }
}

void quantize_row_tq1_0_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockTQ1_0*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t t[kQK_K];
    BlockTQ1_0& blk = blocks[i];
    blk.d = ternary_block(src + kQK_K * i, importance ? importance + kQK_K * i : nullptr, t);
    // Element order (blocks_low_k.h): qs[m] trit n is element 32 n + m (m < 32); qs[32 + m]
    // trit n is element 160 + 16 n + m (m < 16); qh[j] trit n is element 240 + 4 n + j.
    for (int m = 0; m < 32; ++m) blk.qs[m] = pack_trits(t + m, 32, 5);
    for (int m = 0; m < 16; ++m) blk.qs[32 + m] = pack_trits(t + 160 + m, 16, 5);
    for (int j = 0; j < kTq1TailBytes; ++j) blk.qh[j] = pack_trits(t + 240 + j, 4, 4);
  }
}

void quantize_row_tq2_0_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<BlockTQ2_0*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t t[kQK_K];
    BlockTQ2_0& blk = blocks[i];
    blk.d = ternary_block(src + kQK_K * i, importance ? importance + kQK_K * i : nullptr, t);
    std::memset(blk.qs, 0, sizeof(blk.qs));
    for (int e = 0; e < kQK_K; ++e) put_two_bits(blk.qs, e, t[e]);
  }
}

void quantize_row_q2_k(const float* src, void* dst, int64_t n) {
  quantize_row_q2_k_weighted(src, dst, n, nullptr);
}
void quantize_row_q3_k(const float* src, void* dst, int64_t n) {
  quantize_row_q3_k_weighted(src, dst, n, nullptr);
}
void quantize_row_tq1_0(const float* src, void* dst, int64_t n) {
  quantize_row_tq1_0_weighted(src, dst, n, nullptr);
}
void quantize_row_tq2_0(const float* src, void* dst, int64_t n) {
  quantize_row_tq2_0_weighted(src, dst, n, nullptr);
}

}  // namespace vela

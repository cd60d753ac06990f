// Quantizers of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (formats: quant/blocks_iq23.h).
//
// An element decodes to D * ls * m * sign: D = d * f (d the fp16 super-scale, f the type's fixed
// factor), ls = 2 s + 1 the odd 4-bit multiplier of its scale unit (32 elements, or 16 for IQ2_XS
// and IQ2_S), m its magnitude in its group's codebook entry (one 8-element entry per group of 8 for
// IQ2, two 4-element entries for IQ3), sign from its group's sign bits. IQ2_XXS, IQ2_XS and
// IQ3_XXS store 7 sign bits per group, so a group has an even number of negative elements.
// Every super-block is scaled to |x| <= 1 first (so any finite input stays in range) and given
// element weights w_i; the fit minimises sum_i w_i (x_i - x'_i)^2 in three steps.
//
//  1. Group fit at a given scale S (the unit's D * ls): each element keeps its own sign, and each
//     entry is the exact cheapest one of the codebook (iq23_grid_search.h). Where 7 sign bits
//     force an even count of negatives and the group's count is odd, one element must take the
//     wrong sign; every candidate element is tried exactly, cheapest first, until the lower bound
//     "unconstrained cost + that element's least penalty" cannot win.
//  2. Each unit's own best scale: the group fit at a range of trial scales around
//     max|x| / m_max and at those putting max|x| on each lower level, each followed by the
//     least-squares scale of the entries it chose, then polished by alternating fit and least
//     squares. Its curvature A = sum w q^2 (q = sign * m) models how the unit's error grows away
//     from that scale.
//  3. The super-scale. A candidate D costs about sum_b A_b (D ls_b - S_b)^2, ls_b the odd
//     multiplier nearest S_b / D; the model is scanned over D = S_max / k, k in [4, 40], and its
//     two best local minima are encoded for real: D rounded to fp16 as stored, each unit trying
//     the two odd multipliers nearest its scale with a full group fit. The best encoding's D is
//     then refit by least squares over the whole super-block and re-encoded, kept if better.
#include "quant/quantize_iq23.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/blocks_iq23.h"
#include "quant/iq23_grid_search.h"
#include "util/half.h"

namespace vela {

namespace {

using iq23_detail::Codebook;
using iq23_detail::Grid;
using iq23_detail::kMaxLevels;

constexpr int kGroup = 8;                // elements sharing sign bits
constexpr int kGroups = kQK_K / kGroup;  // groups per super-block
constexpr int kMaxUnits = 16;            // most scale units per super-block
constexpr float kHalfMax = 65504;        // largest finite fp16
constexpr int kMaxMultiplier = 15;       // 4-bit s; ls = 2 s + 1

// How a type codes its values.
struct Spec {
  Grid grid;
  int unit;           // elements per 4-bit scale: 32, or 16 (IQ2_XS, IQ2_S)
  bool parity;        // 7 stored sign bits per group: an even number of negatives
  float f;            // the decoder's fixed factor: 1/8 (IQ2), 1/4 (IQ3_XXS), 1 (IQ3_S)
  float sigma_scale;  // c in w = importance * sqrt(c sigma^2 + x^2)
  int n_units() const { return kQK_K / unit; }
  int groups_per_unit() const { return unit / kGroup; }
};
constexpr Spec kSpecIq2Xxs{Grid::kIq2Xxs, 32, true, 0.125f, 1.0f};
constexpr Spec kSpecIq2Xs{Grid::kIq2Xs, 16, true, 0.125f, 1.0f};
constexpr Spec kSpecIq2S{Grid::kIq2S, 16, false, 0.125f, 2.0f};
constexpr Spec kSpecIq3Xxs{Grid::kIq3Xxs, 32, true, 0.25f, 2.0f};
constexpr Spec kSpecIq3S{Grid::kIq3S, 32, false, 1.0f, 2.0f};

// A super-block prepared for fitting: values divided by `amax` (so |x| <= 1) and element weights
// (all > 0). amax == 0 marks a block of zeros.
struct SuperBlock {
  float x[kQK_K];
  float w[kQK_K];
  float amax = 0;
};

// limit: the largest magnitude the type decodes. Larger inputs (infinities included) are clamped
// to it, and NaN to 0, so that the block stays defined and the fit never asks for a super-scale
// beyond fp16's range.
void prepare(const float* src, const float* importance, float sigma_scale, float limit,
             SuperBlock* b) {
  float amax = 0;
  for (int i = 0; i < kQK_K; ++i) {
    const float v = std::isnan(src[i]) ? 0.0f : std::clamp(src[i], -limit, limit);
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
  const float sigma2 = float(sigma_scale * sum_sq / kQK_K);
  float imp_max = 0;
  if (importance != nullptr) {
    for (int i = 0; i < kQK_K; ++i) imp_max = std::fmax(imp_max, importance[i]);
  }
  const bool use_importance = imp_max > 0 && imp_max <= FLT_MAX;
  double sum_w = 0;
  for (int i = 0; i < kQK_K; ++i) {
    // fmax also maps a NaN importance to 0.
    const float imp = use_importance ? std::fmax(importance[i], 0.0f) / imp_max : 1.0f;
    b->w[i] = imp * std::sqrt(sigma2 + b->x[i] * b->x[i]);
    sum_w += b->w[i];
  }
  // A tiny floor keeps every fit determined where the importance is zero (columns no calibration
  // input reached); it is far below any weight that matters.
  const float floor = float(sum_w / kQK_K) * 1e-6f + FLT_MIN;
  for (int i = 0; i < kQK_K; ++i) b->w[i] += floor;
}

// One group's code: its entry (IQ2) or entries (IQ3, elements 0-3 then 4-7), and its 8 sign bits
// (bit j set = element j negative).
struct GroupCode {
  uint16_t entry[2] = {0, 0};
  uint8_t signs = 0;
};

// Least-squares sums of a fit: sum w x q and sum w q^2 (q = sign * m, at unit scale).
struct Sums {
  double xq = 0, qq = 0;
};

// The cheapest entry for `len` elements of magnitudes a[] and weights w[] at scale `scale`:
// writes it to *entry and returns its cost. Element `flipped` (or none, if -1) takes the sign
// opposite to its value, so its cost is w (a + scale m)^2. bound[v]: scale times the midpoint of
// levels v and v + 1.
float search_part(const Codebook& book, const float* a, const float* w, int flipped, float scale,
                  const float* bound, int* entry) {
  const int len = book.len();
  const int n_levels = book.levels();
  // The element-wise cheapest point first: the answer whenever it is an entry.
  int level[iq23_detail::kMaxLen];
  float sum = 0;
  for (int j = 0; j < len; ++j) {
    int l = 0;
    if (j != flipped) {
      for (int v = 0; v < n_levels - 1; ++v) l += a[j] > bound[v];
    }
    level[j] = l;
    const float r =
        j == flipped ? a[j] + scale * book.magnitude(0) : a[j] - scale * book.magnitude(l);
    sum += w[j] * r * r;
  }
  if (const int e = book.entry_at(level); e >= 0) {
    *entry = e;
    return sum;
  }
  float cost[iq23_detail::kMaxLen][kMaxLevels];
  for (int j = 0; j < len; ++j) {
    const float sign = j == flipped ? 1.0f : -1.0f;
    for (int v = 0; v < n_levels; ++v) {
      const float r = a[j] + sign * scale * book.magnitude(v);
      cost[j][v] = w[j] * r * r;
    }
  }
  return book.scan(cost, entry);
}

// Fits one group of 8 at scale `scale` (step 1): writes its code and returns its weighted error;
// adds its least-squares sums to *sums.
float fit_group(const Spec& spec, const Codebook& book, const float* x, const float* w, float scale,
                GroupCode* code, Sums* sums) {
  const int len = book.len();
  const int n_levels = book.levels();
  float bound[kMaxLevels];
  for (int v = 0; v + 1 < n_levels; ++v) {
    bound[v] = scale * 0.5f * (book.magnitude(v) + book.magnitude(v + 1));
  }
  float a[kGroup];
  uint8_t signs = 0;
  for (int j = 0; j < kGroup; ++j) {
    a[j] = std::fabs(x[j]);
    if (x[j] < 0) signs = uint8_t(signs | 1u << j);
  }
  const int parts = kGroup / len;
  int entry[2] = {0, 0};
  float part_cost[2] = {0, 0};
  for (int p = 0; p < parts; ++p) {
    part_cost[p] = search_part(book, a + p * len, w + p * len, -1, scale, bound, &entry[p]);
  }
  float total = part_cost[0] + part_cost[1];

  if (spec.parity && (std::popcount(unsigned(signs)) & 1)) {
    // One element takes the other sign. Flipping element j turns its costs into
    // w (a + S m)^2 = w (a - S m)^2 + 4 S w a m: try elements in increasing order of w a (and so
    // of that penalty at any level) while the bound with the least level can still win.
    int order[kGroup];
    for (int j = 0; j < kGroup; ++j) order[j] = j;
    std::sort(order, order + kGroup, [&](int p, int q) {
      const float wp = w[p] * a[p], wq = w[q] * a[q];
      return wp < wq || (wp == wq && p < q);
    });
    float best = FLT_MAX;
    int best_j = order[0], best_entry = entry[order[0] / len];
    for (const int j : order) {
      const float penalty = 4 * scale * w[j] * a[j];
      if (total + penalty * book.magnitude(0) >= best) break;
      const int p = j / len;
      int e;
      const float c = total - part_cost[p] +
                      search_part(book, a + p * len, w + p * len, j - p * len, scale, bound, &e);
      if (c < best) {
        best = c;
        best_j = j;
        best_entry = e;
      }
    }
    entry[best_j / len] = best_entry;
    signs = uint8_t(signs ^ 1u << best_j);
    total = best;
  }

  double xq = 0, qq = 0;
  for (int j = 0; j < kGroup; ++j) {
    const float m = book.magnitude(book.level_of(entry[j / len], j % len));
    const float q = (signs >> j) & 1 ? -m : m;
    xq += double(w[j]) * x[j] * q;
    qq += double(w[j]) * q * q;
  }
  sums->xq += xq;
  sums->qq += qq;
  code->entry[0] = uint16_t(entry[0]);
  code->entry[1] = uint16_t(entry[1]);
  code->signs = signs;
  return total;
}

// Fits the groups of unit b at scale `scale`: writes their codes to code[0 .. groups_per_unit)
// and returns the unit's weighted error; *sums receives its least-squares sums.
double fit_unit(const Spec& spec, const Codebook& book, const SuperBlock& sb, int b, float scale,
                GroupCode* code, Sums* sums) {
  *sums = Sums{};
  double err = 0;
  for (int k = 0; k < spec.groups_per_unit(); ++k) {
    const int first = spec.unit * b + kGroup * k;
    err += fit_group(spec, book, sb.x + first, sb.w + first, scale, &code[k], sums);
  }
  return err;
}

// A unit's own fit (step 2): its best scale S (0 when nothing fits) and the curvature
// A = sum w q^2 of its error around it.
struct UnitFit {
  float s = 0;
  double a = 0;
};

UnitFit fit_unit_scale(const Spec& spec, const Codebook& book, const SuperBlock& sb, int b) {
  const float* x = sb.x + spec.unit * b;
  const float* w = sb.w + spec.unit * b;
  float amax = 0;
  double wxx = 0;
  for (int i = 0; i < spec.unit; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    wxx += double(w[i]) * x[i] * x[i];
  }
  UnitFit fit;
  if (amax == 0) return fit;
  GroupCode code[4];
  Sums sums;
  double best = DBL_MAX;
  // Fits the entries at `scale` and keeps them at their least-squares scale if that is better.
  auto try_scale = [&](float scale) {
    fit_unit(spec, book, sb, b, scale, code, &sums);
    if (!(sums.xq > 0 && sums.qq > 0)) return;
    const double err = wxx - sums.xq * sums.xq / sums.qq;
    if (err < best) {
      best = err;
      fit.s = float(sums.xq / sums.qq);
      fit.a = sums.qq;
    }
  };
  // Trial scales s0 * t, t in [0.6, 1.6] (max |x| at or somewhat below the top level): more
  // trials or a wider range change the error of the shared test tensors by under 0.1%. Then the
  // scales that put max |x| exactly on each lower level: a unit of alike magnitudes (a constant
  // row, say) is best put on a level that some entry repeats throughout, which may lie far below
  // the top (IQ2_XXS repeats only 8 of 8 / 25 / 43, IQ3_S only 1 of 1 .. 15), and a decoded unit
  // whose largest element sits on a low level is found again exactly.
  const float m_top = book.magnitude(book.levels() - 1);
  const float s0 = amax / m_top;
  constexpr int kTrials = 7;
  constexpr float kLow = 0.6f, kHigh = 1.6f;
  for (int t = 0; t < kTrials; ++t)
    try_scale(s0 * (kLow + (kHigh - kLow) * float(t) / (kTrials - 1)));
  for (int v = 0; v + 1 < book.levels(); ++v) {
    if (m_top > kHigh * book.magnitude(v)) try_scale(amax / book.magnitude(v));
  }
  for (int iter = 0; iter < 2 && fit.s > 0; ++iter) {
    const double before = best;
    try_scale(fit.s);
    if (!(best < before)) break;
  }
  return fit;
}

// One encoding of a super-block, in normalised units (values / amax).
struct Encoding {
  float d = 0;                    // D = d * f, decoded from the stored bits, divided by amax
  uint16_t d_bits = 0;            // fp16 bits of the stored d
  uint8_t scale[kMaxUnits] = {};  // 4-bit scale s of each unit (multiplier 2 s + 1)
  GroupCode group[kGroups];
  double err = DBL_MAX;  // sum w (x - x')^2
};

// The 4-bit scale whose multiplier 2 s + 1 is nearest r.
int nearest_scale(float r) {
  const float s = std::clamp(0.5f * (r - 1), 0.0f, float(kMaxMultiplier));
  return int(s + 0.5f);
}

// Modelled error of super-scale D (step 3).
double model_error(const UnitFit* fits, int n_units, float d) {
  double err = 0;
  for (int b = 0; b < n_units; ++b) {
    const double r = double(d) * (2 * nearest_scale(fits[b].s / d) + 1) - fits[b].s;
    err += fits[b].a * r * r;
  }
  return err;
}

// Encodes the super-block with super-scale D = d_target (step 3), rounded as stored.
void encode(const Spec& spec, const Codebook& book, const SuperBlock& sb, const UnitFit* fits,
            float d_target, Encoding* e) {
  // Stored d = D / f in the input's units, saturating at fp16's largest finite value.
  e->d_bits = fp32_to_fp16(std::clamp(d_target / spec.f * sb.amax, 0.0f, kHalfMax));
  e->d = fp16_to_fp32(e->d_bits) * spec.f / sb.amax;
  if (!(e->d > 0)) {  // underflow: everything decodes to 0
    double err = 0;
    for (int i = 0; i < kQK_K; ++i) err += double(sb.w[i]) * sb.x[i] * sb.x[i];
    *e = Encoding{};
    e->err = err;
    return;
  }
  const int per = spec.groups_per_unit();
  double total = 0;
  for (int b = 0; b < spec.n_units(); ++b) {
    const float r = fits[b].s / e->d;
    const int s0 = nearest_scale(r);
    // The second nearest odd multiplier lies on r's side of the nearest one.
    const int s1 = std::clamp(float(2 * s0 + 1) < r ? s0 + 1 : s0 - 1, 0, kMaxMultiplier);
    double best = DBL_MAX;
    for (int k = 0; k < (s1 == s0 ? 1 : 2); ++k) {
      const int s = k == 0 ? s0 : s1;
      GroupCode code[4];
      Sums sums;
      const double err = fit_unit(spec, book, sb, b, e->d * float(2 * s + 1), code, &sums);
      if (err < best) {
        best = err;
        e->scale[b] = uint8_t(s);
        std::copy(code, code + per, e->group + per * b);
      }
    }
    total += best;
  }
  e->err = total;
}

// Least-squares super-scale D for an encoding's scales, entries and signs (0 if undetermined).
float refit_scale(const Spec& spec, const Codebook& book, const SuperBlock& sb, const Encoding& e) {
  const int len = book.len();
  double num = 0, den = 0;
  for (int g = 0; g < kGroups; ++g) {
    const double ls = 2 * e.scale[g / spec.groups_per_unit()] + 1;
    const GroupCode& code = e.group[g];
    for (int j = 0; j < kGroup; ++j) {
      const int i = kGroup * g + j;
      const float m = book.magnitude(book.level_of(code.entry[j / len], j % len));
      const double q = ls * ((code.signs >> j) & 1 ? -m : m);
      num += double(sb.w[i]) * sb.x[i] * q;
      den += double(sb.w[i]) * q * q;
    }
  }
  return num > 0 && den > 0 ? float(num / den) : 0.0f;
}

// The best encoding of a prepared, non-zero super-block.
void fit_super_block(const Spec& spec, const Codebook& book, const SuperBlock& sb, Encoding* best) {
  const int n_units = spec.n_units();
  UnitFit fits[kMaxUnits];
  float s_max = 0;
  for (int b = 0; b < n_units; ++b) {
    fits[b] = fit_unit_scale(spec, book, sb, b);
    s_max = std::max(s_max, fits[b].s);
  }
  if (!(s_max > 0)) {  // nothing to fit: decode to zero
    encode(spec, book, sb, fits, 0.0f, best);
    return;
  }
  // Scan the model over D = s_max / k, k in [4, 40] by eighths (every odd multiplier of the
  // largest unit included exactly, so that a decoded block's own D is a candidate), keeping its
  // best local minima.
  constexpr int kFirstK = 4, kLastK = 40;
  constexpr int kSteps = 8 * (kLastK - kFirstK) + 1;
  constexpr int kCandidates = 2;
  double model[kSteps];
  for (int k = 0; k < kSteps; ++k) {
    model[k] = model_error(fits, n_units, s_max / (kFirstK + 0.125f * k));
  }
  float candidate[kCandidates];
  double candidate_model[kCandidates];
  int n_candidates = 0;
  for (int k = 0; k < kSteps; ++k) {
    const bool local_min =
        (k == 0 || model[k] < model[k - 1]) && (k == kSteps - 1 || model[k] <= model[k + 1]);
    if (!local_min) continue;
    // Insert into the sorted list of the best kCandidates.
    int pos = n_candidates;
    while (pos > 0 && model[k] < candidate_model[pos - 1]) --pos;
    if (pos >= kCandidates) continue;
    for (int c = std::min(n_candidates, kCandidates - 1); c > pos; --c) {
      candidate[c] = candidate[c - 1];
      candidate_model[c] = candidate_model[c - 1];
    }
    candidate[pos] = s_max / (kFirstK + 0.125f * k);
    candidate_model[pos] = model[k];
    n_candidates = std::min(n_candidates + 1, kCandidates);
  }
  for (int c = 0; c < n_candidates; ++c) {
    Encoding e;
    encode(spec, book, sb, fits, candidate[c], &e);
    if (e.err < best->err) *best = e;
  }
  const float d = refit_scale(spec, book, sb, *best);
  if (d > 0) {
    Encoding e;
    encode(spec, book, sb, fits, d, &e);
    if (e.err < best->err) *best = e;
  }
}

// Quantizes n elements (whole super-blocks) of `spec`'s type, packing each with `pack`.
template <typename Block, typename Pack>
void quantize_rows(const float* src, void* dst, int64_t n, const float* importance,
                   const Spec& spec, Pack pack) {
  assert(n % kQK_K == 0);
  const Codebook& book = iq23_detail::codebook(spec.grid);
  const float limit =
      kHalfMax * (2 * kMaxMultiplier + 1) * book.magnitude(book.levels() - 1) * spec.f;
  auto* blocks = static_cast<Block*>(dst);
  SuperBlock sb;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prepare(src + kQK_K * i, importance ? importance + kQK_K * i : nullptr, spec.sigma_scale, limit,
            &sb);
    Encoding e;
    if (sb.amax > 0) {
      fit_super_block(spec, book, sb, &e);
    } else {
      e = Encoding{};  // a block of zeros: d = 0 decodes every element to 0
    }
    std::memset(&blocks[i], 0, sizeof(Block));
    blocks[i].d = e.d_bits;
    pack(e, &blocks[i]);
  }
}

void store_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, sizeof(v));
}

void pack_iq2_xxs(const Encoding& e, BlockIQ2_XXS* blk) {
  for (int b = 0; b < 8; ++b) {
    uint32_t aux = uint32_t(e.scale[b]) << 28;
    for (int l = 0; l < 4; ++l) {
      const GroupCode& g = e.group[4 * b + l];
      blk->qs[8 * b + l] = uint8_t(g.entry[0]);
      aux |= uint32_t(g.signs & 127) << (7 * l);
    }
    store_u32(blk->qs + 8 * b + 4, aux);
  }
}

void pack_iq2_xs(const Encoding& e, BlockIQ2_XS* blk) {
  for (int g = 0; g < kGroups; ++g) {
    blk->qs[g] = uint16_t(e.group[g].entry[0] | (e.group[g].signs & 127) << 9);
  }
  for (int b = 0; b < 8; ++b) blk->scales[b] = uint8_t(e.scale[2 * b] | e.scale[2 * b + 1] << 4);
}

void pack_iq2_s(const Encoding& e, BlockIQ2_S* blk) {
  for (int g = 0; g < kGroups; ++g) {
    const int index = e.group[g].entry[0];
    blk->qs[g] = uint8_t(index & 255);
    blk->qh[g / 4] = uint8_t(blk->qh[g / 4] | (index >> 8) << (2 * (g % 4)));
    blk->signs[g] = e.group[g].signs;
  }
  for (int b = 0; b < 8; ++b) blk->scales[b] = uint8_t(e.scale[2 * b] | e.scale[2 * b + 1] << 4);
}

void pack_iq3_xxs(const Encoding& e, BlockIQ3_XXS* blk) {
  for (int b = 0; b < 8; ++b) {
    uint32_t aux = uint32_t(e.scale[b]) << 28;
    for (int l = 0; l < 4; ++l) {
      const GroupCode& g = e.group[4 * b + l];
      blk->qs[8 * b + 2 * l] = uint8_t(g.entry[0]);
      blk->qs[8 * b + 2 * l + 1] = uint8_t(g.entry[1]);
      aux |= uint32_t(g.signs & 127) << (7 * l);
    }
    store_u32(blk->scales_signs + 4 * b, aux);
  }
}

void pack_iq3_s(const Encoding& e, BlockIQ3_S* blk) {
  for (int b = 0; b < 8; ++b) {
    for (int l = 0; l < 4; ++l) {
      const GroupCode& g = e.group[4 * b + l];
      for (int h = 0; h < 2; ++h) {
        blk->qs[8 * b + 2 * l + h] = uint8_t(g.entry[h] & 255);
        blk->qh[b] = uint8_t(blk->qh[b] | (g.entry[h] >> 8) << (2 * l + h));
      }
      blk->signs[4 * b + l] = g.signs;
    }
  }
  for (int b = 0; b < 4; ++b) blk->scales[b] = uint8_t(e.scale[2 * b] | e.scale[2 * b + 1] << 4);
}

}  // namespace

void quantize_row_iq2_xxs_weighted(const float* src, void* dst, int64_t n,
                                   const float* importance) {
  quantize_rows<BlockIQ2_XXS>(src, dst, n, importance, kSpecIq2Xxs, pack_iq2_xxs);
}

void quantize_row_iq2_xs_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_rows<BlockIQ2_XS>(src, dst, n, importance, kSpecIq2Xs, pack_iq2_xs);
}

void quantize_row_iq2_s_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_rows<BlockIQ2_S>(src, dst, n, importance, kSpecIq2S, pack_iq2_s);
}

void quantize_row_iq3_xxs_weighted(const float* src, void* dst, int64_t n,
                                   const float* importance) {
  quantize_rows<BlockIQ3_XXS>(src, dst, n, importance, kSpecIq3Xxs, pack_iq3_xxs);
}

void quantize_row_iq3_s_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_rows<BlockIQ3_S>(src, dst, n, importance, kSpecIq3S, pack_iq3_s);
}

void quantize_row_iq2_xxs(const float* src, void* dst, int64_t n) {
  quantize_row_iq2_xxs_weighted(src, dst, n, nullptr);
}

void quantize_row_iq2_xs(const float* src, void* dst, int64_t n) {
  quantize_row_iq2_xs_weighted(src, dst, n, nullptr);
}

void quantize_row_iq2_s(const float* src, void* dst, int64_t n) {
  quantize_row_iq2_s_weighted(src, dst, n, nullptr);
}

void quantize_row_iq3_xxs(const float* src, void* dst, int64_t n) {
  quantize_row_iq3_xxs_weighted(src, dst, n, nullptr);
}

void quantize_row_iq3_s(const float* src, void* dst, int64_t n) {
  quantize_row_iq3_s_weighted(src, dst, n, nullptr);
}

}  // namespace vela

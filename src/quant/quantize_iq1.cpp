// Quantizers of IQ1_S and IQ1_M (formats: quant/blocks_iq1.h).
//
// An element decodes to d * ls * (g + delta): d the fp16 super-scale, ls = 2 s + 1 the 3-bit scale
// of its sub-block (32 elements in IQ1_S, 16 in IQ1_M), g in {-1, 0, 1} its value in its group's
// codebook entry, delta = +-1/8 the shift of its sub-block (IQ1_S) or of its group of 8 (IQ1_M).
// Every super-block is scaled to |x| <= 1 first (so any finite input stays in range) and given
// element weights w_i = importance_i * sqrt(2 sigma^2 + x_i^2); the fit minimises
// sum_i w_i (x_i - x'_i)^2 in three steps.
//
//  1. Each sub-block's own best scale. Ignoring the codebook, the best x ~= s (v + delta) over
//     v in {-1, 0, 1}^n and s > 0 is found exactly: as 1/s grows from 0, each element leaves
//     level 0 once (towards its sign), so sweeping the n crossing points in order visits every
//     assignment that nearest rounding can give, and the least-squares scale of the best one is
//     the optimum (both delta signs, or all four sign pairs of IQ1_M's two groups, are swept).
//     That scale is then adapted to the codebook: each group takes its cheapest codebook entry at
//     the scale (an exact search, iq1_grid_search.h), the scale is refit by least squares, twice.
//  2. Candidate super-scales. Each sub-block's error grows about quadratically away from its
//     scale s_b, with curvature A_b = sum w (g + delta)^2, so a super-scale d costs about
//     sum_b min_ls A_b (d ls - s_b)^2. This model is scanned over d and its two best minima are
//     polished (nearest ls for each sub-block, least-squares d, until the ls settle).
//  3. Encoding. For a candidate d (rounded to fp16 as it will be stored), every sub-block tries
//     the three multipliers ls nearest its scale, and for each its delta signs, taking the
//     cheapest codebook entry of every group: the lowest true error wins. The best candidate's d
//     is then refit by least squares over the whole super-block and the encoding redone while
//     the error falls.
#include "quant/quantize_iq1.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/blocks_iq1.h"
#include "quant/iq1_grid.h"
#include "quant/iq1_grid_search.h"
#include "util/half.h"

namespace vela {

namespace {

constexpr int kGroup = 8;                // elements per codebook entry
constexpr int kGroups = kQK_K / kGroup;  // groups per super-block
constexpr float kHalfMax = 65504;        // largest finite fp16
constexpr int kMaxSub = 16;              // most sub-blocks per super-block (IQ1_M)

// How a type shares its scales and shifts.
struct Layout {
  int sub;           // elements per 3-bit scale: 32 (IQ1_S) or 16 (IQ1_M)
  bool group_shift;  // each group of 8 has its own delta sign (IQ1_M), else its sub-block's
  int n_sub() const { return kQK_K / sub; }
  int groups_per_sub() const { return sub / kGroup; }
};
constexpr Layout kLayoutS{32, false};
constexpr Layout kLayoutM{16, true};

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
  // The magnitude term, as ggml's IQ1 quantizers weigh it: twice the mean square as the floor.
  const float sigma2 = float(2 * sum_sq / kQK_K);
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
  // A tiny floor keeps every fit determined where the importance is zero (columns no calibration
  // input ever reached); it is far below any weight that matters.
  const float floor = float(sum_w / kQK_K) * 1e-6f + FLT_MIN;
  for (int i = 0; i < kQK_K; ++i) b->w[i] += floor;
}

// One encoding of a super-block, in normalised units (values / amax).
struct Encoding {
  float d = 0;                   // the stored super-scale, decoded and divided by amax
  uint16_t d_bits = 0;           // its fp16 bits
  uint8_t scale[kMaxSub] = {};   // 3-bit sub-block scales s (multiplier 2 s + 1)
  uint16_t index[kGroups] = {};  // codebook entry of each group
  bool minus[kGroups] = {};      // each group's delta is -kIq1Delta
  double err = DBL_MAX;          // sum w (x - x')^2
};

// The fp16 bits of the normalised super-scale d (saturating), and the value they decode to.
uint16_t store_scale(float d, float amax, float* decoded) {
  const uint16_t h = fp32_to_fp16(std::clamp(d * amax, 0.0f, kHalfMax));
  *decoded = fp16_to_fp32(h) / amax;
  return h;
}

// The cheapest codebook entry of one group at scale `scale` and shift `delta`; returns its error.
float fit_group(const float* x, const float* w, float scale, float delta, uint16_t* index) {
  float cost[kGroup][3];
  for (int j = 0; j < kGroup; ++j) {
    for (int v = 0; v < 3; ++v) {
      const float r = x[j] - scale * (float(v - 1) + delta);
      cost[j][v] = w[j] * r * r;
    }
  }
  return iq1_detail::nearest_entry(cost, index);
}

// The cheapest entries and delta signs of sub-block b at scale `scale` (written to the groups'
// slots of index / minus); returns the sub-block's error.
double fit_sub_block(const SuperBlock& sb, const Layout& layout, int b, float scale,
                     uint16_t* index, bool* minus) {
  const int per = layout.groups_per_sub();
  const int g0 = b * per;
  if (layout.group_shift) {
    double total = 0;
    for (int g = g0; g < g0 + per; ++g) {
      const float* x = sb.x + kGroup * g;
      const float* w = sb.w + kGroup * g;
      uint16_t ip, im;
      const float ep = fit_group(x, w, scale, kIq1Delta, &ip);
      const float em = fit_group(x, w, scale, -kIq1Delta, &im);
      minus[g] = em < ep;
      index[g] = minus[g] ? im : ip;
      total += minus[g] ? em : ep;
    }
    return total;
  }
  uint16_t ip[4], im[4];
  double ep = 0, em = 0;
  for (int k = 0; k < per; ++k) {
    const float* x = sb.x + kGroup * (g0 + k);
    const float* w = sb.w + kGroup * (g0 + k);
    ep += fit_group(x, w, scale, kIq1Delta, &ip[k]);
    em += fit_group(x, w, scale, -kIq1Delta, &im[k]);
  }
  const bool use_minus = em < ep;
  for (int k = 0; k < per; ++k) {
    minus[g0 + k] = use_minus;
    index[g0 + k] = use_minus ? im[k] : ip[k];
  }
  return use_minus ? em : ep;
}

// Least-squares sums of sub-block b's entries: sum w x q and sum w q^2, q = g + delta.
void entry_sums(const SuperBlock& sb, const Layout& layout, int b, const uint16_t* index,
                const bool* minus, double* sqx, double* sq2) {
  double a = 0, c = 0;
  const int per = layout.groups_per_sub();
  for (int g = b * per; g < (b + 1) * per; ++g) {
    const float delta = minus[g] ? -kIq1Delta : kIq1Delta;
    for (int j = 0; j < kGroup; ++j) {
      const int i = kGroup * g + j;
      const float q = float(iq1_grid_value(index[g], j)) + delta;
      a += double(sb.w[i]) * sb.x[i] * q;
      c += double(sb.w[i]) * q * q;
    }
  }
  *sqx = a;
  *sq2 = c;
}

// Exact best fit x_i ~= s (v_i + delta_i), v_i in {-1, 0, 1}, s > 0, over n <= 32 elements (see
// step 1 above). Returns the error reduction (sum w x q)^2 / sum w q^2 of the best assignment
// (0 when no s > 0 helps) and writes its least-squares scale to *scale.
double ternary_sweep(const float* x, const float* w, const float* delta, int n, float* scale) {
  struct Crossing {
    float t;  // the 1/s at which the element leaves level 0
    int i;
  };
  Crossing c[32];
  int m = 0;
  double sqx = 0, sq2 = 0;
  for (int i = 0; i < n; ++i) {
    sqx += double(w[i]) * x[i] * delta[i];
    sq2 += double(w[i]) * delta[i] * delta[i];
    if (x[i] > 0) c[m++] = {(0.5f + delta[i]) / x[i], i};
    if (x[i] < 0) c[m++] = {(0.5f - delta[i]) / -x[i], i};
  }
  std::sort(c, c + m, [](const Crossing& a, const Crossing& b) { return a.t < b.t; });
  double best = 0;
  *scale = 0;
  auto consider = [&]() {
    if (sqx > 0 && sq2 > 0 && sqx * sqx > best * sq2) {
      best = sqx * sqx / sq2;
      *scale = float(sqx / sq2);
    }
  };
  consider();
  for (int k = 0; k < m; ++k) {
    const int i = c[k].i;
    const double v = x[i] > 0 ? 1.0 : -1.0;
    sqx += double(w[i]) * x[i] * v;
    sq2 += double(w[i]) * ((delta[i] + v) * (delta[i] + v) - double(delta[i]) * delta[i]);
    consider();
  }
  return best;
}

// A sub-block's own fit: its best scale s (0 when nothing fits) and the curvature
// A = sum w q^2 of its error around it.
struct SubFit {
  float s = 0;
  double a = 0;
};

SubFit fit_scale(const SuperBlock& sb, const Layout& layout, int b) {
  const float* x = sb.x + layout.sub * b;
  const float* w = sb.w + layout.sub * b;
  float delta[32];
  float s = 0;
  double best = 0;
  // IQ1_S: one sign for the sub-block; IQ1_M: each of the 2 groups its own.
  const int patterns = layout.group_shift ? 1 << layout.groups_per_sub() : 2;
  for (int p = 0; p < patterns; ++p) {
    for (int i = 0; i < layout.sub; ++i) {
      const int bit = layout.group_shift ? (p >> (i / kGroup)) & 1 : p;
      delta[i] = bit ? -kIq1Delta : kIq1Delta;
    }
    float sp;
    const double gain = ternary_sweep(x, w, delta, layout.sub, &sp);
    if (gain > best) {
      best = gain;
      s = sp;
    }
  }
  SubFit fit;
  if (!(s > 0)) return fit;
  uint16_t index[kGroups];
  bool minus[kGroups];
  for (int iter = 0; iter < 2; ++iter) {
    fit_sub_block(sb, layout, b, s, index, minus);
    double sqx, sq2;
    entry_sums(sb, layout, b, index, minus, &sqx, &sq2);
    fit.a = sq2;
    if (sqx > 0 && sq2 > 0) s = float(sqx / sq2);
  }
  fit.s = s;
  return fit;
}

// The 3-bit scale whose multiplier 2 l + 1 is nearest r (0 for NaN).
int nearest_scale(float r) {
  const float l = 0.5f * (r - 1);
  return l >= 7 ? 7 : l > 0 ? int(l + 0.5f) : 0;
}

// Modelled error of super-scale d (step 2); writes each sub-block's nearest scale.
double model_error(const SubFit* fits, int n_sub, float d, int* scale) {
  double err = 0;
  for (int b = 0; b < n_sub; ++b) {
    scale[b] = nearest_scale(fits[b].s / d);
    const double r = double(d) * (2 * scale[b] + 1) - fits[b].s;
    err += fits[b].a * r * r;
  }
  return err;
}

// Polishes super-scale d under the model: least-squares d for the current scales, until they
// settle.
float polish_scale(const SubFit* fits, int n_sub, float d) {
  int scale[kMaxSub];
  for (int iter = 0; iter < 4; ++iter) {
    model_error(fits, n_sub, d, scale);
    double num = 0, den = 0;
    for (int b = 0; b < n_sub; ++b) {
      const double ls = 2 * scale[b] + 1;
      num += fits[b].a * ls * fits[b].s;
      den += fits[b].a * ls * ls;
    }
    if (!(num > 0 && den > 0)) break;
    const float next = float(num / den);
    if (next == d) break;
    d = next;
  }
  return d;
}

// Encodes the super-block with super-scale d (step 3).
void encode(const SuperBlock& sb, const Layout& layout, const SubFit* fits, float d_target,
            Encoding* e) {
  e->d_bits = store_scale(d_target, sb.amax, &e->d);
  if (!(e->d > 0)) {  // underflow: everything decodes to 0
    double err = 0;
    for (int i = 0; i < kQK_K; ++i) err += double(sb.w[i]) * sb.x[i] * sb.x[i];
    *e = Encoding{};  // d_bits 0
    e->err = err;
    return;
  }
  const int per = layout.groups_per_sub();
  double total = 0;
  for (int b = 0; b < layout.n_sub(); ++b) {
    const int l0 = nearest_scale(fits[b].s / e->d);
    double best = DBL_MAX;
    for (int l = std::max(l0 - 1, 0); l <= std::min(l0 + 1, 7); ++l) {
      uint16_t index[kGroups];
      bool minus[kGroups];
      const double err = fit_sub_block(sb, layout, b, e->d * float(2 * l + 1), index, minus);
      if (err < best) {
        best = err;
        e->scale[b] = uint8_t(l);
        std::copy(index + b * per, index + (b + 1) * per, e->index + b * per);
        std::copy(minus + b * per, minus + (b + 1) * per, e->minus + b * per);
      }
    }
    total += best;
  }
  e->err = total;
}

// Least-squares super-scale for an encoding's scales, entries and signs (0 if undetermined).
float refit_scale(const SuperBlock& sb, const Layout& layout, const Encoding& e) {
  double num = 0, den = 0;
  for (int b = 0; b < layout.n_sub(); ++b) {
    double sqx, sq2;
    entry_sums(sb, layout, b, e.index, e.minus, &sqx, &sq2);
    const double ls = 2 * e.scale[b] + 1;
    num += ls * sqx;
    den += ls * ls * sq2;
  }
  return num > 0 && den > 0 ? float(num / den) : 0.0f;
}

// The best encoding of a prepared, non-zero super-block.
void fit_super_block(const SuperBlock& sb, const Layout& layout, Encoding* best) {
  const int n_sub = layout.n_sub();
  SubFit fits[kMaxSub];
  float s_max = 0;
  for (int b = 0; b < n_sub; ++b) {
    fits[b] = fit_scale(sb, layout, b);
    s_max = std::max(s_max, fits[b].s);
  }
  if (!(s_max > 0)) {  // nothing to fit: decode to zero
    encode(sb, layout, fits, 0.0f, best);
    return;
  }
  // Step 2: scan the model over d = s_max / 15 * f, f in [0.9, 2.2], keeping its two best local
  // minima.
  constexpr int kSteps = 40;
  double model[kSteps];
  float ds[kSteps];
  int scale[kMaxSub];
  for (int k = 0; k < kSteps; ++k) {
    ds[k] = s_max / 15 * 0.9f * std::pow(2.2f / 0.9f, float(k) / (kSteps - 1));
    model[k] = model_error(fits, n_sub, ds[k], scale);
  }
  float candidates[2];
  int n_candidates = 0;
  double cand_model[2] = {DBL_MAX, DBL_MAX};
  for (int k = 0; k < kSteps; ++k) {
    const bool local_min =
        (k == 0 || model[k] <= model[k - 1]) && (k == kSteps - 1 || model[k] <= model[k + 1]);
    if (!local_min) continue;
    if (model[k] < cand_model[0]) {
      cand_model[1] = cand_model[0];
      candidates[1] = candidates[0];
      cand_model[0] = model[k];
      candidates[0] = ds[k];
      n_candidates = std::min(n_candidates + 1, 2);
    } else if (model[k] < cand_model[1]) {
      cand_model[1] = model[k];
      candidates[1] = ds[k];
      n_candidates = 2;
    }
  }
  // Step 3: encode each polished candidate, then refine the best.
  for (int c = 0; c < n_candidates; ++c) {
    Encoding e;
    encode(sb, layout, fits, polish_scale(fits, n_sub, candidates[c]), &e);
    if (e.err < best->err) *best = e;
  }
  for (int iter = 0; iter < 3; ++iter) {
    const float d = refit_scale(sb, layout, *best);
    float decoded;
    if (!(d > 0) || store_scale(d, sb.amax, &decoded) == best->d_bits) break;
    Encoding e;
    encode(sb, layout, fits, d, &e);
    if (!(e.err < best->err)) break;
    *best = e;
  }
}

// Quantizes n elements (whole super-blocks) with `layout`, packing each with `pack`.
template <typename Block, typename Pack>
void quantize_rows(const float* src, void* dst, int64_t n, const float* importance,
                   const Layout& layout, Pack pack) {
  assert(n % kQK_K == 0);
  auto* blocks = static_cast<Block*>(dst);
  SuperBlock sb;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    prepare(src + kQK_K * i, importance ? importance + kQK_K * i : nullptr, &sb);
    Encoding e;
    if (sb.amax > 0) {
      fit_super_block(sb, layout, &e);
    } else {
      e.d_bits = 0;  // a block of zeros: d = 0 decodes every element to 0
    }
    pack(e, &blocks[i]);
  }
}

void pack_iq1_s(const Encoding& e, BlockIQ1_S* blk) {
  blk->d = e.d_bits;
  for (int b = 0; b < 8; ++b) {
    uint16_t h = uint16_t(e.scale[b] << 12 | (e.minus[4 * b] ? 0x8000 : 0));
    for (int l = 0; l < 4; ++l) {
      const uint16_t index = e.index[4 * b + l];
      blk->qs[4 * b + l] = uint8_t(index & 0xFF);
      h = uint16_t(h | (index >> 8) << (3 * l));
    }
    blk->qh[b] = h;
  }
}

void pack_iq1_m(const Encoding& e, BlockIQ1_M* blk) {
  std::memset(blk->qh, 0, sizeof(blk->qh));
  for (int g = 0; g < kGroups; ++g) {
    blk->qs[g] = uint8_t(e.index[g] & 0xFF);
    const uint32_t nibble = uint32_t(e.index[g] >> 8) | (e.minus[g] ? 8u : 0u);
    blk->qh[g / 2] = uint8_t(blk->qh[g / 2] | nibble << (4 * (g % 2)));
  }
  // Scale word i: the 3-bit scales of sub-blocks 4 i .. 4 i + 3, then nibble i of d's bits.
  for (int i = 0; i < 4; ++i) {
    uint32_t word = uint32_t(e.d_bits >> (4 * i) & 0xF) << 12;
    for (int k = 0; k < 4; ++k) word |= uint32_t(e.scale[4 * i + k]) << (3 * k);
    blk->scales[2 * i] = uint8_t(word & 0xFF);
    blk->scales[2 * i + 1] = uint8_t(word >> 8);
  }
}

}  // namespace

void quantize_row_iq1_s_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_rows<BlockIQ1_S>(src, dst, n, importance, kLayoutS, pack_iq1_s);
}

void quantize_row_iq1_m_weighted(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_rows<BlockIQ1_M>(src, dst, n, importance, kLayoutM, pack_iq1_m);
}

void quantize_row_iq1_s(const float* src, void* dst, int64_t n) {
  quantize_row_iq1_s_weighted(src, dst, n, nullptr);
}

void quantize_row_iq1_m(const float* src, void* dst, int64_t n) {
  quantize_row_iq1_m_weighted(src, dst, n, nullptr);
}

}  // namespace vela

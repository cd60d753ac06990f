#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace vela {
namespace {

// The (fractional) pair index whose pair makes n_turns full turns over n_ctx positions.
double yarn_correction_dim(int32_t n_rot, int32_t n_ctx, double n_turns, double base) {
  return n_rot * std::log(n_ctx / (n_turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeConfig& r, int32_t n_rot,
                                 std::span<const float> factors) {
  RopeFrequencies out;
  const int32_t half = n_rot / 2;
  out.freqs.resize(size_t(half));
  out.mscale = r.attn_factor;
  double low = 0, high = 0;
  const bool yarn = r.scaling == RopeScaling::kYarn;
  if (yarn && r.yarn_ext_factor != 0.0f) {
    const double base = r.freq_base;
    low = std::max(
        0.0, std::floor(yarn_correction_dim(n_rot, r.original_context, r.yarn_beta_fast, base)));
    high =
        std::min(double(n_rot - 1),
                 std::ceil(yarn_correction_dim(n_rot, r.original_context, r.yarn_beta_slow, base)));
    out.mscale *= float(1.0 + 0.1 * std::log(1.0 / double(r.freq_scale)));
  }
  for (int32_t i = 0; i < half; ++i) {
    double f = std::pow(double(r.freq_base), -2.0 * i / double(n_rot));
    if (!factors.empty()) f /= double(factors[size_t(i)]);
    if (yarn) {
      // 1 below the low correction pair (original frequency), 0 above the high one; with
      // ext_factor 0 every pair is interpolated.
      const double y = (i - low) / std::max(0.001, high - low);
      const double ramp = (1.0 - std::clamp(y, 0.0, 1.0)) * r.yarn_ext_factor;
      f *= double(r.freq_scale) * (1.0 - ramp) + ramp;
    } else if (r.scaling == RopeScaling::kLinear) {
      f *= double(r.freq_scale);
    }
    out.freqs[size_t(i)] = static_cast<float>(f);
  }
  return out;
}

void rope_tables(const int32_t* positions, int64_t n_tokens, const float* freqs, int32_t n_rot,
                 float mscale, float* cos_sin) {
  const int32_t half = n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const double pos = double(positions[t]);
    float* cs = cos_sin + t * half * 2;
    for (int32_t i = 0; i < half; ++i) {
      const double theta = pos * double(freqs[i]);
      cs[2 * i] = static_cast<float>(std::cos(theta) * mscale);
      cs[2 * i + 1] = static_cast<float>(std::sin(theta) * mscale);
    }
  }
}

void rope_apply(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                RopeStyle style, const float* cos_sin) {
  const int32_t half = n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cs = cos_sin + t * half * 2;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        // kNormal pairs adjacent dimensions; kNeox pairs dimension i with i + n_rot/2.
        const int32_t a = style == RopeStyle::kNormal ? 2 * i : i;
        const int32_t b = style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace vela

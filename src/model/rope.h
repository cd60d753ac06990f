#pragma once
// Rotary position embedding: the per-pair rotation frequencies of a RoPE variant (plain, linear
// scaling, YaRN, LongRoPE or Llama-3 frequency factors), the per-token cos/sin tables of a pass,
// and the rotation itself.
// Pure functions; no thread-safety concerns.
#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"

namespace vela {

// A variant's rotation: theta(pos, i) = pos * freqs[i], and cos/sin scaled by mscale.
struct RopeFrequencies {
  std::vector<float> freqs;  // [n_rot / 2] radians per position of each pair
  float mscale = 1.0f;       // magnitude of cos and sin (YaRN / LongRoPE attention factor)
};

// Pair i turns at base^(-2i / n_rot), divided by factors[i] when given (Llama 3.1 rope_freqs,
// LongRoPE), then scaled: linear by freq_scale; YaRN blends freq_scale * f (interpolation) and f
// (extrapolation) along a ramp between the pairs that make beta_slow and beta_fast turns over
// the original context, and scales the magnitude by attn_factor * (1 + 0.1 ln(1 / freq_scale)).
// factors: [n_rot / 2] or empty.
RopeFrequencies rope_frequencies(const RopeConfig& rope, int32_t n_rot,
                                 std::span<const float> factors);

// cos/sin of position * freqs[i] for every rotated pair, times mscale.
// positions: [n_tokens]; freqs: [n_rot / 2]; cos_sin: [n_tokens, n_rot / 2, 2]
void rope_tables(const int32_t* positions, int64_t n_tokens, const float* freqs, int32_t n_rot,
                 float mscale, float* cos_sin);

// Rotates the first n_rot dimensions of every head of every token in place.
// x: [n_tokens, n_heads, head_dim]; cos_sin: [n_tokens, n_rot / 2, 2]
void rope_apply(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                RopeStyle style, const float* cos_sin);

}  // namespace vela

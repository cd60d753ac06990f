#include "sampling/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "sampling/token_mask.h"
#include "sampling/vector_math.h"

namespace vela {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A NaN logit would break the strict ordering the filters rely on; treat it as impossible.
inline float sanitized(float logit) {
  return std::isnan(logit) ? kNegInf : logit;
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

Status invalid(const std::string& parameter, const std::string& requirement,
               const std::string& got) {
  return make_error("invalid sampling parameter " + parameter + ": must be " + requirement +
                    " (got " + got + ")");
}

std::string shown(float value) {
  std::ostringstream out;
  out << value;  // shortest natural form: 1.5, -0.1, nan, inf
  return out.str();
}

std::string shown(int32_t value) {
  return std::to_string(value);
}

}  // namespace

Status Sampler::validate(const SamplingParams& params) {
  // Comparisons are written so that NaN fails them.
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
    return invalid("temperature", "finite and >= 0", shown(params.temperature));
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return invalid("top_p", "in (0, 1]", shown(params.top_p));
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    return invalid("min_p", "in [0, 1]", shown(params.min_p));
  }
  if (!(params.repetition_penalty > 0.0f) || !std::isfinite(params.repetition_penalty)) {
    return invalid("repetition_penalty", "finite and > 0", shown(params.repetition_penalty));
  }
  // vLLM's range: beyond +-2 the penalty swamps the logits.
  if (!(params.presence_penalty >= -2.0f && params.presence_penalty <= 2.0f)) {
    return invalid("presence_penalty", "in [-2, 2]", shown(params.presence_penalty));
  }
  if (!(params.frequency_penalty >= -2.0f && params.frequency_penalty <= 2.0f)) {
    return invalid("frequency_penalty", "in [-2, 2]", shown(params.frequency_penalty));
  }
  if (params.max_tokens < 0) return invalid("max_tokens", ">= 0", shown(params.max_tokens));
  if (params.min_tokens < 0 || params.min_tokens > params.max_tokens) {
    return invalid("min_tokens", "in [0, max_tokens = " + shown(params.max_tokens) + "]",
                   shown(params.min_tokens));
  }
  if (params.n < 1) return invalid("n", ">= 1", shown(params.n));
  if (params.logprobs && (*params.logprobs < 0 || *params.logprobs > kMaxLogprobs)) {
    return invalid("logprobs", "in [0, " + std::to_string(kMaxLogprobs) + "]",
                   shown(*params.logprobs));
  }
  for (const std::string& stop : params.stop) {
    if (stop.empty()) return make_error("invalid sampling parameter stop: empty stop string");
  }
  for (const int32_t token : params.stop_token_ids) {
    if (token < 0) return invalid("stop_token_ids", "non-negative token ids", shown(token));
  }
  for (const int32_t token : params.forced_tokens) {
    if (token < 0) return invalid("forced_tokens", "non-negative token ids", shown(token));
  }
  if (params.reasoning.max_tokens < -1)
    return invalid("max_reasoning_tokens", ">= 0 (or -1 for no limit)",
                   shown(params.reasoning.max_tokens));
  if (params.reasoning.max_tokens >= 0 &&
      (!params.reasoning.active() || params.reasoning.end_tokens.empty()))
    return make_error(
        "invalid sampling parameter max_reasoning_tokens: needs the reasoning end marker's "
        "tokens");
  for (const int32_t token : params.reasoning.end_tokens) {
    if (token < 0) return invalid("reasoning.end_tokens", "non-negative token ids", shown(token));
  }
  for (const auto& [token, bias] : params.logit_bias) {
    if (token < 0) return invalid("logit_bias", "non-negative token ids", shown(token));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return invalid("logit_bias", "biases in [-100, 100]", shown(bias));
  }
  return {};
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : n_vocab_(n_vocab),
      temperature_(params.temperature),
      top_k_(params.top_k),
      top_p_(params.top_p),
      min_p_(params.min_p),
      n_logprobs_(params.logprobs ? *params.logprobs : -1),
      min_tokens_(params.min_tokens),
      min_tokens_banned_(params.min_tokens > 0 ? params.stop_token_ids : std::vector<int32_t>{}),
      logit_bias_(params.logit_bias),
      penalties_(params.repetition_penalty, params.presence_penalty, params.frequency_penalty),
      rng_(params.seed ? *params.seed : random_seed()),
      logits_(static_cast<size_t>(std::max(n_vocab, 1))),
      candidates_(logits_.size()),
      block_sums_((logits_.size() + sampling::kSumBlock - 1) / sampling::kSumBlock) {
  assert(n_vocab >= 1);
  assert(validate(params).ok());
  top_scratch_.reserve(static_cast<size_t>(std::max(n_logprobs_, 0)) + 1);
}

void Sampler::set_prompt(std::span<const int32_t> prompt_tokens) {
  penalties_.set_prompt(prompt_tokens);
}

void Sampler::accept(int32_t token) {
  assert(token >= 0 && token < n_vocab_);
  penalties_.add_output(token);
  ++n_accepted_;
}

void Sampler::retract(int32_t token) {
  assert(n_accepted_ > 0);
  penalties_.remove_output(token);
  --n_accepted_;
}

float Sampler::load_raw(std::span<const float> logits) {
  assert(logits.size() == static_cast<size_t>(n_vocab_));
  const size_t n_given = std::min(logits.size(), logits_.size());
  for (size_t i = 0; i < n_given; ++i) logits_[i] = sanitized(logits[i]);
  std::fill(logits_.begin() + static_cast<ptrdiff_t>(n_given), logits_.end(), kNegInf);
  const float raw_max = sampling::max_value(logits_);
  return std::isfinite(raw_max)
             ? raw_max + static_cast<float>(std::log(sampling::sum_exp(logits_, raw_max)))
             : raw_max;
}

void Sampler::apply_transforms(std::span<const uint64_t> allowed) {
  if (allowed.empty()) allowed = restriction_;
  if (!allowed.empty()) sampling::mask_disallowed(logits_, allowed);
  penalties_.apply(logits_);
  for (const auto& [token, bias] : logit_bias_)
    if (token < n_vocab_) logits_[static_cast<size_t>(token)] += bias;
  // min_tokens (vLLM's rule): stop tokens are impossible until enough tokens were generated.
  if (n_accepted_ < min_tokens_)
    for (const int32_t token : min_tokens_banned_)
      if (token < n_vocab_) logits_[static_cast<size_t>(token)] = kNegInf;
}

SampledToken Sampler::sample(std::span<const float> logits, std::span<const uint64_t> allowed) {
  // Logprobs come from the raw logits, so measure them before penalties touch the buffer.
  const float log_z = load_raw(logits);
  SampledToken out;
  if (n_logprobs_ > 0) fill_top_logprobs(log_z, out);
  apply_transforms(allowed);
  out.token = is_greedy() ? sampling::argmax(logits_) : pick_random();

  const float raw_logit = static_cast<size_t>(out.token) < logits.size()
                              ? sanitized(logits[size_t(out.token)])
                              : kNegInf;
  out.logprob = raw_logit == kNegInf ? kNegInf : raw_logit - log_z;
  return out;
}

SampledToken Sampler::describe(std::span<const float> logits, int32_t token) {
  const float log_z = load_raw(logits);
  SampledToken out;
  if (n_logprobs_ > 0) fill_top_logprobs(log_z, out);
  out.token = token;
  const float raw_logit = logits_[size_t(token)];
  out.logprob = raw_logit == kNegInf ? kNegInf : raw_logit - log_z;
  return out;
}

void Sampler::target_probabilities(std::span<const float> logits, std::span<float> probs) {
  assert(probs.size() == static_cast<size_t>(n_vocab_));
  load_raw(logits);
  apply_transforms();
  const auto one_hot = [&](int32_t token) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[size_t(token)] = 1.0f;
  };
  if (is_greedy()) return one_hot(sampling::argmax(logits_));
  for (float& logit : logits_) logit /= temperature_;
  const float max_logit = sampling::max_value(logits_);
  if (!std::isfinite(max_logit)) return one_hot(sampling::argmax(logits_));
  // The same weights pick_random() draws from.
  double total = 0.0;
  if (top_k_ > 0 || top_p_ < 1.0f) {
    std::span<sampling::Candidate> kept(candidates_);
    for (size_t i = 0; i < logits_.size(); ++i) kept[i] = {logits_[i], static_cast<int32_t>(i)};
    kept = kept.first(sampling::keep_top_k(kept, top_k_));
    kept = kept.first(sampling::keep_top_p(kept, top_p_, max_logit));
    kept = kept.first(sampling::keep_min_p(kept, min_p_, max_logit));
    std::fill(probs.begin(), probs.end(), 0.0f);
    for (const sampling::Candidate& c : kept) {
      const float w = sampling::exp_approx(c.logit - max_logit);
      probs[size_t(c.token)] = w;
      total += w;
    }
  } else {
    const float threshold = min_p_ > 0.0f ? max_logit + std::log(min_p_) : kNegInf;
    total = sampling::exp_weights_in_place(logits_, max_logit, threshold, block_sums_);
    std::copy(logits_.begin(), logits_.end(), probs.begin());
  }
  const float scale = static_cast<float>(1.0 / total);
  for (float& p : probs) p *= scale;
}

int32_t Sampler::pick_random() {
  for (float& logit : logits_) logit /= temperature_;
  const float max_logit = sampling::max_value(logits_);
  // All -inf: nothing to draw from; +inf: the infinite ones dominate. Both reduce to argmax.
  if (!std::isfinite(max_logit)) return sampling::argmax(logits_);

  if (top_k_ > 0 || top_p_ < 1.0f) {
    std::span<sampling::Candidate> kept(candidates_);
    for (size_t i = 0; i < logits_.size(); ++i) {
      kept[i] = {logits_[i], static_cast<int32_t>(i)};
    }
    kept = kept.first(sampling::keep_top_k(kept, top_k_));
    kept = kept.first(sampling::keep_top_p(kept, top_p_, max_logit));
    kept = kept.first(sampling::keep_min_p(kept, min_p_, max_logit));
    return draw_candidates(kept, max_logit);
  }
  return draw_full_vocabulary(max_logit);
}

int32_t Sampler::draw_full_vocabulary(float max_logit) {
  // No sorting filter: draw straight from the logits, min-p as a threshold on the way.
  const float threshold = min_p_ > 0.0f ? max_logit + std::log(min_p_) : kNegInf;
  const double total = sampling::exp_weights_in_place(logits_, max_logit, threshold, block_sums_);
  const double target = uniform01() * total;
  return static_cast<int32_t>(sampling::draw_weighted(logits_, block_sums_, target));
}

int32_t Sampler::draw_candidates(std::span<sampling::Candidate> candidates, float max_logit) {
  // Usually few candidates survive top-k / top-p, so a plain two-pass draw is enough.
  double total = 0.0;
  for (sampling::Candidate& c : candidates) {
    c.logit = sampling::exp_approx(c.logit - max_logit);  // now a weight
    total += c.logit;
  }
  const double target = uniform01() * total;
  double cumulative = 0.0;
  int32_t last_positive = candidates.front().token;
  for (const sampling::Candidate& c : candidates) {
    if (c.logit <= 0.0f) continue;
    cumulative += c.logit;
    last_positive = c.token;
    if (target < cumulative) return c.token;
  }
  return last_positive;  // rounding put target at the very end
}

void Sampler::fill_top_logprobs(float log_z, SampledToken& out) {
  // Running top-n by raw logit (n <= 20): one pass, rare insertions, no allocation.
  // logits_ holds the sanitised raw logits at this point.
  const size_t n = static_cast<size_t>(n_logprobs_);
  top_scratch_.clear();
  const auto goes_before = [](float logit, const TokenLogprob& e) { return logit > e.logprob; };
  for (size_t i = 0; i < logits_.size(); ++i) {
    const float logit = logits_[i];
    if (top_scratch_.size() == n) {
      if (!(logit > top_scratch_.back().logprob)) continue;  // ties keep the lower id
      top_scratch_.pop_back();
    }
    // Equal logits stay in id order: insert after them.
    const auto pos = std::upper_bound(top_scratch_.begin(), top_scratch_.end(), logit, goes_before);
    top_scratch_.insert(pos, TokenLogprob{static_cast<int32_t>(i), logit});
  }
  out.top.reserve(top_scratch_.size());
  for (const TokenLogprob& entry : top_scratch_) {
    out.top.push_back({entry.token, entry.logprob - log_z});
  }
}

double Sampler::uniform01() {
  // 53 random bits -> [0, 1): exact and identical on every standard library, unlike
  // std::uniform_real_distribution, so a seed reproduces the same tokens everywhere.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

}  // namespace vela

#pragma once
// How an engine speculates: which proposer, how many tokens it proposes per step at most, and
// the n-gram lookup's match lengths (the draft model itself travels in EngineConfig). Plain data
// and its validation; safe to copy anywhere.
#include <cstdint>
#include <string_view>

#include "util/result.h"

namespace vela {

// kNgram: prompt lookup; kDraft: a draft model (given to the engine beside this config); kMtp:
// the model's own multi-token-prediction block; kEagle3: an EAGLE-3 draft head (likewise).
enum class SpecMethod { kNone, kNgram, kDraft, kMtp, kEagle3 };

// Most tokens one request may propose per step (K); K + 1 logits rows per speculating request.
inline constexpr int32_t kMaxSpeculativeTokens = 16;

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNone;
  int32_t num_speculative_tokens = 4;  // K, in [1, kMaxSpeculativeTokens]
  int32_t prompt_lookup_min = 1;       // shortest suffix the n-gram lookup matches
  int32_t prompt_lookup_max = 4;       // longest (tried first)
  // Speculate only where the step-cost model and the acceptance seen predict more tokens per
  // second than plain decoding; false = always propose K (tests, measurements).
  bool adaptive = true;
  // An MTP block proposes among the first draft_vocab token ids only; 0 = the whole vocabulary
  // (HeadProposerOptions::draft_vocab).
  int64_t draft_vocab = 0;

  bool enabled() const { return method != SpecMethod::kNone; }
};

// "ngram" | "draft" | "mtp" | "eagle3" | "none".
Result<SpecMethod> parse_spec_method(std::string_view name);
std::string_view spec_method_name(SpecMethod method);

// Checks the ranges; the message names the option.
Status validate(const SpeculativeConfig& config);

}  // namespace vela

#pragma once
// A request inside the engine with its sampling and streaming state (Engine::Live). Used by the
// engine's own sources only.
// Thread-safety: the engine thread's, like the Engine.
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "spec/speculation_policy.h"

namespace vela {

struct Engine::Live {
  Request request;
  SamplingParams params;
  Sampler sampler;
  StreamingDetokenizer detokenizer;
  StopMatcher stop;
  CompletionOutput output;
  RequestCallback callback;
  std::optional<Pooling> pooling;  // embedding requests
  std::vector<float> pooled;       // [n_embd] sum (mean) or last row, then the result
  AcceptanceEstimate acceptance;
  int32_t shadow_proposal = -1;  // a proposal not verified: checked against the next token
  int32_t steps_undrafted = 0;   // decode steps the policy kept a draft-model request from drafting
  std::span<const float> draft_q;  // [n_draft, n_vocab] this step's sampled draft proposals' q
  std::unique_ptr<constraint::SequenceConstraint> constraint;  // structured output, if any

  Live(const SamplingParams& p, int32_t n_vocab, const Tokenizer& tok)
      : params(p), sampler(p, n_vocab), detokenizer(tok), stop(p.stop) {}
};

}  // namespace vela

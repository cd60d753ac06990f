#pragma once
// A request inside the engine with its sampling and streaming state (Engine::Live). Used by the
// engine's own sources only.
// Thread-safety: the engine thread's, like the Engine.
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "reasoning/thinking_splitter.h"
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
  bool granted = false;          // the policy granted it proposals in this step
  // [n_draft (+ 1 with a refused proposal), n_vocab] this step's sampled draft proposals' q
  std::span<const float> draft_q;
  // This step's drawn proposal after the n_draft kept ones that the grammar refused (its row is
  // drawn from the residual), or -1.
  int32_t refused_proposal = -1;
  std::unique_ptr<constraint::SequenceConstraint> constraint;  // structured output, if any
  // params.reasoning: where the output stands while it may still think, its thinking tokens so
  // far, and the structured-output constraint held back until the answer begins.
  std::optional<reasoning::ThinkingSplitter> thinking;
  int32_t thinking_tokens = 0;
  bool budget_spent = false;  // the end marker was forced
  std::unique_ptr<constraint::SequenceConstraint> deferred_constraint;
  std::deque<int32_t> forced;  // tokens the next steps emit whatever the logits say

  // From params: the forced tokens and the reasoning state (after `constraint` is made).
  void begin_control();
  // Follows one emitted token's text through the reasoning block (when `thinking`).
  void follow_reasoning(std::string_view piece);
  // Speculative proposals would skip forced tokens, the budget or the constraint's start.
  bool speculation_blocked() const {
    return !forced.empty() ||
           (thinking && (deferred_constraint || params.reasoning.max_tokens >= 0));
  }

  Live(const SamplingParams& p, int32_t n_vocab, const Tokenizer& tok)
      : params(p), sampler(p, n_vocab), detokenizer(tok), stop(p.stop) {}
};

}  // namespace vela

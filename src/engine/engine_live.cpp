// A running request's forced tokens and its reasoning phase: when a thinking block's budget ends
// it (forcing the end marker) and when the structured-output constraint starts.
#include "engine/engine_live.h"

namespace vela {

void Engine::Live::begin_control() {
  forced.assign(params.forced_tokens.begin(), params.forced_tokens.end());
  const ReasoningControl& rc = params.reasoning;
  if (!rc.active()) return;
  reasoning::ThinkingMarkers markers{rc.start, rc.end, rc.implicit_start};
  const reasoning::Phase phase =
      rc.begin == ReasoningControl::Begin::kThinking ? reasoning::Phase::kThinking
      : rc.begin == ReasoningControl::Begin::kAnswer ? reasoning::Phase::kAnswer
      : rc.implicit_start                            ? reasoning::Phase::kThinking
                                                     : reasoning::Phase::kBefore;
  if (phase == reasoning::Phase::kAnswer) return;
  thinking.emplace(std::move(markers), phase);
  // Output that may open with thinking keeps the constraint from the first token (the grammar
  // decides whether a block can open); output inside a block gets it once the block ends.
  if (phase == reasoning::Phase::kThinking) {
    deferred_constraint = std::move(constraint);
    if (rc.max_tokens == 0) {
      forced.insert(forced.begin(), rc.end_tokens.begin(), rc.end_tokens.end());
      budget_spent = true;
    }
  }
}

void Engine::Live::follow_reasoning(std::string_view piece) {
  std::string reasoning_text, content;  // unused: only the phase matters here
  thinking->push(piece, reasoning_text, content);
  switch (thinking->phase()) {
    case reasoning::Phase::kBefore:
      return;
    case reasoning::Phase::kThinking: {
      ++thinking_tokens;
      const int32_t budget = params.reasoning.max_tokens;
      if (budget >= 0 && thinking_tokens >= budget && !budget_spent) {
        forced.insert(forced.begin(), params.reasoning.end_tokens.begin(),
                      params.reasoning.end_tokens.end());
        budget_spent = true;
      }
      return;
    }
    case reasoning::Phase::kAnswer:
      if (deferred_constraint) constraint = std::move(deferred_constraint);
      thinking.reset();
      return;
  }
}

}  // namespace vela

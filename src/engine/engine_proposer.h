#pragma once
// The proposer of an engine's configured speculative method (spec/proposer.h): prompt lookup, a
// draft model, or the model's multi-token-prediction block, sized for the engine's batches and
// cache. Used by engine.cpp only.
// Pure function; no thread-safety concerns.
#include <memory>

#include "engine/engine.h"

namespace vela::engine_proposer {

// config.n_blocks: the engine's cache blocks (resolved). Null when speculation is off.
std::unique_ptr<Proposer> make_proposer(const Model& target, const EngineConfig& config,
                                        std::shared_ptr<ThreadPool> pool);

}  // namespace vela::engine_proposer

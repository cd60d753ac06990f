#pragma once
// How an engine lays out its cache for a model: the K/V blocks (windowed layers in groups of their
// own), and for recurrent layers the state slots of running sequences, of prefix checkpoints and
// of speculative proposals, in that order. Used by the engine's own files (engine.cpp,
// engine_cache.cpp, engine_factory.cpp: the workers' caches take rank 0's state slots).
// Pure functions; no thread-safety concerns.
#include <cstdint>

#include "engine/engine.h"

namespace vela::engine_cache {

// Checkpoint slots of a recurrent model's cached prefixes (0: none).
int32_t state_checkpoint_slots(const Model& model, const EngineConfig& c);
// State slots a speculating recurrent model saves its proposals' states in (0: none).
int32_t speculation_state_slots(const Model& model, const EngineConfig& c);
// The engine's cache: KV blocks, then the state slots above after one per running sequence.
KvCacheConfig cache_config(const Model& model, const EngineConfig& c);
// Positions between a recurrent model's prefix checkpoints.
int32_t state_checkpoint_interval(const KvCacheConfig& kc, const EngineConfig& c);

}  // namespace vela::engine_cache

#pragma once
// What the scheduler knows of a request: its tokens, how many of them have K/V in the cache,
// its blocks, its priority and its timeline. Prefill and decode are one rule: a request has
// computed num_computed of its tokens, and each step computes some more.
// Thread-safety: owned and mutated by the engine thread only.
#include <chrono>
#include <cstdint>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace vela {

using Clock = std::chrono::steady_clock;

enum class RequestStatus { kWaiting, kRunning, kFinished };

struct RequestTimeline {
  Clock::time_point arrival;
  Clock::time_point first_scheduled;  // unset (epoch) until admitted
  Clock::time_point first_token;
  Clock::time_point last_token;
  Clock::time_point finished;
  double prefill_seconds = 0;  // wall time of the steps that computed prompt tokens
  double decode_seconds = 0;   // wall time of the steps after the first token
};

struct Request {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens; all must be computed to continue
  int32_t n_prompt = 0;
  int32_t num_computed = 0;      // leading tokens whose K/V are in the cache
  int32_t max_total_tokens = 0;  // prompt + output never exceeds this (context or KV capacity)
  int32_t priority = 0;          // higher goes first
  int32_t n_preemptions = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens found in the prefix cache at admission
  bool embedding = false;  // every prompt token is computed (no prefix-cache hits), none sampled
  // Proposed tokens at the end of `tokens`, not yet verified (speculative decoding). Set by the
  // engine before a step and resolved within it; the scheduler runs them with the decode token.
  int32_t n_draft = 0;
  // Its tokens are in a pass that has not returned yet (a pipeline keeps several passes in
  // flight): the scheduler neither schedules nor preempts it until the engine has its outputs.
  bool in_flight = false;
  RequestStatus status = RequestStatus::kWaiting;
  KvSequence kv;
  RequestTimeline timeline;

  int32_t n_output() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
  int32_t n_pending() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
  // Computing its one remaining verified token (and any proposals after it).
  bool is_decode() const { return n_pending() - n_draft == 1; }
};

}  // namespace vela

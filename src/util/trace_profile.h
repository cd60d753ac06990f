#pragma once
// The per-layer / per-operation profile of recorded trace events: time per forward-pass part
// (prepare, each layer, output head) and per operation (summed over layers), each with its
// share of the forward passes' time, and how much of that time the parts account for.
// Free functions over plain values; no shared state.
#include <cstdint>
#include <string>
#include <vector>

#include "util/trace.h"

namespace vela::trace {

struct ProfileRow {
  std::string name;  // "layer 3", "attention", ...
  double seconds = 0;
  double share = 0;  // of the forward passes' time
};

struct Profile {
  int64_t passes = 0;
  double forward_seconds = 0;
  std::vector<ProfileRow> parts;       // prepare, layer 0..n-1, output (partition the pass)
  std::vector<ProfileRow> operations;  // attn_norm, qkv_matmul, ... over every layer
  double parts_share = 0;              // sum of the parts / forward time (1 = fully accounted for)
  double operations_share = 0;         // sum of the operations / sum of the layers
  // The same passes timed by the caller's own clock around them (0: not given), and the share
  // of that time the passes' spans account for: a reading the spans are not derived from.
  double clock_seconds = 0;
  double clock_share = 0;
};

// `clock_seconds`: the passes' time as the caller measured it (0 when it did not).
Profile profile_forward(const std::vector<Event>& events, double clock_seconds = 0);
std::string format_profile(const Profile& profile);  // a markdown table

}  // namespace vela::trace

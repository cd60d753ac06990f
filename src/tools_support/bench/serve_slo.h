#pragma once
// Service-level objectives for `vela bench serve` and the goodput they define: the requests
// that met every objective, as a share of those sent and as a rate. Objectives are named as in
// vLLM's benchmark (`--goodput ttft:MS tpot:MS e2el:MS`) plus `itl`, which bounds every gap
// between two streamed chunks of a request, not their mean: a stream that froze once for a
// second misses it even if its average was fast.
// Free functions over value types; no shared state.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace vela {

struct ServeSlo {
  std::optional<double> ttft_s;  // time to first token
  std::optional<double> itl_s;   // every inter-token gap
  std::optional<double> tpot_s;  // mean time per output token after the first
  std::optional<double> e2e_s;   // end-to-end latency
  bool any() const { return ttft_s || itl_s || tpot_s || e2e_s; }
  std::string describe() const;  // "ttft <= 3000 ms, itl <= 150 ms"
};

// Adds objectives from "KEY:MS" items (KEY one of ttft, itl, tpot, e2el), given as separate
// strings and/or separated by commas or spaces inside one. A repeated key keeps the last value.
Status add_goodput_objectives(std::span<const std::string> specs, ServeSlo& slo);

// One streamed request as the client saw it.
struct ServedRequest {
  bool ok = false;
  double ttft = 0, e2e = 0;  // seconds
  std::span<const double> itl;
  long long output_tokens = 0;
  // Mean seconds per output token after the first; none with fewer than two tokens.
  std::optional<double> tpot() const {
    if (output_tokens < 2) return std::nullopt;
    return (e2e - ttft) / double(output_tokens - 1);
  }
};

bool meets_slo(const ServeSlo& slo, const ServedRequest& r);

}  // namespace vela

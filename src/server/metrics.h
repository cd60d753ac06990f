#pragma once
// Prometheus metrics in the text exposition format (0.0.4), named as vLLM's under a `vela:`
// prefix so vLLM dashboards carry over: engine counters and gauges come from EngineStats at
// scrape time; latency and size histograms are observed as requests finish.
// Thread-safety: observe_*() and count_rejection() are lock-free and may be called from any
// thread (the engine thread observes as requests finish); render() may run concurrently with
// them (a scrape sees each series at some recent moment).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/async_engine.h"

namespace vela::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implicit
  void observe(double value);
  // Appends `<name>_bucket{le=…,<labels>}`, `<name>_sum{…}`, `<name>_count{…}` lines.
  void render(std::string& out, std::string_view name, std::string_view labels) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // [bounds + 1], not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

// One finished engine request, in seconds (negative = did not happen, e.g. no token).
struct RequestRecord {
  double ttft = -1;       // received -> first token
  double e2e = -1;        // received -> finished
  double queue = -1;      // received -> first scheduled
  double prefill = -1;    // first scheduled -> first token
  double decode = -1;     // first token -> last token
  double inference = -1;  // first scheduled -> last token
  double tpot = -1;       // decode / (generated tokens - 1), when > 1 token
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
};

// The times of `timeline` relative to `received` (when the HTTP request was read).
RequestRecord make_request_record(const RequestTimeline& timeline, Clock::time_point received,
                                  int64_t prompt_tokens, int64_t generation_tokens);

enum class Rejection { kQueueFull, kInvalid, kUnauthorized, kTooLarge, kUnavailable, kCount };

// Server-side events counted for operators (each a `vela:<name>_total` counter).
enum class ServerEvent {
  kConnectionShed,     // an idle connection closed to make room under --max-connections
  kConnectionRefused,  // a new connection closed at once: the cap was reached, all busy
  kAccessLogDropped,   // an access-log line dropped: its writer fell behind
  kRequestTimeout,     // a request cut off by --request-timeout
  kCount
};

class ServerMetrics {
 public:
  // max_model_len bounds the token-count histograms (1-2-5 buckets up to it, as vLLM).
  ServerMetrics(std::string model_name, int32_t max_model_len);

  void observe_request(const RequestRecord& record);
  void observe_inter_token(double seconds);
  void count_rejection(Rejection reason);
  void count_event(ServerEvent event);
  uint64_t event_count(ServerEvent event) const;
  void set_open_connections(int64_t n) { open_connections_.store(n, std::memory_order_relaxed); }

  // The whole exposition; `stats` null while the model loads (engine series then read 0).
  std::string render(const EngineStats* stats, int32_t block_size) const;

  const std::string& model_name() const { return model_name_; }

 private:
  std::string model_name_;
  std::string labels_;  // model_name="…", escaped
  Histogram ttft_, itl_, tpot_, e2e_, queue_, prefill_, decode_, inference_;
  Histogram prompt_tokens_, generation_tokens_;
  std::array<std::atomic<uint64_t>, size_t(Rejection::kCount)> rejected_{};
  std::array<std::atomic<uint64_t>, size_t(ServerEvent::kCount)> events_{};
  std::atomic<int64_t> open_connections_{0};
};

// Appends `<name>_bucket{le=…,<labels>}`, `<name>_sum{…}`, `<name>_count{…}` lines from
// per-bucket (not cumulative) counts: [bounds + 1], the last one past every bound.
void append_histogram(std::string& out, std::string_view name, std::string_view labels,
                      std::span<const double> bounds, std::span<const uint64_t> counts, double sum);

// Prometheus label-value escaping: backslash, double quote and newline.
std::string escape_label_value(std::string_view value);

}  // namespace vela::server

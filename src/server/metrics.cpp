#include "server/metrics.h"

#include <algorithm>
#include <charconv>

namespace vela::server {

namespace {

// vLLM's bucket boundaries, with a few sub-10 ms steps added at the low end of the
// per-token histograms since small models on CPUs produce tokens that fast.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2, 0.3,
    0.4,   0.5,    0.75,  1.0,    2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {
    0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,    10.0,
    15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// 1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's build_1_2_5_buckets).
std::vector<double> buckets_1_2_5(int32_t max_value) {
  std::vector<double> out;
  for (int64_t scale = 1;; scale *= 10)
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > std::max<int64_t>(max_value, 1)) return out;
      out.push_back(double(m * scale));
    }
}

void append_number(std::string& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void append_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void append_sample(std::string& out, std::string_view name, std::string_view labels, double v) {
  out += name;
  out += '{';
  out += labels;
  out += "} ";
  append_number(out, v);
  out += '\n';
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void append_histogram(std::string& out, std::string_view name, std::string_view labels,
                      std::span<const double> bounds, std::span<const uint64_t> counts,
                      double sum) {
  // Buckets are cumulative; the +Inf bucket and _count come from the same running total so a
  // scrape that races an observe() still has them agree.
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += counts[i];
    out += name;
    out += "_bucket{le=\"";
    if (i < bounds.size())
      append_number(out, bounds[i]);
    else
      out += "+Inf";
    out += "\",";
    out += labels;
    out += "} ";
    out += std::to_string(cumulative);
    out += '\n';
  }
  std::string sum_name = std::string(name) + "_sum";
  append_sample(out, sum_name, labels, sum);
  out += name;
  out += "_count{";
  out += labels;
  out += "} ";
  out += std::to_string(cumulative);
  out += '\n';
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double value) {
  const size_t i =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  std::vector<uint64_t> counts(bounds_.size() + 1);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = counts_[i].load(std::memory_order_relaxed);
  append_histogram(out, name, labels, bounds_, counts, sum_.load(std::memory_order_relaxed));
}

RequestRecord make_request_record(const RequestTimeline& t, Clock::time_point received,
                                  int64_t prompt_tokens, int64_t generation_tokens) {
  const Clock::time_point unset{};
  RequestRecord r;
  r.prompt_tokens = prompt_tokens;
  r.generation_tokens = generation_tokens;
  if (t.finished != unset) r.e2e = seconds_between(received, t.finished);
  if (t.first_scheduled != unset) r.queue = seconds_between(received, t.first_scheduled);
  if (t.first_token != unset) {
    r.ttft = seconds_between(received, t.first_token);
    r.decode = seconds_between(t.first_token, t.last_token);
    if (t.first_scheduled != unset) {
      r.prefill = seconds_between(t.first_scheduled, t.first_token);
      r.inference = seconds_between(t.first_scheduled, t.last_token);
    }
    if (generation_tokens > 1) r.tpot = r.decode / double(generation_tokens - 1);
  }
  return r;
}

ServerMetrics::ServerMetrics(std::string model_name, int32_t max_model_len)
    : model_name_(std::move(model_name)),
      labels_("model_name=\"" + escape_label_value(model_name_) + "\""),
      ttft_(kTtftBuckets),
      itl_(kTokenLatencyBuckets),
      tpot_(kTokenLatencyBuckets),
      e2e_(kRequestLatencyBuckets),
      queue_(kRequestLatencyBuckets),
      prefill_(kRequestLatencyBuckets),
      decode_(kRequestLatencyBuckets),
      inference_(kRequestLatencyBuckets),
      prompt_tokens_(buckets_1_2_5(max_model_len)),
      generation_tokens_(buckets_1_2_5(max_model_len)) {}

void ServerMetrics::observe_request(const RequestRecord& r) {
  if (r.ttft >= 0) ttft_.observe(r.ttft);
  if (r.e2e >= 0) e2e_.observe(r.e2e);
  if (r.queue >= 0) queue_.observe(r.queue);
  if (r.prefill >= 0) prefill_.observe(r.prefill);
  if (r.decode >= 0) decode_.observe(r.decode);
  if (r.inference >= 0) inference_.observe(r.inference);
  if (r.tpot >= 0) tpot_.observe(r.tpot);
  prompt_tokens_.observe(double(r.prompt_tokens));
  generation_tokens_.observe(double(r.generation_tokens));
}

void ServerMetrics::observe_inter_token(double seconds) {
  itl_.observe(seconds);
}

void ServerMetrics::count_rejection(Rejection reason) {
  rejected_[size_t(reason)].fetch_add(1, std::memory_order_relaxed);
}

void ServerMetrics::count_event(ServerEvent event) {
  events_[size_t(event)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t ServerMetrics::event_count(ServerEvent event) const {
  return events_[size_t(event)].load(std::memory_order_relaxed);
}

namespace {

// Speculative decoding, vLLM's names; per-position acceptances once anything was proposed.
void append_speculative(std::string& out, const EngineCounters& c, const std::string& l) {
  const std::pair<const char*, uint64_t> totals[] = {
      {"vela:spec_decode_num_drafts_total", c.spec_drafts},
      {"vela:spec_decode_num_draft_tokens_total", c.spec_draft_tokens},
      {"vela:spec_decode_num_accepted_tokens_total", c.spec_accepted_tokens}};
  const char* helps[] = {"Number of speculative runs verified.", "Number of tokens proposed.",
                         "Number of proposed tokens accepted."};
  for (size_t i = 0; i < 3; ++i) {
    append_header(out, totals[i].first, "counter", helps[i]);
    append_sample(out, totals[i].first, l, double(totals[i].second));
  }
  if (c.spec_drafts == 0) return;
  append_header(out, "vela:spec_decode_num_accepted_tokens_per_pos", "counter",
                "Accepted proposals by position in the speculative run.");
  for (size_t pos = 0; pos < c.spec_accepted_at.size(); ++pos)
    append_sample(out, "vela:spec_decode_num_accepted_tokens_per_pos",
                  "position=\"" + std::to_string(pos) + "\"," + l, double(c.spec_accepted_at[pos]));
}

// Time in forward passes, and with tensor parallelism what part of it went to communication.
void append_forward(std::string& out, const EngineCounters& c, const std::string& l) {
  append_header(out, "vela:forward_pass_seconds_total", "counter", "Wall time in forward passes.");
  append_sample(out, "vela:forward_pass_seconds_total", l, c.forward_seconds);
  // Without a rank label rank 0's own figures (as in one process, where they are zero); with
  // one, each world rank's (rank="0" the same as the unlabeled sample; the others' as last
  // gathered, current whenever the engine is idle).
  append_header(out, "vela:tensor_parallel_communication_seconds_total", "counter",
                "Wall time of forward passes spent in tensor-parallel communication (rank 0; "
                "each rank's with a rank label).");
  append_sample(out, "vela:tensor_parallel_communication_seconds_total", l,
                c.tp_communication_seconds);
  for (size_t r = 0; r < c.tp_ranks.size(); ++r)
    append_sample(out, "vela:tensor_parallel_communication_seconds_total",
                  "rank=\"" + std::to_string(r) + "\"," + l, c.tp_ranks[r].seconds);
  append_header(out, "vela:tensor_parallel_bytes_sent_total", "counter",
                "Bytes rank 0 sent to the other parallel ranks (each rank's with a rank label).");
  append_sample(out, "vela:tensor_parallel_bytes_sent_total", l, double(c.tp_bytes_sent));
  for (size_t r = 0; r < c.tp_ranks.size(); ++r)
    append_sample(out, "vela:tensor_parallel_bytes_sent_total",
                  "rank=\"" + std::to_string(r) + "\"," + l, double(c.tp_ranks[r].bytes_sent));
  append_header(out, "vela:pipeline_overlapped_passes_total", "counter",
                "Forward passes begun while an earlier one was still in the pipeline's other "
                "stages.");
  append_sample(out, "vela:pipeline_overlapped_passes_total", l, double(c.passes_overlapped));
}

}  // namespace

std::string ServerMetrics::render(const EngineStats* stats, int32_t block_size) const {
  const EngineStats s = stats ? *stats : EngineStats{};
  const std::string& l = labels_;
  std::string out;
  out.reserve(16384);

  append_header(out, "vela:num_requests_running", "gauge",
                "Number of requests in model execution batches.");
  append_sample(out, "vela:num_requests_running", l, double(s.running));
  append_header(out, "vela:num_requests_waiting", "gauge",
                "Number of requests waiting to be processed.");
  append_sample(out, "vela:num_requests_waiting", l, double(s.waiting));
  append_header(out, "vela:kv_cache_usage_perc", "gauge",
                "KV-cache usage. 1 means 100 percent usage (blocks held by requests).");
  append_sample(out, "vela:kv_cache_usage_perc", l,
                s.kv.total > 0 ? double(s.kv.used) / double(s.kv.total) : 0.0);

  // One sample per cache group (engine.h: CacheGroupUsage).
  const auto per_group = [&](const char* name, const char* help, const auto& value) {
    append_header(out, name, "gauge", help);
    for (const CacheGroupUsage& g : s.cache_groups)
      append_sample(out, name, "group=\"" + std::string(g.name) + "\"," + l, double(value(g)));
  };
  per_group("vela:cache_group_usage_perc",
            "Usage of each cache group (K/V blocks of the attention layers, state slots of the "
            "recurrent layers). 1 means 100 percent.",
            [](const CacheGroupUsage& g) {
              return g.total > 0 ? double(g.used) / double(g.total) : 0.0;
            });
  per_group("vela:cache_group_bytes_per_token",
            "Cache bytes one token takes in each group's layers (0: a fixed state per sequence).",
            [](const CacheGroupUsage& g) { return g.bytes_per_token; });
  per_group("vela:cache_group_bytes_per_sequence",
            "The most cache bytes one running sequence holds in each group's layers (a recurrent "
            "state, a sliding window's blocks; 0: it grows with the sequence).",
            [](const CacheGroupUsage& g) { return g.bytes_per_sequence; });
  if (s.state_checkpoints.slots > 0) {
    append_header(out, "vela:state_checkpoint_hits_total", "counter",
                  "Cached prefixes of a recurrent model resumed from a saved state.");
    append_sample(out, "vela:state_checkpoint_hits_total", l, double(s.state_checkpoints.hits));
    append_header(out, "vela:state_checkpoints_saved_total", "counter",
                  "Recurrent states saved at prefix boundaries.");
    append_sample(out, "vela:state_checkpoints_saved_total", l, double(s.state_checkpoints.saved));
  }

  append_header(out, "vela:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  append_sample(out, "vela:prompt_tokens_total", l, double(s.counters.prompt_tokens));
  append_header(out, "vela:generation_tokens_total", "counter",
                "Number of generation tokens processed.");
  append_sample(out, "vela:generation_tokens_total", l, double(s.counters.generation_tokens));
  append_header(out, "vela:num_preemptions_total", "counter", "Cumulative number of preemptions.");
  append_sample(out, "vela:num_preemptions_total", l, double(s.preemptions));
  append_header(out, "vela:prefix_cache_queries_total", "counter",
                "Prefix cache queries, in terms of number of queried tokens.");
  append_sample(out, "vela:prefix_cache_queries_total", l,
                double(s.kv.prefix_queries) * double(block_size));
  append_header(out, "vela:prefix_cache_hits_total", "counter",
                "Prefix cache hits, in terms of number of cached tokens.");
  append_sample(out, "vela:prefix_cache_hits_total", l,
                double(s.kv.prefix_hits) * double(block_size));

  append_header(out, "vela:request_success_total", "counter",
                "Count of finished requests by finish reason.");
  const std::pair<const char*, uint64_t> reasons[] = {{"stop", s.counters.finished_stop},
                                                      {"length", s.counters.finished_length},
                                                      {"abort", s.counters.finished_abort}};
  for (const auto& [reason, n] : reasons)
    append_sample(out, "vela:request_success_total",
                  "finished_reason=\"" + std::string(reason) + "\"," + l, double(n));

  append_header(out, "vela:request_rejected_total", "counter",
                "Requests refused before reaching the engine, by reason.");
  const char* rejection_names[] = {"queue_full", "invalid", "unauthorized", "too_large",
                                   "unavailable"};
  for (size_t i = 0; i < size_t(Rejection::kCount); ++i)
    append_sample(out, "vela:request_rejected_total",
                  "reason=\"" + std::string(rejection_names[i]) + "\"," + l,
                  double(rejected_[i].load(std::memory_order_relaxed)));

  append_header(out, "vela:http_connections_open", "gauge", "Open client connections.");
  append_sample(out, "vela:http_connections_open", l,
                double(open_connections_.load(std::memory_order_relaxed)));
  const std::pair<const char*, const char*> event_series[] = {
      {"vela:http_connections_shed_total",
       "Idle connections closed to stay under the connection cap."},
      {"vela:http_connections_refused_total",
       "New connections closed at once: the cap was reached and every connection was busy."},
      {"vela:access_log_dropped_lines_total",
       "Access-log lines dropped because the log writer fell behind."},
      {"vela:request_timeout_total", "Requests cut off by the per-request deadline."}};
  static_assert(std::size(event_series) == size_t(ServerEvent::kCount));
  for (size_t i = 0; i < size_t(ServerEvent::kCount); ++i) {
    append_header(out, event_series[i].first, "counter", event_series[i].second);
    append_sample(out, event_series[i].first, l,
                  double(events_[i].load(std::memory_order_relaxed)));
  }

  struct Series {
    const char* name;
    const char* help;
    const Histogram* h;
  };
  const Series histograms[] = {
      {"vela:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &ttft_},
      {"vela:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &itl_},
      {"vela:time_per_output_token_seconds",
       "Histogram of the mean time per output token of each request, in seconds.", &tpot_},
      {"vela:e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds.",
       &e2e_},
      {"vela:request_queue_time_seconds",
       "Histogram of time spent waiting before the first schedule, in seconds.", &queue_},
      {"vela:request_prefill_time_seconds",
       "Histogram of time from first schedule to first token, in seconds.", &prefill_},
      {"vela:request_decode_time_seconds",
       "Histogram of time from first token to last token, in seconds.", &decode_},
      {"vela:request_inference_time_seconds",
       "Histogram of time from first schedule to last token, in seconds.", &inference_},
      {"vela:request_prompt_tokens", "Number of prefill tokens processed per request.",
       &prompt_tokens_},
      {"vela:request_generation_tokens", "Number of generation tokens processed per request.",
       &generation_tokens_},
  };
  for (const Series& series : histograms) {
    append_header(out, series.name, "histogram", series.help);
    series.h->render(out, series.name, l);
  }

  // Engine steps, counted on the engine thread and read from the snapshot.
  append_header(out, "vela:engine_step_duration_seconds", "histogram",
                "Histogram of engine step wall time (schedule, forward pass, sampling), seconds.");
  append_histogram(out, "vela:engine_step_duration_seconds", l, kStepSecondsBounds,
                   s.counters.step_seconds.counts, s.counters.step_seconds.sum);
  append_header(out, "vela:engine_step_prefill_tokens", "histogram",
                "Histogram of prompt (prefill) tokens computed per engine step.");
  append_histogram(out, "vela:engine_step_prefill_tokens", l, kStepPrefillTokensBounds,
                   s.counters.step_prefill_tokens.counts, s.counters.step_prefill_tokens.sum);
  append_header(out, "vela:engine_steps_prefill_capped_total", "counter",
                "Engine steps whose prefill tokens the ITL target held back.");
  append_sample(out, "vela:engine_steps_prefill_capped_total", l,
                double(s.counters.steps_prefill_capped));
  append_speculative(out, s.counters, l);
  append_forward(out, s.counters, l);
  return out;
}

}  // namespace vela::server

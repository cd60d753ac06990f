// Prometheus exposition: histogram buckets are cumulative and agree with _count, label values
// are escaped, engine stats map to the vLLM-named series (tensor-parallel figures per rank too),
// and request timelines turn into the right latencies.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace vela::server {
namespace {

TEST(Histogram, CumulativeBucketsSumAndCount) {
  Histogram h({0.1, 1.0, 10.0});
  for (double v : {0.05, 0.1, 0.5, 2.0, 50.0}) h.observe(v);
  std::string out;
  h.render(out, "x", "a=\"b\"");
  EXPECT_EQ(out,
            "x_bucket{le=\"0.1\",a=\"b\"} 2\n"  // le is inclusive: 0.1 counts
            "x_bucket{le=\"1\",a=\"b\"} 3\n"
            "x_bucket{le=\"10\",a=\"b\"} 4\n"
            "x_bucket{le=\"+Inf\",a=\"b\"} 5\n"
            "x_sum{a=\"b\"} 52.65\n"
            "x_count{a=\"b\"} 5\n");
  EXPECT_EQ(h.count(), 5u);
}

TEST(Metrics, LabelEscaping) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, RequestRecordFromTimeline) {
  const Clock::time_point t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  RequestTimeline t;
  t.arrival = at(0.1);
  t.first_scheduled = at(0.5);
  t.first_token = at(1.0);
  t.last_token = at(3.0);
  t.finished = at(3.5);
  const RequestRecord r = make_request_record(t, t0, 10, 5);
  EXPECT_NEAR(r.queue, 0.5, 1e-6);
  EXPECT_NEAR(r.ttft, 1.0, 1e-6);
  EXPECT_NEAR(r.prefill, 0.5, 1e-6);
  EXPECT_NEAR(r.decode, 2.0, 1e-6);
  EXPECT_NEAR(r.inference, 2.5, 1e-6);
  EXPECT_NEAR(r.tpot, 0.5, 1e-6);  // 2 s over 4 gaps
  EXPECT_NEAR(r.e2e, 3.5, 1e-6);
  // A request cancelled before its first token has no token latencies.
  RequestTimeline early;
  early.finished = at(0.2);
  const RequestRecord e = make_request_record(early, t0, 10, 0);
  EXPECT_LT(e.ttft, 0);
  EXPECT_LT(e.queue, 0);
  EXPECT_NEAR(e.e2e, 0.2, 1e-6);
}

TEST(Metrics, RenderMapsEngineStats) {
  ServerMetrics m("my \"model\"", 1000);
  EngineStats s;
  s.running = 3;
  s.waiting = 2;
  s.kv.total = 200;
  s.kv.used = 50;
  s.kv.prefix_queries = 10;
  s.kv.prefix_hits = 4;
  s.counters.prompt_tokens = 123;
  s.counters.generation_tokens = 456;
  s.counters.finished_stop = 7;
  s.counters.finished_length = 8;
  s.counters.finished_abort = 9;
  s.preemptions = 11;
  RequestRecord r;
  r.ttft = 0.02;
  r.e2e = 1.0;
  r.prompt_tokens = 30;
  r.generation_tokens = 600;
  m.observe_request(r);
  m.observe_inter_token(0.003);
  m.count_rejection(Rejection::kQueueFull);
  const std::string text = m.render(&s, 16);
  const std::string l = "model_name=\"my \\\"model\\\"\"";
  for (const std::string& line :
       {"vela:num_requests_running{" + l + "} 3",
        "vela:num_requests_waiting{" + l + "} 2",
        "vela:kv_cache_usage_perc{" + l + "} 0.25",
        "vela:prompt_tokens_total{" + l + "} 123",
        "vela:generation_tokens_total{" + l + "} 456",
        "vela:num_preemptions_total{" + l + "} 11",
        "vela:prefix_cache_queries_total{" + l + "} 160",  // blocks x 16 tokens
        "vela:prefix_cache_hits_total{" + l + "} 64",
        "vela:request_success_total{finished_reason=\"stop\"," + l + "} 7",
        "vela:request_success_total{finished_reason=\"length\"," + l + "} 8",
        "vela:request_success_total{finished_reason=\"abort\"," + l + "} 9",
        "vela:request_rejected_total{reason=\"queue_full\"," + l + "} 1",
        "vela:time_to_first_token_seconds_count{" + l + "} 1",
        "vela:time_to_first_token_seconds_bucket{le=\"0.02\"," + l + "} 1",
        "vela:time_to_first_token_seconds_bucket{le=\"0.01\"," + l + "} 0",
        "vela:inter_token_latency_seconds_count{" + l + "} 1",
        "vela:time_per_output_token_seconds_count{" + l + "} 0",
        "vela:e2e_request_latency_seconds_count{" + l + "} 1",
        "vela:request_generation_tokens_bucket{le=\"500\"," + l + "} 0",
        "vela:request_generation_tokens_bucket{le=\"1000\"," + l + "} 1",
        "vela:request_prompt_tokens_sum{" + l + "} 30",
        std::string("# TYPE vela:request_prompt_tokens histogram")})
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line;
  // Token-count buckets stop at max_model_len (1, 2, 5, ... 1000).
  EXPECT_EQ(text.find("vela:request_prompt_tokens_bucket{le=\"2000\""), std::string::npos);
  // While the model loads every engine series reads 0.
  EXPECT_NE(m.render(nullptr, 16).find("vela:num_requests_running{" + l + "} 0\n"),
            std::string::npos);
}

TEST(Metrics, RenderSpeculativeDecodingCounters) {
  ServerMetrics m("m", 1000);
  EngineStats s;
  const std::string l = "model_name=\"m\"";
  // Nothing proposed yet: the totals read 0 and no per-position series is shown.
  std::string text = m.render(&s, 16);
  EXPECT_NE(text.find("vela:spec_decode_num_drafts_total{" + l + "} 0\n"), std::string::npos);
  EXPECT_EQ(text.find("spec_decode_num_accepted_tokens_per_pos"), std::string::npos);
  s.counters.spec_drafts = 5;
  s.counters.spec_draft_tokens = 20;
  s.counters.spec_accepted_tokens = 9;
  s.counters.spec_accepted_at[0] = 5;
  s.counters.spec_accepted_at[1] = 4;
  text = m.render(&s, 16);
  for (const std::string& line :
       {"vela:spec_decode_num_drafts_total{" + l + "} 5",
        "vela:spec_decode_num_draft_tokens_total{" + l + "} 20",
        "vela:spec_decode_num_accepted_tokens_total{" + l + "} 9",
        "vela:spec_decode_num_accepted_tokens_per_pos{position=\"0\"," + l + "} 5",
        "vela:spec_decode_num_accepted_tokens_per_pos{position=\"1\"," + l + "} 4",
        "vela:spec_decode_num_accepted_tokens_per_pos{position=\"2\"," + l + "} 0"})
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line;
}

TEST(Metrics, RenderTensorParallelFiguresPerRank) {
  ServerMetrics m("m", 1000);
  EngineStats s;
  const std::string l = "model_name=\"m\"";
  // One process: rank 0's unlabeled zeros, no rank series.
  std::string text = m.render(&s, 16);
  EXPECT_NE(text.find("vela:tensor_parallel_bytes_sent_total{" + l + "} 0\n"), std::string::npos);
  EXPECT_EQ(text.find("rank=\""), std::string::npos);
  s.counters.tp_bytes_sent = 1000;
  s.counters.tp_communication_seconds = 0.5;
  s.counters.tp_ranks = {{1000, 0.5}, {800, 0.25}};
  text = m.render(&s, 16);
  for (const std::string& line :
       {"vela:tensor_parallel_bytes_sent_total{" + l + "} 1000",
        "vela:tensor_parallel_bytes_sent_total{rank=\"0\"," + l + "} 1000",
        "vela:tensor_parallel_bytes_sent_total{rank=\"1\"," + l + "} 800",
        "vela:tensor_parallel_communication_seconds_total{" + l + "} 0.5",
        "vela:tensor_parallel_communication_seconds_total{rank=\"0\"," + l + "} 0.5",
        "vela:tensor_parallel_communication_seconds_total{rank=\"1\"," + l + "} 0.25"})
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line;
}

}  // namespace
}  // namespace vela::server

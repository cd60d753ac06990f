#pragma once
// Results of `vela bench` and their presentation: a Markdown table (llama-bench style, one row
// per test and thread count, t/s as mean +- standard deviation, and the fraction of the
// roofline ceiling) and a JSON document with every sample. A model split over tensor- and
// pipeline-parallel ranks adds the communication's share of the forward passes and the bytes each
// rank sent per token.
// Plain value types and pure functions; no thread-safety concerns.
#include <cstdint>
#include <string>
#include <vector>

#include "model/tensor_parallel.h"
#include "tools_support/bench/model_bench.h"
#include "tools_support/bench/roofline.h"

namespace vela::bench {

struct TestResult {
  std::string test;  // "pp512" or "tg128"; after a context, "tg128 @ d4096" (test_name())
  int32_t n_prompt = 0;
  int32_t n_gen = 0;
  int32_t n_depth = 0;  // tokens of context computed before each run, untimed
  int32_t n_batch = 0;
  int32_t n_threads = 1;
  std::vector<double> seconds;  // one per repetition
  // Roofline: pp compares FLOP/s with the arithmetic peak, tg weight bytes/s with bandwidth. The
  // host's ceilings drift (2x within minutes on a shared machine), so each run is compared with
  // the ceiling of its own moment: the mean of the ceiling measured just before and just after it.
  double work_per_run = 0;       // pp: FLOPs; tg: weight bytes read
  std::vector<double> ceilings;  // one per repetition (pp: ops/s; tg: bytes/s); empty: not measured
  std::string ceiling_name;      // "int8 peak", "fp32 peak", "bf16 peak" or "read bandwidth"

  double tokens() const { return double(n_prompt + n_gen); }
  std::vector<double> tokens_per_second() const;
  double mean_tps() const;
  double stddev_tps() const;    // sample standard deviation; 0 with one repetition
  double achieved() const;      // work_per_run / mean seconds
  double mean_ceiling() const;  // 0 when not measured
  // Per repetition: work_per_run / its seconds / its ceiling; empty when not measured.
  std::vector<double> fractions() const;
  double fraction() const;  // the median of fractions(); 0 when not measured

  // tg: every decode step's seconds, over every repetition (empty for pp). A step that the host
  // stalled (its vCPU descheduled for tens of milliseconds on a shared machine) takes a multiple
  // of the others, so the median step shows the pass's own speed, and the stalls are counted
  // apart: the steps over kStallFactor x the median, and their seconds beyond the median as a
  // share of all steps' seconds.
  static constexpr double kStallFactor = 1.5;
  std::vector<double> step_seconds;
  double median_step_seconds() const;  // 0 without steps
  int64_t stalled_steps() const;
  double stall_share() const;
  // One step's work / the median step's seconds / mean_ceiling(); 0 without steps or ceilings.
  double median_step_fraction() const;

  // A split model, over every repetition: rank 0's seconds in forward passes and in the group's
  // calls, and each world rank's bytes sent and seconds communicating (index: world rank).
  double forward_seconds = 0;
  double communication_seconds = 0;
  std::vector<TensorParallelTraffic> ranks;

  double communication_share() const;  // communication_seconds / forward_seconds
  double bytes_sent_per_token(size_t rank) const;
};

struct BenchReport {
  std::string model_path;
  ModelProfile model;
  std::string cpu;  // describe_cpu()
  std::string isa;  // the kernel level in use
  bool threads_supported = true;
  size_t bandwidth_buffer_bytes = 0;
  std::vector<Roofline> rooflines;  // one per thread count
  std::vector<TestResult> results;
  // A split model: tensor_parallel x pipeline_parallel ranks, each running -t threads. The
  // roofline work is then one rank's (rank_model: per_rank_profile) against one rank's ceiling.
  int32_t tensor_parallel = 1;
  int32_t pipeline_parallel = 1;
  ModelProfile rank_model;
  bool split() const { return tensor_parallel * pipeline_parallel > 1; }
};

// llama-bench's test names: "pp512", "tg128", and after a context "pp512 @ d4096".
std::string test_name(int32_t n_prompt, int32_t n_gen, int32_t n_depth);

std::string format_markdown(const BenchReport& report);
std::string format_json(const BenchReport& report);  // pretty-printed, ends with a newline

}  // namespace vela::bench

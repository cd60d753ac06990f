#include "tools_support/bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <nlohmann/json.hpp>

namespace vela::bench {
namespace {

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

// 1234567 -> "1.23 M" style with the unit appended.
std::string si(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 5) v /= 1000, ++i;
  return fmt("%.2f ", v) + prefixes[i] + unit;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

}  // namespace

std::string test_name(int32_t n_prompt, int32_t n_gen, int32_t n_depth) {
  std::string name = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
  if (n_depth > 0) name += " @ d" + std::to_string(n_depth);
  return name;
}

std::vector<double> TestResult::tokens_per_second() const {
  std::vector<double> tps;
  for (double s : seconds) tps.push_back(s > 0 ? tokens() / s : 0);
  return tps;
}

double TestResult::mean_tps() const {
  const auto tps = tokens_per_second();
  return tps.empty() ? 0 : std::accumulate(tps.begin(), tps.end(), 0.0) / double(tps.size());
}

double TestResult::stddev_tps() const {
  const auto tps = tokens_per_second();
  if (tps.size() < 2) return 0;
  const double m = mean_tps();
  double ss = 0;
  for (double x : tps) ss += (x - m) * (x - m);
  return std::sqrt(ss / double(tps.size() - 1));
}

double TestResult::achieved() const {
  if (seconds.empty()) return 0;
  const double mean_s =
      std::accumulate(seconds.begin(), seconds.end(), 0.0) / double(seconds.size());
  return mean_s > 0 ? work_per_run / mean_s : 0;
}

double TestResult::mean_ceiling() const {
  return ceilings.empty()
             ? 0
             : std::accumulate(ceilings.begin(), ceilings.end(), 0.0) / double(ceilings.size());
}

std::vector<double> TestResult::fractions() const {
  std::vector<double> f;
  if (ceilings.size() != seconds.size()) return f;
  for (size_t i = 0; i < seconds.size(); ++i)
    f.push_back(ceilings[i] > 0 && seconds[i] > 0 ? work_per_run / seconds[i] / ceilings[i] : 0);
  return f;
}

double TestResult::fraction() const {
  return median_of(fractions());
}

double TestResult::median_step_seconds() const {
  return median_of(step_seconds);
}

int64_t TestResult::stalled_steps() const {
  const double limit = kStallFactor * median_step_seconds();
  return std::count_if(step_seconds.begin(), step_seconds.end(),
                       [&](double s) { return s > limit; });
}

double TestResult::stall_share() const {
  const double median = median_step_seconds(), limit = kStallFactor * median;
  double beyond = 0, total = 0;
  for (double s : step_seconds) {
    total += s;
    if (s > limit) beyond += s - median;
  }
  return total > 0 ? beyond / total : 0;
}

double TestResult::median_step_fraction() const {
  const double step = median_step_seconds(), ceiling = mean_ceiling();
  if (step <= 0 || ceiling <= 0 || n_gen <= 0) return 0;
  return work_per_run / double(n_gen) / step / ceiling;
}

double TestResult::communication_share() const {
  return forward_seconds > 0 ? communication_seconds / forward_seconds : 0;
}

double TestResult::bytes_sent_per_token(size_t rank) const {
  const double n = tokens() * double(seconds.size());
  return rank < ranks.size() && n > 0 ? double(ranks[rank].bytes_sent) / n : 0;
}

std::string format_markdown(const BenchReport& r) {
  std::string out = "cpu: " + r.cpu + "; kernels: " + r.isa + "\n";
  if (r.split()) {
    const int32_t n = r.tensor_parallel * r.pipeline_parallel;
    out += "model split over " + std::to_string(r.tensor_parallel) + " x " +
           std::to_string(r.pipeline_parallel) +
           " ranks (tensor-parallel x pipeline-parallel: " + std::to_string(n) +
           " processes, each running the threads column's threads); " +
           "roofline per rank: one rank's share of the work (its weights, " +
           fmt("%.2f MiB", double(r.rank_model.decode_bytes) / (1 << 20)) +
           " read per token of the whole model's " +
           fmt("%.2f MiB", double(r.model.decode_bytes) / (1 << 20)) +
           "; a token passes the stages in turn) against one rank's ceiling at those threads\n";
  }
  if (!r.threads_supported)
    out += "note: this build's forward pass is single-threaded; the threads column is nominal\n";
  for (const Roofline& c : r.rooflines) {
    out += "roofline, " + std::to_string(c.n_threads) + " thread" + (c.n_threads == 1 ? "" : "s") +
           ": ";
    out += c.read_bytes_per_s > 0 ? "read bandwidth " + si(c.read_bytes_per_s, "B/s")
                                  : "read bandwidth not measured";
    out += ", fp32 peak " + si(c.fp32_flops, "FLOP/s") + ", int8 peak " + si(c.int8_ops, "OP/s");
    if (c.bf16_flops > 0) out += ", bf16 peak " + si(c.bf16_flops, "FLOP/s");
    out += "\n";
  }
  if (r.bandwidth_buffer_bytes)
    out += "(bandwidth buffer " + fmt("%.0f", double(r.bandwidth_buffer_bytes) / (1 << 20)) +
           " MiB)\n";
  if (!r.rooflines.empty())
    out +=
        "roofline: each run's share of the ceiling measured just before and just after it, the "
        "median run's shown (in brackets: the achieved rate and the ceiling, averaged over the "
        "runs)\n";
  out += "\n| model | size | params | type | threads | test | t/s | roofline |";
  out += r.split() ? " comm | sent/token/rank |\n" : "\n";
  out += "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |";
  out += r.split() ? " ---: | ---: |\n" : "\n";
  for (const TestResult& t : r.results) {
    std::string roof = "-";
    if (t.mean_ceiling() > 0) {
      const char* unit = t.n_gen > 0 ? "B/s" : "FLOP/s";
      roof = fmt("%.1f%%", 100.0 * t.fraction()) + " of " + t.ceiling_name + " (" +
             si(t.achieved(), unit) + " of " + si(t.mean_ceiling(), unit) + ")";
    }
    out += "| " + r.model.name + " | " + fmt("%.2f MiB", double(r.model.file_bytes) / (1 << 20)) +
           " | " + fmt("%.2f B", double(r.model.n_params) / 1e9) + " | " + r.model.type_name +
           " | " + std::to_string(t.n_threads) + " | " + t.test + " | " +
           fmt("%.2f", t.mean_tps()) + " ± " + fmt("%.2f", t.stddev_tps()) + " | " + roof + " |";
    if (r.split()) {
      std::string sent;
      for (size_t i = 0; i < t.ranks.size(); ++i)
        sent += (i ? " / " : "") + si(t.bytes_sent_per_token(i), "B");
      out += ' ';
      out += fmt("%.1f%%", 100.0 * t.communication_share()) + " | " + (sent.empty() ? "-" : sent) +
             " |";
    }
    out += "\n";
  }
  std::string steps;
  for (const TestResult& t : r.results) {
    if (t.step_seconds.empty()) continue;
    const double median = t.median_step_seconds();
    steps += t.test + ", " + std::to_string(t.n_threads) + " thread" +
             (t.n_threads == 1 ? "" : "s") + ": median step " + fmt("%.2f ms", 1e3 * median);
    if (t.median_step_fraction() > 0)
      steps += " (" + si(t.work_per_run / double(t.n_gen) / median, "B/s") + ", " +
               fmt("%.1f%%", 100.0 * t.median_step_fraction()) + " of " + t.ceiling_name + ")";
    steps += "; " + std::to_string(t.stalled_steps()) + " of " +
             std::to_string(t.step_seconds.size()) + " steps stalled (over " +
             fmt("%.1fx", TestResult::kStallFactor) + " the median), " +
             fmt("%.1f%%", 100.0 * t.stall_share()) + " of the time beyond the median\n";
  }
  if (!steps.empty()) out += "\n" + steps;
  if (r.split())
    out +=
        "\ncomm: rank 0's seconds in the group's calls / its seconds in forward passes; "
        "sent/token/rank: bytes each world rank sent per token, ranks 0 / 1 / ...\n";
  return out;
}

std::string format_json(const BenchReport& r) {
  using nlohmann::json;
  json j;
  j["model"] = {{"path", r.model_path},
                {"name", r.model.name},
                {"type", r.model.type_name},
                {"file_bytes", r.model.file_bytes},
                {"n_params", r.model.n_params},
                {"block_matrix_params", r.model.block_matrix_params},
                {"output_params", r.model.output_params},
                {"decode_bytes_per_token", r.model.decode_bytes},
                {"kv_bytes_per_position", r.model.kv_bytes_per_position},
                {"state_bytes", r.model.state_bytes}};
  json roof = json::array();
  for (const Roofline& c : r.rooflines)
    roof.push_back({{"threads", c.n_threads},
                    {"read_bandwidth_bytes_per_s", c.read_bytes_per_s},
                    {"peak_fp32_flops", c.fp32_flops},
                    {"peak_int8_ops", c.int8_ops},
                    {"peak_bf16_flops", c.bf16_flops}});
  j["machine"] = {{"cpu", r.cpu},
                  {"kernel_isa", r.isa},
                  {"forward_threads_supported", r.threads_supported},
                  {"bandwidth_buffer_bytes", r.bandwidth_buffer_bytes},
                  {"roofline", roof}};
  json results = json::array();
  for (const TestResult& t : r.results)
    results.push_back({{"test", t.test},
                       {"n_prompt", t.n_prompt},
                       {"n_gen", t.n_gen},
                       {"n_depth", t.n_depth},
                       {"n_batch", t.n_batch},
                       {"threads", t.n_threads},
                       {"repetitions", t.seconds.size()},
                       {"samples_s", t.seconds},
                       {"samples_ts", t.tokens_per_second()},
                       {"avg_ts", t.mean_tps()},
                       {"stddev_ts", t.stddev_tps()},
                       {"roofline_work", t.work_per_run},
                       {"roofline_achieved", t.achieved()},
                       {"roofline_ceiling", t.mean_ceiling()},
                       {"roofline_ceiling_name", t.ceiling_name},
                       {"roofline_ceilings", t.ceilings},
                       {"roofline_fractions", t.fractions()},
                       {"roofline_fraction", t.fraction()}});
  for (size_t i = 0; i < r.results.size(); ++i) {
    const TestResult& t = r.results[i];
    if (t.step_seconds.empty()) continue;
    results[i]["step_samples_s"] = t.step_seconds;
    results[i]["step_median_s"] = t.median_step_seconds();
    results[i]["step_median_roofline_fraction"] = t.median_step_fraction();
    results[i]["stall_factor"] = TestResult::kStallFactor;
    results[i]["stalled_steps"] = t.stalled_steps();
    results[i]["stall_share"] = t.stall_share();
  }
  if (r.split()) {
    for (size_t i = 0; i < r.results.size(); ++i) {
      const TestResult& t = r.results[i];
      json ranks = json::array();
      for (size_t k = 0; k < t.ranks.size(); ++k)
        ranks.push_back({{"rank", k},
                         {"bytes_sent", t.ranks[k].bytes_sent},
                         {"bytes_sent_per_token", t.bytes_sent_per_token(k)},
                         {"communication_seconds", t.ranks[k].seconds}});
      results[i]["forward_seconds"] = t.forward_seconds;
      results[i]["communication_seconds"] = t.communication_seconds;
      results[i]["communication_share"] = t.communication_share();
      results[i]["ranks"] = ranks;
    }
    j["parallel"] = {{"tensor_parallel_size", r.tensor_parallel},
                     {"pipeline_parallel_size", r.pipeline_parallel},
                     {"ranks", r.tensor_parallel * r.pipeline_parallel},
                     {"roofline_basis", "per rank"},
                     {"rank_block_matrix_params", r.rank_model.block_matrix_params},
                     {"rank_output_params", r.rank_model.output_params},
                     {"rank_decode_bytes_per_token", r.rank_model.decode_bytes}};
  }
  j["results"] = results;
  return j.dump(2) + "\n";
}

}  // namespace vela::bench

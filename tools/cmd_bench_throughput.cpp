// `vela bench throughput -m MODEL`: offline serving throughput. N prompts submitted at once
// through the continuous-batching engine vs the same prompts one at a time; KV waste at the
// peak; and a shared-prefix scenario with the prefix cache on and off. With
// --tensor-parallel-size, also the communication's share of the forward passes and the bytes
// rank 0 sent per computed token, and each rank's bytes sent and seconds communicating.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "engine/engine_factory.h"
#include "moe_experts_flag.h"
#include "speculative_flags.h"
#include "tensor_parallel_role.h"
#include "trace_option.h"

namespace vela::cli {
namespace {

struct RunResult {
  double seconds = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  size_t requests = 0;
  double kv_waste = 0;  // at the step with the most KV slots allocated
  uint64_t prefix_queries = 0, prefix_hits = 0;
  uint64_t preemptions = 0;
  // Tensor parallelism (rank 0): bytes sent, seconds communicating, seconds in forward passes.
  uint64_t tp_bytes = 0;
  double tp_seconds = 0, forward_seconds = 0;
  std::vector<TensorParallelTraffic> tp_ranks;  // each world rank's, during the run
  // Engine steps, and speculation: runs of proposals verified, proposals, accepted proposals.
  uint64_t steps = 0, spec_runs = 0, spec_proposed = 0, spec_accepted = 0;

  double requests_per_s() const { return double(requests) / seconds; }
  double output_tokens_per_s() const { return double(output_tokens) / seconds; }
  double total_tokens_per_s() const { return double(prompt_tokens + output_tokens) / seconds; }
};

// Submits all prompts (or one at a time) and runs the engine until they are done.
Result<RunResult> run(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                      int32_t output_len, bool one_at_a_time) {
  SamplingParams params;
  params.temperature = 0;
  params.max_tokens = output_len;
  params.ignore_eos = true;
  RunResult r;
  const BlockPoolUsage before = engine.kv_usage();
  const uint64_t preempt_before = engine.n_preemptions();
  const EngineCounters counters_before = engine.counters();
  const auto start = std::chrono::steady_clock::now();
  const auto on_event = [&r](const RequestEvent& e) {
    if (e.finished) r.output_tokens += int64_t(e.output->token_ids.size());
  };
  const auto drain = [&]() -> Status {
    while (engine.has_unfinished())
      if (auto st = engine.step(); !st) return st;
    return {};
  };
  for (const auto& p : prompts) {
    auto id = engine.add_request(p, params, 0, on_event);
    if (!id) return id.error();
    r.prompt_tokens += int64_t(p.size());
    if (one_at_a_time)
      if (auto st = drain(); !st) return st.error();
  }
  if (auto st = drain(); !st) return st.error();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.requests = prompts.size();
  const EngineCounters& c = engine.counters();
  r.kv_waste =
      c.peak_slot_capacity ? 1.0 - double(c.peak_slots_used) / double(c.peak_slot_capacity) : 0.0;
  const BlockPoolUsage after = engine.kv_usage();
  r.prefix_queries = after.prefix_queries - before.prefix_queries;
  r.prefix_hits = after.prefix_hits - before.prefix_hits;
  r.preemptions = engine.n_preemptions() - preempt_before;
  r.tp_bytes = c.tp_bytes_sent - counters_before.tp_bytes_sent;
  r.tp_seconds = c.tp_communication_seconds - counters_before.tp_communication_seconds;
  r.forward_seconds = c.forward_seconds - counters_before.forward_seconds;
  r.steps = c.steps - counters_before.steps;
  r.spec_runs = c.spec_drafts - counters_before.spec_drafts;
  r.spec_proposed = c.spec_draft_tokens - counters_before.spec_draft_tokens;
  r.spec_accepted = c.spec_accepted_tokens - counters_before.spec_accepted_tokens;
  // The engine gathers the ranks' figures once it has no request left, as at the end of drain().
  r.tp_ranks = traffic_since(counters_before.tp_ranks, c.tp_ranks);
  return r;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int32_t n, int32_t n_vocab) {
  // Ids from the middle of the vocabulary: ordinary tokens, no control tokens at the ends.
  std::uniform_int_distribution<int32_t> dist(std::min(100, n_vocab - 1),
                                              std::max(n_vocab - 100, 1));
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& t : out) t = dist(rng);
  return out;
}

nlohmann::json to_json(const RunResult& r) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t i = 0; i < r.tp_ranks.size(); ++i)
    ranks.push_back({{"rank", i},
                     {"bytes_sent", r.tp_ranks[i].bytes_sent},
                     {"communication_seconds", r.tp_ranks[i].seconds}});
  return {{"seconds", r.seconds},
          {"requests", r.requests},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"requests_per_s", r.requests_per_s()},
          {"output_tokens_per_s", r.output_tokens_per_s()},
          {"total_tokens_per_s", r.total_tokens_per_s()},
          {"kv_waste_at_peak", r.kv_waste},
          {"prefix_cache_queries", r.prefix_queries},
          {"prefix_cache_hits", r.prefix_hits},
          {"preemptions", r.preemptions},
          {"forward_seconds", r.forward_seconds},
          {"steps", r.steps},
          {"speculative_runs", r.spec_runs},
          {"speculative_proposed_tokens", r.spec_proposed},
          {"speculative_accepted_tokens", r.spec_accepted},
          {"tensor_parallel_communication_seconds", r.tp_seconds},
          {"tensor_parallel_bytes_sent_per_token",
           double(r.tp_bytes) / double(std::max<int64_t>(1, r.prompt_tokens + r.output_tokens))},
          {"tensor_parallel_ranks", ranks}};
}

void print_row(const char* name, const RunResult& r) {
  std::printf(
      "| %-34s | %8zu | %9.2f | %10.3f | %12.1f | %11.1f | %7.2f%% | %12s |\n", name, r.requests,
      r.seconds, r.requests_per_s(), r.output_tokens_per_s(), r.total_tokens_per_s(),
      100.0 * r.kv_waste,
      r.prefix_queries
          ? (std::to_string(int(100.0 * double(r.prefix_hits) / double(r.prefix_queries))) + "%")
                .c_str()
          : "-");
}

}  // namespace

int run_bench_throughput(int argc, char** argv) {
  Args args(
      "bench throughput", "-m MODEL.gguf [options]",
      {{"model", 'm', "FILE", "GGUF model"},
       {"num-prompts", 0, "N", "prompts submitted at once (default 64)"},
       {"input-len", 0, "N", "prompt tokens each (default 128; random ids)"},
       {"output-len", 0, "N", "generated tokens each (default 128)"},
       {"sequential-prompts", 0, "N", "how many of them to also run one at a time (default 8)"},
       {"shared-prefix-len", 0, "N",
        "also run a shared-prefix scenario with this prefix (default 1000; 0 = skip)"},
       {"shared-prefix-prompts", 0, "N", "requests in the shared-prefix scenario (default 32)"},
       {"threads", 't', "N", "threads (default: physical cores)"},
       {"max-num-seqs", 0, "N", "running sequences at most (default 64)"},
       {"max-num-batched-tokens", 0, "N", "token budget per step (default 512)"},
       {"ctx-size", 'c', "N", "context length (default: the model's, at most 4096)"},
       {"kv-type", 0, "TYPE", "KV cache type (default f16)"},
       {"block-size", 0, "N", "KV token slots per block (default 8)"},
       {"seed", 's', "N", "prompt seed (default 1)"},
       {"output", 'o', "md|json", "output format (default md)"},
       {"tensor-parallel-size", 0, "N", kTensorParallelHelp},
       {"pipeline-parallel-size", 0, "N", kPipelineParallelHelp},
       {"moe-experts", 0, "MODE", kMoeExpertsHelp},
       {"trace", 0, "FILE", "write a Chrome/Perfetto trace of the runs to FILE"}});
  add_speculative_flags(args);
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  const auto num = args.get_int("num-prompts", 64, 1, 100000);
  const auto in_len = args.get_int("input-len", 128, 1, 1 << 20);
  const auto out_len = args.get_int("output-len", 128, 1, 1 << 20);
  const auto seq_n = args.get_int("sequential-prompts", 8, 0, 100000);
  const auto prefix_len = args.get_int("shared-prefix-len", 1000, 0, 1 << 20);
  const auto prefix_n = args.get_int("shared-prefix-prompts", 32, 1, 100000);
  const auto threads = args.get_int("threads", 0, 0, 1024);
  const auto max_seqs = args.get_int("max-num-seqs", 64, 1, 4096);
  const auto budget = args.get_int("max-num-batched-tokens", 512, 1, 65536);
  const auto ctx = args.get_int("ctx-size", 0, 0, 1 << 24);
  const auto seed = args.get_int("seed", 1, 0, INT64_MAX);
  const auto block_size = args.get_int("block-size", 8, 1, 1024);
  const auto tensor_parallel = args.get_int("tensor-parallel-size", 1, 1, 256);
  const auto pipeline_parallel = args.get_int("pipeline-parallel-size", 1, 1, 256);
  for (const auto* r :
       {&num, &in_len, &out_len, &seq_n, &prefix_len, &prefix_n, &threads, &max_seqs, &budget, &ctx,
        &seed, &block_size, &tensor_parallel, &pipeline_parallel}) {
    if (!*r) {
      std::fprintf(stderr, "%s\n", r->message().c_str());
      return 2;
    }
  }
  const std::string format = args.get("output", "md");
  if (!args.has("model") || (format != "md" && format != "json") || !args.positional().empty()) {
    std::fprintf(stderr, "vela bench throughput: expected -m MODEL and -o md|json (see --help)\n");
    return 2;
  }
  EngineOptions options;
  options.model_path = args.get("model");
  options.n_threads = int32_t(*threads);
  options.max_num_seqs = int32_t(*max_seqs);
  options.max_num_batched_tokens = int32_t(*budget);
  options.max_context = int32_t(*ctx);
  options.kv_cache_type = args.get("kv-type", "f16");
  options.block_size = int32_t(*block_size);
  options.tensor_parallel_size = int32_t(*tensor_parallel);
  options.pipeline_parallel_size = int32_t(*pipeline_parallel);
  if (auto moe_experts = read_moe_experts(args); moe_experts) {
    options.moe_experts = *moe_experts;
  } else {
    std::fprintf(stderr, "%s\n", moe_experts.message().c_str());
    return 2;
  }
  if (auto spec = read_speculative_flags(args); spec) {
    apply_speculative_flags(*spec, options);
  } else {
    std::fprintf(stderr, "%s\n", spec.message().c_str());
    return 2;
  }
  const auto make = [&](bool prefix_caching) {
    EngineOptions o = options;
    o.enable_prefix_caching = prefix_caching;
    return make_engine(o);
  };

  auto engine = make(true);
  if (!engine) {
    std::fprintf(stderr, "vela bench throughput: %s\n", engine.message().c_str());
    return 1;
  }
  const int32_t n_vocab = (*engine)->model().config().n_vocab;
  std::mt19937_64 rng(static_cast<uint64_t>(*seed));
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < *num; ++i)
    prompts.push_back(random_tokens(rng, int32_t(*in_len), n_vocab));
  nlohmann::json out = {{"model", options.model_path}, {"num_prompts", *num},
                        {"input_len", *in_len},        {"output_len", *out_len},
                        {"max_num_seqs", *max_seqs},   {"max_num_batched_tokens", *budget}};
  TraceOption trace_file(args.get("trace"), "bench throughput");
  std::fprintf(stderr, "vela bench: %lld prompts x (%lld in, %lld out), batched...\n",
               (long long)*num, (long long)*in_len, (long long)*out_len);
  auto batched = run(**engine, prompts, int32_t(*out_len), false);
  if (!batched) {
    std::fprintf(stderr, "vela bench throughput: %s\n", batched.message().c_str());
    return 1;
  }
  out["batched"] = to_json(*batched);

  std::optional<RunResult> sequential;
  if (*seq_n > 0) {
    // A fresh engine so the batched run's cached prefixes do not help.
    auto fresh = make(false);
    if (!fresh) return 1;
    std::fprintf(stderr, "vela bench: %lld of them one at a time...\n",
                 (long long)std::min(*seq_n, *num));
    std::vector<std::vector<int32_t>> some(prompts.begin(),
                                           prompts.begin() + long(std::min(*seq_n, *num)));
    auto s = run(**fresh, some, int32_t(*out_len), true);
    if (!s) {
      std::fprintf(stderr, "vela bench throughput: %s\n", s.message().c_str());
      return 1;
    }
    sequential = *s;
    out["one_at_a_time"] = to_json(*s);
    out["batched_over_one_at_a_time_output_tokens_per_s"] =
        batched->output_tokens_per_s() / s->output_tokens_per_s();
  }

  std::optional<RunResult> shared_on, shared_off;
  if (*prefix_len > 0) {
    std::vector<std::vector<int32_t>> shared;
    const auto prefix = random_tokens(rng, int32_t(*prefix_len), n_vocab);
    for (int64_t i = 0; i < *prefix_n; ++i) {
      auto p = prefix;
      const auto suffix = random_tokens(rng, 16, n_vocab);
      p.insert(p.end(), suffix.begin(), suffix.end());
      shared.push_back(std::move(p));
    }
    for (bool caching : {true, false}) {
      auto e = make(caching);
      if (!e) return 1;
      std::fprintf(stderr,
                   "vela bench: shared %lld-token prefix x %lld requests, prefix cache %s...\n",
                   (long long)*prefix_len, (long long)*prefix_n, caching ? "on" : "off");
      auto s = run(**e, shared, 16, false);
      if (!s) {
        std::fprintf(stderr, "vela bench throughput: %s\n", s.message().c_str());
        return 1;
      }
      (caching ? shared_on : shared_off) = *s;
    }
    out["shared_prefix"] = {
        {"prefix_len", *prefix_len},
        {"requests", *prefix_n},
        {"prefix_cache_on", to_json(*shared_on)},
        {"prefix_cache_off", to_json(*shared_off)},
        {"hit_rate", shared_on->prefix_queries
                         ? double(shared_on->prefix_hits) / double(shared_on->prefix_queries)
                         : 0.0},
        {"time_saved_fraction", 1.0 - shared_on->seconds / shared_off->seconds}};
  }

  if (!trace_file.finish()) return 1;
  if (format == "json") {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("| %-34s | %8s | %9s | %10s | %12s | %11s | %8s | %12s |\n", "run", "requests",
              "seconds", "requests/s", "output tok/s", "total tok/s", "KV waste", "prefix hits");
  std::printf(
      "|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(10, '-').c_str(),
      std::string(11, '-').c_str(), std::string(12, '-').c_str(), std::string(14, '-').c_str(),
      std::string(13, '-').c_str(), std::string(10, '-').c_str(), std::string(14, '-').c_str());
  print_row("batched (all submitted at once)", *batched);
  if (sequential) print_row("one at a time", *sequential);
  if (shared_on) print_row("shared prefix, prefix cache on", *shared_on);
  if (shared_off) print_row("shared prefix, prefix cache off", *shared_off);
  if (*tensor_parallel * *pipeline_parallel > 1)
    for (const auto& [name, r] : {std::pair<const char*, const RunResult*>{"batched", &*batched},
                                  {"one at a time", sequential ? &*sequential : nullptr}})
      if (r) {
        const double tokens = double(std::max<int64_t>(1, r->prompt_tokens + r->output_tokens));
        std::printf(
            "\ntensor parallel x%lld, pipeline x%lld, %s: communication %.1f%% of the "
            "forward passes, rank 0 sent %.0f bytes per token",
            (long long)*tensor_parallel, (long long)*pipeline_parallel, name,
            100.0 * r->tp_seconds / std::max(r->forward_seconds, 1e-12),
            double(r->tp_bytes) / tokens);
        for (size_t i = 0; i < r->tp_ranks.size(); ++i)
          std::printf(
              "\n  rank %zu: sent %.0f bytes (%.0f per token), %.3f s communicating (%.1f%% of "
              "rank 0's forward passes)",
              i, double(r->tp_ranks[i].bytes_sent), double(r->tp_ranks[i].bytes_sent) / tokens,
              r->tp_ranks[i].seconds,
              100.0 * r->tp_ranks[i].seconds / std::max(r->forward_seconds, 1e-12));
      }
  if ((*engine)->config().speculative.enabled())
    for (const auto& [name, r] : {std::pair<const char*, const RunResult*>{"batched", &*batched},
                                  {"one at a time", sequential ? &*sequential : nullptr}})
      if (r)
        std::printf(
            "\nspeculation, %s: %llu steps, %llu runs verified, %llu proposals, %llu "
            "accepted",
            name, (unsigned long long)r->steps, (unsigned long long)r->spec_runs,
            (unsigned long long)r->spec_proposed, (unsigned long long)r->spec_accepted);
  if (sequential)
    std::printf("\nbatched / one-at-a-time output tokens/s: %.2fx\n",
                batched->output_tokens_per_s() / sequential->output_tokens_per_s());
  if (shared_on)
    std::printf("shared prefix: hit rate %.1f%%, time saved by the prefix cache %.1f%%\n",
                100.0 * out["shared_prefix"]["hit_rate"].get<double>(),
                100.0 * out["shared_prefix"]["time_saved_fraction"].get<double>());
  return 0;
}

}  // namespace vela::cli
